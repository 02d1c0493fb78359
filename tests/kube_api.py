"""A small local HTTP server that speaks the few Kubernetes API endpoints the `kubernetes` executor uses — no API
server can run here. It keeps nodes and pods in memory and behaves like the real one where it matters:

* GET/PATCH /api/v1/nodes/{name}: a JSON merge patch (RFC 7386, Content-Type application/merge-patch+json only),
  resourceVersion checked (409 on a stale one) and bumped;
* GET /api/v1/pods?fieldSelector=spec.nodeName=X;
* POST /api/v1/namespaces/{ns}/pods/{name}/eviction: 201 and the pod is gone, or 429 while a PodDisruptionBudget
  (the `pdb_blocked` set) does not allow it — the Eviction API's contract;
* every call needs `Authorization: Bearer <token>` (401 otherwise).
"""

from __future__ import annotations

import copy
import json
import re
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def pod(name: str, node: str, *, namespace: str = "default", daemonset: bool = False, mirror: bool = False) -> dict:
    metadata = {"name": name, "namespace": namespace, "uid": f"uid-{name}", "annotations": {}}
    if daemonset:
        metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "dcgm", "uid": "d"}]
    if mirror:
        metadata["annotations"]["kubernetes.io/config.mirror"] = "x"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": "busybox"}]},
            "status": {"phase": "Running"}}


class FakeKubeAPI:
    def __init__(self, token: str):
        self.token = token
        self.nodes: dict[str, dict] = {}
        self.pods: list[dict] = []
        self.pdb_blocked: set[str] = set()
        self.calls: list[tuple[str, str, str]] = []  # (method, path, content type)
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _handle(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                outer.calls.append((method, self.path, self.headers.get("Content-Type", "")))
                if self.headers.get("Authorization") != f"Bearer {outer.token}":
                    self._send(401, status(401, "Unauthorized"))
                    return
                with outer.lock:
                    code, answer = outer.route(method, self.path, body, self.headers.get("Content-Type", ""))
                self._send(code, answer)

            def do_GET(self):
                self._handle("GET")

            def do_PATCH(self):
                self._handle("PATCH")

            def do_POST(self):
                self._handle("POST")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add_node(self, name: str) -> None:
        self.nodes[name] = {"apiVersion": "v1", "kind": "Node",
                            "metadata": {"name": name, "resourceVersion": "1", "uid": f"uid-{name}"},
                            "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present",
                                                 "effect": "NoSchedule"}]}}

    def route(self, method: str, path: str, body, content_type: str) -> tuple[int, dict]:
        parsed = urllib.parse.urlsplit(path)
        if match := re.fullmatch(r"/api/v1/nodes/([^/]+)", parsed.path):
            node = self.nodes.get(match[1])
            if node is None:
                return 404, status(404, "NotFound")
            if method == "GET":
                return 200, node
            if method == "PATCH":
                if content_type != "application/merge-patch+json":
                    return 415, status(415, "UnsupportedMediaType")
                wanted = (body.get("metadata") or {}).get("resourceVersion")
                if wanted and wanted != node["metadata"]["resourceVersion"]:
                    return 409, status(409, "Conflict")
                patched = merge_patch(node, body)
                patched["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)
                self.nodes[match[1]] = patched
                return 200, patched
        if parsed.path == "/api/v1/pods" and method == "GET":
            selector = urllib.parse.parse_qs(parsed.query).get("fieldSelector", [""])[0]
            node = selector.removeprefix("spec.nodeName=")
            items = [p for p in self.pods if p["spec"]["nodeName"] == node]
            return 200, {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items}
        if (match := re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)/eviction", parsed.path)) \
                and method == "POST":
            label = f"{match[1]}/{match[2]}"
            found = [p for p in self.pods if (p["metadata"]["namespace"], p["metadata"]["name"]) == match.groups()]
            if not found:
                return 404, status(404, "NotFound")
            if label in self.pdb_blocked:
                return 429, status(429, "TooManyRequests",
                                   "Cannot evict pod as it would violate the pod's disruption budget.")
            self.pods.remove(found[0])
            return 201, status(201, "Success")
        return 404, status(404, "NotFound")

    def node(self, name: str) -> dict:
        return self.nodes[name]

    def close(self) -> None:
        self.server.shutdown()


def status(code: int, reason: str, message: str = "") -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success" if code < 400 else "Failure",
            "reason": reason, "message": message or reason, "code": code}
