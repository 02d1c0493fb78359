"""A fake control plane on 127.0.0.1 for agent tests: enrolment, report batches, /healthz.

It follows docs/agent-protocol.md: validates every batch against the JSON Schema, stores reports
idempotently by (instance, sequence), answers ``acked_sequence`` = the highest stored sequence of
that instance, and can be told to misbehave:

    server.fail_next("503")                 # answer 503 to the next report POST
    server.fail_next("503", retry_after="7")  # ... with a Retry-After header (seconds or an HTTP date)
    server.fail_next("400:unsupported_version")  # a status with an error code
    server.fail_next("abort_before_store")  # read half the body, then drop the connection
    server.fail_next("abort_after_store")   # store the batch, then drop the connection (ack lost)
    server.fail_next("stall_after_store")   # store the batch, then hang until ``release`` is set
    server.refuse(predicate, 500)           # answer 500 to every batch holding a report it matches
                                            # (a poison report: what a server bug does to one value)
"""

from __future__ import annotations

import gzip
import json
import socket
import threading
import uuid
from collections import defaultdict
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jsonschema

from fleet_agent.schema import batch_schema, definition_schema

_BATCH_VALIDATOR = jsonschema.Draft202012Validator(batch_schema())
_ENROLL_VALIDATOR = jsonschema.Draft202012Validator(definition_schema("enroll_request"))


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # injected connection aborts are expected here


class FakeControlPlane:
    def __init__(self, *, token: str = "fe_test", interval_s: float = 15, max_enrollments: int = 10_000):
        self.token = token
        self.interval_s = interval_s
        self.max_enrollments = max_enrollments
        self.lock = threading.Lock()
        self.nodes: dict[str, int] = {}  # machine_id -> node_id
        self.credentials: dict[str, int] = {}  # credential -> node_id
        self.enrollments: list[dict] = []
        self.stored: dict[str, dict[int, dict]] = defaultdict(dict)  # instance -> sequence -> report
        self.duplicates = 0
        self.posts: list[list[int]] = []  # sequences carried by each report POST, in arrival order
        self.acks: list[int] = []
        self.gzip_posts = 0
        self.report_requests = 0  # every POST to the reports endpoint, answered or not
        self._failures: list[tuple[str, str | None]] = []
        self._refusals: list[tuple[Callable[[dict], bool], int]] = []
        self.release = threading.Event()
        self._server = _QuietServer(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    # -- control --------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def fail_next(self, *modes: str, retry_after: str | None = None) -> None:
        with self.lock:
            self._failures.extend((mode, retry_after) for mode in modes)

    def refuse(self, predicate: Callable[[dict], bool], status: int) -> None:
        """Answer ``status`` to any batch with a report that ``predicate`` matches, storing none of it."""
        with self.lock:
            self._refusals.append((predicate, status))

    def stop_refusing(self) -> None:
        with self.lock:
            self._refusals.clear()

    def sequences(self, instance_id: str | None = None) -> list[int]:
        with self.lock:
            if instance_id is None:
                return sorted(seq for stored in self.stored.values() for seq in stored)
            return sorted(self.stored[instance_id])

    def reports(self) -> list[dict]:
        with self.lock:
            return [r for stored in self.stored.values() for _, r in sorted(stored.items())]

    def __enter__(self) -> FakeControlPlane:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()

    # -- HTTP -----------------------------------------------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        plane = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # keep test output quiet
                pass

            def _json(self, status: int, body: dict, headers: dict | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _drop_connection(self) -> None:
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)

            def _error(
                self, status: int, code: str, message: str, fields: dict | None = None, headers: dict | None = None
            ) -> None:
                self._json(status, {"error": {"code": code, "message": message, "fields": fields or {}}}, headers)

            def do_GET(self) -> None:
                if self.path == "/healthz":
                    self._json(200, {"status": "ok"})
                else:
                    self._error(404, "not_found", self.path)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                if self.path == "/api/v1/agent/enroll":
                    self._enroll(self.rfile.read(length))
                elif self.path == "/api/v1/agent/reports":
                    self._reports(length)
                else:
                    self._error(404, "not_found", self.path)

            def _enroll(self, raw: bytes) -> None:
                body = json.loads(raw)
                errors = sorted(_ENROLL_VALIDATOR.iter_errors(body), key=str)
                if errors:
                    self._error(400, "invalid", errors[0].message)
                    return
                with plane.lock:
                    if body["token"] != plane.token or len(plane.enrollments) >= plane.max_enrollments:
                        self._error(403, "invalid_token", "enrolment token invalid or used up")
                        return
                    machine = body["facts"]["machine_id"]
                    node_id = plane.nodes.setdefault(machine, len(plane.nodes) + 1)
                    for credential, owner in list(plane.credentials.items()):
                        if owner == node_id:
                            del plane.credentials[credential]  # re-enrolment revokes the old one
                    credential = f"fn_{uuid.uuid4().hex}"
                    plane.credentials[credential] = node_id
                    plane.enrollments.append(body)
                self._json(
                    201,
                    {
                        "node_id": node_id,
                        "credential": credential,
                        "reports_url": "/api/v1/agent/reports",
                        "interval_s": plane.interval_s,
                    },
                )

            def _reports(self, length: int) -> None:
                with plane.lock:
                    plane.report_requests += 1
                    failure, retry_after = plane._failures.pop(0) if plane._failures else (None, None)
                if failure == "abort_before_store":
                    self.rfile.read(length // 2)
                    self._drop_connection()
                    return
                raw = self.rfile.read(length)
                auth = self.headers.get("Authorization", "")
                node_id = (
                    plane.credentials.get(auth.removeprefix("Node ")) if auth.startswith("Node ") else None
                )
                if node_id is None:
                    self._error(401, "unauthorized", "bad or revoked node credential")
                    return
                if failure and failure[:3].isdigit():
                    status, _, code = failure.partition(":")
                    headers = {"Retry-After": retry_after} if retry_after is not None else None
                    self._error(int(status), code or "injected", f"injected failure {failure}", headers=headers)
                    return
                if self.headers.get("Content-Encoding") == "gzip":
                    raw = gzip.decompress(raw)
                    with plane.lock:
                        plane.gzip_posts += 1
                body = json.loads(raw)
                errors = sorted(_BATCH_VALIDATOR.iter_errors(body), key=lambda e: list(e.absolute_path))
                if errors:
                    where = ".".join(str(p) for p in errors[0].absolute_path)
                    self._error(400, "invalid", "report failed validation", {where: [errors[0].message]})
                    return
                reports = body["reports"]
                instance = reports[0]["agent"]["instance_id"]
                with plane.lock:
                    refused = [status for predicate, status in plane._refusals for r in reports if predicate(r)]
                if refused:
                    self._error(refused[0], "refused", "the server failed on a report of this batch")
                    return
                with plane.lock:
                    plane.posts.append([r["sequence"] for r in reports])
                    accepted = duplicates = 0
                    for report in reports:
                        stored = plane.stored[report["agent"]["instance_id"]]
                        if report["sequence"] in stored:
                            duplicates += 1
                        else:
                            stored[report["sequence"]] = report
                            accepted += 1
                    plane.duplicates += duplicates
                    acked = max(plane.stored[instance])
                    plane.acks.append(acked)
                if failure == "stall_after_store":
                    plane.release.wait(30)
                if failure in ("abort_after_store", "stall_after_store"):
                    self._drop_connection()
                    return
                self._json(
                    200,
                    {
                        "acked_sequence": acked,
                        "agent_instance_id": instance,
                        "accepted": accepted,
                        "duplicates": duplicates,
                    },
                )

        return Handler
