"""A scriptable fake cloud metadata service on 127.0.0.1 (ephemeral port), one instance per cloud.

Speaks each cloud's metadata wire format (the paths and headers the modules of
``fleet_agent.collectors.cloud`` use) closely enough to drive the agent's cloud collector end to end:
AWS IMDSv2 tokens (401 without one), GCP's ``Metadata-Flavor`` and Azure's ``Metadata: true`` headers,
Azure acknowledgements. Tests and the simulator script it:

    with FakeMetadataServer("aws") as server:
        collector = CloudCollector(cloud="aws", metadata_url=server.url, timeout=0.2)
        server.set_notice(action="terminate", time="2026-12-02T18:47:00Z")
        server.clear_notice()
        server.set_malformed()          # garbage on the notice path
        server.set_status(path, 404)    # any path, any status
        server.delay_s = 1.0            # slow answers
"""

from __future__ import annotations

import json
import socket
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

CLOUDS = ("aws", "gcp", "azure", "alibaba", "tencent")

AWS_META = "/latest/meta-data/"
GCP_META = "/computeMetadata/v1/instance/"
AZURE_EVENTS = "/metadata/scheduledevents"
AZURE_COMPUTE = "/metadata/instance/compute"

NOTICE_PATHS = {
    "aws": AWS_META + "spot/instance-action",
    "gcp": GCP_META + "preempted",
    "azure": AZURE_EVENTS,
    "alibaba": AWS_META + "instance/spot/termination-time",
    "tencent": AWS_META + "spot/termination-time",
}
AWS_REBALANCE = AWS_META + "events/recommendations/rebalance"
GCP_MAINTENANCE = GCP_META + "maintenance-event"

IDENTITY = {
    "aws": {"instance_id": "i-0123456789abcdef0", "instance_type": "p5.48xlarge", "region": "us-east-1",
            "spot": True},
    "gcp": {"instance_id": "4520031799277581759", "instance_type": "a3-highgpu-8g", "region": "us-central1",
            "spot": True},
    "azure": {"instance_id": "02aab8a4-74ef-476e-8182-f6d2ba4166a6", "instance_type": "Standard_ND96isr_H100_v5",
              "region": "eastus", "spot": True},
    "alibaba": {"instance_id": "i-bp67acfmxazb4p****", "instance_type": "ecs.gn7i-c8g1.2xlarge",
                "region": "cn-hangzhou", "spot": None},
    "tencent": {"instance_id": "ins-3g6dr7ph", "instance_type": "GN10Xp.2XLARGE40", "region": "ap-guangzhou",
                "spot": None},
}
AZURE_VM_NAME = "gpu-vm-1"


def refused_url() -> str:
    """A base URL on 127.0.0.1 where nothing listens (connection refused): "no metadata service"."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


class FakeMetadataServer:
    def __init__(self, cloud: str, *, imdsv2_required: bool = True, imdsv1_only: bool = False) -> None:
        if cloud not in CLOUDS:
            raise ValueError(f"cloud must be one of {CLOUDS}")
        self.cloud = cloud
        self.imdsv2_required = imdsv2_required and not imdsv1_only
        self.imdsv1_only = imdsv1_only
        self.delay_s = 0.0
        self.routes: dict[str, tuple[int, bytes]] = {}
        self.requests: list[dict] = []
        self.tokens: set[str] = set()
        self.acknowledged: list[str] = []
        self.azure_events: list[dict] = []
        self.azure_incarnation = 1
        self._lock = threading.Lock()
        self._install_defaults()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()

    # --- lifecycle ------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeMetadataServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- scripting ------------------------------------------------------------------------------
    def set(self, path: str, body: str | bytes | dict, status: int = 200) -> None:
        """Answer GET ``path`` (no query string) with ``body``; a dict is sent as JSON."""
        if isinstance(body, dict):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        with self._lock:
            self.routes[path] = (status, body)

    def set_status(self, path: str, status: int, body: str | bytes = b"") -> None:
        self.set(path, body, status)

    def remove(self, path: str) -> None:
        with self._lock:
            self.routes.pop(path, None)

    def set_notice(self, **notice) -> None:
        """Post a notice in this cloud's own format.

        aws: action="terminate"|"stop"|"hibernate", time=RFC 3339 · gcp: preempted=True and/or
        maintenance_event="TERMINATE_ON_HOST_MAINTENANCE" · azure: event_type, not_before (RFC 1123),
        event_id, resources (see add_azure_event) · alibaba, tencent: termination_time (plain text).
        """
        if self.cloud == "aws":
            self.set(NOTICE_PATHS["aws"], {"action": notice.get("action", "terminate"),
                                           "time": notice.get("time", "2026-12-02T18:47:00Z")})
        elif self.cloud == "gcp":
            if notice.get("preempted", "maintenance_event" not in notice):
                self.set(NOTICE_PATHS["gcp"], "TRUE")
            if "maintenance_event" in notice:
                self.set(GCP_MAINTENANCE, notice["maintenance_event"])
        elif self.cloud == "azure":
            self.add_azure_event(**notice)
        else:
            self.set(NOTICE_PATHS[self.cloud], notice["termination_time"])

    def set_rebalance(self, notice_time: str = "2026-12-02T18:40:00Z") -> None:
        self.set(AWS_REBALANCE, {"noticeTime": notice_time})

    def add_azure_event(self, event_type: str = "Preempt", not_before: str = "Wed, 02 Dec 2026 18:45:30 GMT",
                        event_id: str | None = None, resources: list[str] | None = None) -> str:
        event_id = event_id or str(uuid.uuid4()).upper()
        with self._lock:
            self.azure_events.append({
                "EventId": event_id, "EventType": event_type, "ResourceType": "VirtualMachine",
                "Resources": resources if resources is not None else [AZURE_VM_NAME],
                "EventStatus": "Scheduled", "NotBefore": not_before,
                "Description": f"{event_type} scheduled by the platform", "EventSource": "Platform",
                "DurationInSeconds": -1 if event_type == "Preempt" else 15,
            })
            self.azure_incarnation += 1
        self.remove(AZURE_EVENTS)
        return event_id

    def clear_notice(self) -> None:
        """Back to "no notice" on every notice path of this cloud."""
        with self._lock:
            self.azure_events.clear()
            self.azure_incarnation += 1
        self._install_notice_defaults()

    def set_malformed(self, path: str | None = None) -> None:
        """Garbage (not what the cloud would ever send) on ``path`` or this cloud's notice path."""
        self.set(path or NOTICE_PATHS[self.cloud], b"<html><body>502 Bad Gateway{</body>")

    def requests_to(self, path: str) -> list[dict]:
        with self._lock:
            return [r for r in self.requests if r["path"] == path]

    # --- defaults -------------------------------------------------------------------------------
    def _install_defaults(self) -> None:
        identity = IDENTITY[self.cloud]
        if self.cloud == "aws":
            for path, value in (("instance-id", identity["instance_id"]),
                                ("instance-type", identity["instance_type"]),
                                ("placement/region", identity["region"]), ("instance-life-cycle", "spot")):
                self.set(AWS_META + path, value)
        elif self.cloud == "gcp":
            for path, value in (("id", identity["instance_id"]),
                                ("machine-type", f"projects/123456789/machineTypes/{identity['instance_type']}"),
                                ("zone", f"projects/123456789/zones/{identity['region']}-a"),
                                ("scheduling/provisioning-model", "SPOT"), ("scheduling/preemptible", "TRUE")):
                self.set(GCP_META + path, value)
        elif self.cloud == "azure":
            self.set(AZURE_COMPUTE, {"vmId": identity["instance_id"], "vmSize": identity["instance_type"],
                                     "location": identity["region"], "priority": "Spot", "name": AZURE_VM_NAME,
                                     "osType": "Linux"})
        elif self.cloud == "alibaba":
            for path, value in (("instance-id", identity["instance_id"]),
                                ("instance/instance-type", identity["instance_type"]),
                                ("region-id", identity["region"])):
                self.set(AWS_META + path, value)
        else:
            for path, value in (("instance-id", identity["instance_id"]),
                                ("instance/instance-type", identity["instance_type"]),
                                ("placement/region", identity["region"])):
                self.set(AWS_META + path, value)
        self._install_notice_defaults()

    def _install_notice_defaults(self) -> None:
        if self.cloud == "gcp":
            self.set(NOTICE_PATHS["gcp"], "FALSE")
            self.set(GCP_MAINTENANCE, "NONE")
        elif self.cloud == "azure":
            self.remove(AZURE_EVENTS)  # served from azure_events
        else:
            self.remove(NOTICE_PATHS[self.cloud])
            if self.cloud == "aws":
                self.remove(AWS_REBALANCE)

    # --- request handling -----------------------------------------------------------------------
    def _answer(self, method: str, path: str, query: dict, headers, body: bytes) -> tuple[int, bytes, dict]:
        extra = {"Metadata-Flavor": "Google"} if self.cloud == "gcp" else {}
        if self.cloud == "aws":
            if method == "PUT" and path == "/latest/api/token":
                if self.imdsv1_only:
                    return 403, b"", extra
                if not headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                    return 400, b"missing TTL header", extra
                token = uuid.uuid4().hex
                with self._lock:
                    self.tokens.add(token)
                return 200, token.encode(), extra
            if self.imdsv2_required and headers.get("X-aws-ec2-metadata-token") not in self.tokens:
                return 401, b"", extra
        if self.cloud == "gcp" and headers.get("Metadata-Flavor") != "Google":
            return 403, b"Missing Metadata-Flavor:Google header.", extra
        if self.cloud == "azure":
            if headers.get("Metadata") != "true":
                return 400, b'{"error": "Bad request. Required metadata header not specified"}', extra
            if "api-version" not in query:
                return 400, b'{"error": "Bad request. api-version was not specified in the request"}', extra
            if path == AZURE_EVENTS and method == "POST":
                return self._azure_acknowledge(body), b"", extra
        if method != "GET":
            return 405, b"", extra
        with self._lock:
            route = self.routes.get(path)
            if route is None and self.cloud == "azure" and path == AZURE_EVENTS:
                document = {"DocumentIncarnation": self.azure_incarnation, "Events": list(self.azure_events)}
                route = (200, json.dumps(document).encode())
        if route is None:
            return 404, b"", extra
        return route[0], route[1], extra

    def _azure_acknowledge(self, body: bytes) -> int:
        try:
            requests = json.loads(body)["StartRequests"]
            event_ids = [request["EventId"] for request in requests]
        except (ValueError, KeyError, TypeError):
            return 400
        with self._lock:
            known = {event["EventId"]: event for event in self.azure_events}
            if any(event_id not in known for event_id in event_ids):
                return 400
            for event_id in event_ids:
                known[event_id].update(EventStatus="Started", NotBefore="")  # as Azure does once started
                self.acknowledged.append(event_id)
            self.azure_incarnation += 1
        return 200


def _handler_for(server: FakeMetadataServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _handle(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            with server._lock:
                server.requests.append({"method": self.command, "path": parts.path, "query": parts.query,
                                        "headers": dict(self.headers), "body": body})
            if server.delay_s:
                time.sleep(server.delay_s)
            status, payload, extra = server._answer(self.command, parts.path, parse_qs(parts.query),
                                                    self.headers, body)
            try:
                self.send_response(status)
                for name, value in extra.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except OSError:
                pass  # the client gave up (its timeout is shorter than our delay)

        do_GET = do_PUT = do_POST = _handle

        def log_message(self, format, *args) -> None:  # noqa: A002 - stdlib signature
            pass

    return Handler
