"""Local servers that behave like the real APIs: their auth headers, request shapes, success and error codes,
dedup semantics, 429 with Retry-After, 5xx and slow answers. Tests start and stop them.

`FakeServer(app)` serves `app.handle(request) -> (status, headers, body)` on 127.0.0.1; `server.script` queues
forced answers (`Scripted(status, headers, body, delay)`) taken one per request before the app sees it, and
`server.down` answers 503 to everything (a receiver that is down).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import re
import socketserver
import ssl
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit


@dataclass
class TLSFiles:
    cert_path: str
    key_path: str
    client_ca_path: str = ""


class ThrowawayCA:
    """A throw-away certificate authority (generated, never downloaded) for TLS and mTLS tests."""

    def __init__(self, name: str = "fleet test CA"):
        from datetime import UTC, datetime, timedelta

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self._x509, self._hashes, self._ec, self._oid = x509, hashes, ec, NameOID
        # Ten years either side of the test's clock: OpenSSL checks the window against the machine's real clock,
        # and the test may run with Python's clock moved (tests/clock.py, CI's moved pass: 400 days).
        self._now = datetime.now(UTC) - timedelta(days=3650)
        self._until = datetime.now(UTC) + timedelta(days=3650)
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(self._now).not_valid_after(self._until)
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .sign(self.key, hashes.SHA256()))

    @property
    def pem(self) -> str:
        from cryptography.hazmat.primitives.serialization import Encoding

        return self.cert.public_bytes(Encoding.PEM).decode()

    def issue(self, common_name: str, *, client: bool = False) -> tuple[str, str]:
        """(certificate PEM, private key PEM) signed by this CA; a server certificate names 127.0.0.1."""
        import ipaddress

        from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

        x509 = self._x509
        key = self._ec.generate_private_key(self._ec.SECP256R1())
        builder = (x509.CertificateBuilder()
                   .subject_name(x509.Name([x509.NameAttribute(self._oid.COMMON_NAME, common_name)]))
                   .issuer_name(self.cert.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(self._now)
                   .not_valid_after(self._until))
        if client:
            builder = builder.add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]),
                                            critical=False)
        else:
            builder = builder.add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        cert = builder.sign(self.key, self._hashes.SHA256())
        return (cert.public_bytes(Encoding.PEM).decode(),
                key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode())

    def server_files(self, folder, *, require_client_cert: bool = False) -> TLSFiles:
        cert, key = self.issue("127.0.0.1")
        paths = {name: str(folder / f"{name}.pem") for name in ("cert", "key", "ca")}
        for name, text in (("cert", cert), ("key", key), ("ca", self.pem)):
            with open(paths[name], "w") as handle:
                handle.write(text)
        return TLSFiles(paths["cert"], paths["key"], paths["ca"] if require_client_cert else "")


@dataclass
class Request:
    method: str
    path: str
    query: dict
    headers: dict
    body: bytes

    def json(self):
        return json.loads(self.body or b"null")


@dataclass
class Scripted:
    status: int = 503
    headers: dict = field(default_factory=dict)
    body: bytes = b""
    delay: float = 0.0


def _json(status: int, data, headers: dict | None = None):
    return status, {"Content-Type": "application/json", **(headers or {})}, json.dumps(data).encode()


class FakeServer:
    def __init__(self, app, *, tls: TLSFiles | None = None):
        self.app = app
        self.script: list[Scripted] = []
        self.down = False
        self.requests: list[Request] = []
        self.hold = threading.Event()  # set = answer normally; cleared by `hold_next()` to keep a request waiting
        self.hold.set()
        self.held = threading.Event()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _serve(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                request = Request(self.command, unquote(parts.path), parse_qs(parts.query),
                                  {k.lower(): v for k, v in self.headers.items()}, body)
                status, headers, payload = server._answer(request)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.handle_error = lambda *args: None  # a client that timed out and left: not the test's business
        scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(tls.cert_path, tls.key_path)
            if tls.client_ca_path:
                context.verify_mode = ssl.CERT_REQUIRED
                context.load_verify_locations(tls.client_ca_path)
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def _answer(self, request: Request):
        with self._lock:
            self.requests.append(request)
            scripted = self.script.pop(0) if self.script else None
        if not self.hold.is_set():
            self.held.set()
            self.hold.wait(60)
        if scripted is not None:
            time.sleep(scripted.delay)
            if scripted.status:
                return scripted.status, scripted.headers, scripted.body
        if self.down:
            return 503, {"Content-Type": "text/plain"}, b"service unavailable"
        return self.app.handle(request)

    def hold_next(self):
        """Keep the next request waiting (received, not answered) until `release()`."""
        self.held.clear()
        self.hold.clear()

    def release(self):
        self.hold.set()

    def close(self):
        self.hold.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# --- Generic webhook receiver (a CloudEvents consumer that checks our signature and dedups by id) ----------------

class WebhookReceiver:
    def __init__(self, secret: str, *, window_s: int = 300):
        self.secret, self.window_s = secret, window_s
        self.accepted: Counter = Counter()  # event id → copies accepted as new (must stay 1)
        self.duplicates: Counter = Counter()
        self.events: list[dict] = []

    def handle(self, request: Request):
        if request.headers.get("content-type", "").split(";")[0] != "application/cloudevents+json":
            return _json(415, {"error": "structured CloudEvents expected"})
        header = request.headers.get("x-fleet-signature", "")
        parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
        expected = hmac.new(self.secret.encode(), parts.get("t", "").encode() + b"." + request.body,
                            hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, parts.get("v1", "")) or \
                abs(time.time() - int(parts.get("t", "0"))) > self.window_s:
            return _json(401, {"error": "bad signature"})
        event = request.json()
        for attribute in ("specversion", "id", "source", "type"):
            if not event.get(attribute):
                return _json(400, {"error": f"{attribute} missing"})
        if event["id"] in self.accepted:
            self.duplicates[event["id"]] += 1
            return _json(200, {"duplicate": True, "ticket_id": f"T-{event.get('subject')}"})
        self.accepted[event["id"]] += 1
        self.events.append(event)
        return _json(202, {"ticket_id": f"T-{event.get('subject')}", "url": f"https://desk.example/{event['id']}"})


# --- PagerDuty Events API v2 -----------------------------------------------------------------------------------

class PagerDutyEvents:
    SEVERITIES = {"critical", "error", "warning", "info"}

    def __init__(self, routing_key: str):
        self.routing_key = routing_key
        self.alerts: dict[str, dict] = {}  # dedup_key → {"status", "triggers"}
        self.events: list[dict] = []

    def handle(self, request: Request):
        if request.method != "POST" or request.path != "/v2/enqueue":
            return _json(404, {"status": "not found"})
        event = request.json() or {}
        errors = []
        if event.get("routing_key") != self.routing_key:
            return _json(400, {"status": "invalid event", "message": "Event object is invalid",
                               "errors": ["Invalid routing key"]})
        action = event.get("event_action")
        if action not in ("trigger", "acknowledge", "resolve"):
            errors.append("'event_action' is invalid")
        if action == "trigger":
            payload = event.get("payload") or {}
            if not payload.get("summary") or len(payload["summary"]) > 1024:
                errors.append("'payload.summary' is missing or too long")
            if not payload.get("source"):
                errors.append("'payload.source' is missing")
            if payload.get("severity") not in self.SEVERITIES:
                errors.append("'payload.severity' is invalid")
        elif not event.get("dedup_key"):
            errors.append("'dedup_key' is required for acknowledge and resolve")
        if errors:
            return _json(400, {"status": "invalid event", "message": "Event object is invalid", "errors": errors})
        self.events.append(event)
        key = event.get("dedup_key") or hashlib.md5(request.body).hexdigest()  # noqa: S324
        alert = self.alerts.get(key)
        if action == "trigger":
            if alert is None or alert["status"] == "resolved":
                self.alerts[key] = {"status": "triggered", "triggers": 1}
            else:
                alert["triggers"] += 1  # deduplicated into the open alert
        elif alert is not None and alert["status"] != "resolved":
            alert["status"] = "acknowledged" if action == "acknowledge" else "resolved"
        return _json(202, {"status": "success", "message": "Event processed", "dedup_key": key})


# --- Opsgenie Alert API ----------------------------------------------------------------------------------------

class Opsgenie:
    def __init__(self, api_key: str):
        self.api_key = api_key
        self.alerts: dict[str, dict] = {}
        self.requests = 0

    def handle(self, request: Request):
        if request.headers.get("authorization") != f"GenieKey {self.api_key}":
            return _json(401, {"message": "Could not authenticate", "took": 0.0, "requestId": "r"})
        self.requests += 1
        body = request.json() or {}
        request_id = f"req-{self.requests}"
        if request.method == "POST" and request.path == "/v2/alerts":
            if not body.get("message"):
                return _json(422, {"message": "Request body is not processable", "errors": {"message":
                                                                                           "Message can not be empty."},
                                   "requestId": request_id})
            alias = body.get("alias") or request_id
            alert = self.alerts.get(alias)
            if alert is not None and alert["status"] == "open":
                alert["count"] += 1
            else:
                self.alerts[alias] = {"status": "open", "count": 1, "acknowledged": False, "notes": [],
                                      "body": body}
            return _json(202, {"result": "Request will be processed", "took": 0.01, "requestId": request_id})
        match = re.fullmatch(r"/v2/alerts/([^/]+)/(close|acknowledge|notes)", request.path)
        if request.method == "POST" and match:
            if request.query.get("identifierType") != ["alias"]:
                return _json(400, {"message": "identifierType must be alias here"})
            alert = self.alerts.get(match.group(1))
            if alert is None:
                return _json(404, {"message": "Alert does not exist", "requestId": request_id})
            if match.group(2) == "close":
                alert["status"] = "closed"
            elif match.group(2) == "acknowledge":
                alert["acknowledged"] = True
            else:
                alert["notes"].append(body.get("note"))
            return _json(202, {"result": "Request will be processed", "took": 0.01, "requestId": request_id})
        return _json(404, {"message": "no such endpoint"})


# --- ServiceNow Table API --------------------------------------------------------------------------------------

class ServiceNow:
    def __init__(self, username: str, password: str):
        self.auth = "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()
        self.incidents: dict[str, dict] = {}
        self.events: list[dict] = []
        self._numbers = itertools.count(10001)

    def handle(self, request: Request):
        if request.headers.get("authorization") != self.auth:
            return _json(401, {"error": {"message": "User Not Authenticated", "detail": "Required to provide Auth "
                                                                                         "information"},
                               "status": "failure"})
        path = request.path
        if path == "/api/now/table/incident" and request.method == "GET":
            query = (request.query.get("sysparm_query") or [""])[0]
            rows = list(self.incidents.values())
            if query.startswith("correlation_id="):
                rows = [r for r in rows if r["correlation_id"] == query.split("=", 1)[1]]
            limit = int((request.query.get("sysparm_limit") or ["10000"])[0])
            return _json(200, {"result": [{"sys_id": r["sys_id"], "number": r["number"]} for r in rows[:limit]]})
        if path == "/api/now/table/incident" and request.method == "POST":
            record = request.json() or {}
            if not record.get("short_description"):
                return _json(400, {"error": {"message": "short_description is mandatory"}, "status": "failure"})
            sys_id = hashlib.sha1(f"{len(self.incidents)}".encode()).hexdigest()[:32]  # noqa: S324
            row = {**record, "sys_id": sys_id, "number": f"INC{next(self._numbers):07d}", "state": "1",
                   "work_notes_log": []}
            self.incidents[sys_id] = row
            return _json(201, {"result": {"sys_id": sys_id, "number": row["number"]}})
        match = re.fullmatch(r"/api/now/table/incident/([0-9a-f]+)", path)
        if match and request.method == "PATCH":
            row = self.incidents.get(match.group(1))
            if row is None:
                return _json(404, {"error": {"message": "No Record found"}, "status": "failure"})
            change = request.json() or {}
            if change.get("work_notes"):
                row["work_notes_log"].append(change.pop("work_notes"))
            row.update(change)
            return _json(200, {"result": {"sys_id": row["sys_id"], "number": row["number"], "state": row["state"]}})
        if path == "/api/now/table/em_event" and request.method == "POST":
            self.events.append(request.json())
            return _json(201, {"result": {"sys_id": f"ev{len(self.events)}"}})
        return _json(400, {"error": {"message": "Invalid table"}, "status": "failure"})


# --- Jira Cloud REST v3 ----------------------------------------------------------------------------------------

class Jira:
    def __init__(self, email: str, token: str, project: str = "OPS"):
        self.auth = "Basic " + base64.b64encode(f"{email}:{token}".encode()).decode()
        self.project = project
        self.issues: dict[str, dict] = {}
        self._ids = itertools.count(1)

    def handle(self, request: Request):
        if request.headers.get("authorization") != self.auth:
            return 401, {"Content-Type": "text/plain"}, b"Client must be authenticated to access this resource."
        path, method = request.path, request.method
        if path == f"/rest/api/3/project/{self.project}" and method == "GET":
            return _json(200, {"key": self.project, "name": "Operations"})
        if path == "/rest/api/3/issue" and method == "POST":
            fields = (request.json() or {}).get("fields") or {}
            if (fields.get("project") or {}).get("key") != self.project:
                return _json(400, {"errorMessages": [], "errors": {"project": "valid project is required"}})
            if not fields.get("summary") or (fields.get("description") or {}).get("type") != "doc":
                return _json(400, {"errorMessages": [], "errors": {"summary": "summary and an ADF description"}})
            number = next(self._ids)
            key = f"{self.project}-{number}"
            self.issues[key] = {"id": str(10000 + number), "key": key, "fields": fields, "comments": [],
                                "attachments": [], "status": "To Do", "category": "new"}
            return _json(201, {"id": str(10000 + number), "key": key, "self": f"/rest/api/3/issue/{key}"})
        if path == "/rest/api/3/search/jql" and method == "POST":
            jql = (request.json() or {}).get("jql", "")
            label = re.search(r'labels = "([^"]+)"', jql)
            found = [i for i in self.issues.values() if label and label.group(1) in i["fields"].get("labels", [])]
            return _json(200, {"issues": [{"id": i["id"], "key": i["key"]} for i in found]})
        match = re.fullmatch(r"/rest/api/3/issue/([A-Z]+-\d+)(/[a-z]+)?", path)
        if not match or match.group(1) not in self.issues:
            return _json(404, {"errorMessages": ["Issue does not exist or you do not have permission to see it."]})
        issue, sub = self.issues[match.group(1)], match.group(2) or ""
        if sub == "" and method == "GET":
            return _json(200, {"key": issue["key"], "fields": {
                "attachment": [{"filename": a} for a in issue["attachments"]],
                "status": {"name": issue["status"], "statusCategory": {"key": issue["category"]}}}})
        if sub == "/comment" and method == "POST":
            body = (request.json() or {}).get("body") or {}
            if body.get("type") != "doc":
                return _json(400, {"errorMessages": ["Comment body is not valid ADF"]})
            issue["comments"].append(body)
            return _json(201, {"id": str(len(issue["comments"]))})
        if sub == "/comment" and method == "GET":
            return _json(200, {"comments": [{"body": c} for c in issue["comments"]]})
        if sub == "/transitions" and method == "GET":
            return _json(200, {"transitions": [
                {"id": "21", "name": "In Progress", "to": {"name": "In Progress",
                                                            "statusCategory": {"key": "indeterminate"}}},
                {"id": "31", "name": "Done", "to": {"name": "Done", "statusCategory": {"key": "done"}}}]})
        if sub == "/transitions" and method == "POST":
            transition = ((request.json() or {}).get("transition") or {}).get("id")
            if transition not in ("21", "31"):
                return _json(400, {"errorMessages": ["Transition id is not valid"]})
            issue["status"], issue["category"] = ("Done", "done") if transition == "31" else \
                ("In Progress", "indeterminate")
            return 204, {}, b""
        if sub == "/attachments" and method == "POST":
            if request.headers.get("x-atlassian-token") != "no-check":
                return _json(403, {"errorMessages": ["XSRF check failed"]})
            names = re.findall(rb'filename="([^"]+)"', request.body)
            if not names or not request.headers.get("content-type", "").startswith("multipart/form-data"):
                return _json(400, {"errorMessages": ["no file"]})
            issue["attachments"] += [n.decode() for n in names]
            return _json(200, [{"filename": n.decode()} for n in names])
        return _json(405, {"errorMessages": ["method not allowed"]})


# --- Slack incoming webhook ------------------------------------------------------------------------------------

class SlackWebhook:
    def __init__(self, path: str = "/services/T000/B000/XXXXSECRET"):
        self.path = path
        self.messages: list[dict] = []

    def handle(self, request: Request):
        if request.path != self.path:
            return 404, {"Content-Type": "text/plain"}, b"no_service"
        body = request.json() if request.body else None
        if not isinstance(body, dict) or not (body.get("text") or body.get("blocks")):
            return 400, {"Content-Type": "text/plain"}, b"invalid_payload"
        self.messages.append(body)
        return 200, {"Content-Type": "text/plain"}, b"ok"


# --- A small SMTP server ---------------------------------------------------------------------------------------

class FakeSMTP:
    """Speaks enough ESMTP for smtplib (EHLO, AUTH PLAIN, MAIL, RCPT, DATA, RSET, QUIT). `fail_with` answers the
    DATA command with that code (e.g. 451 greylisting, 550 rejected)."""

    def __init__(self, *, username: str = "", password: str = ""):
        self.messages: list[bytes] = []
        self.fail_with: int | None = None
        server = self

        class Handler(socketserver.StreamRequestHandler):
            def reply(self, line: str):
                self.wfile.write(line.encode() + b"\r\n")

            def handle(self):
                self.reply("220 fake.smtp ESMTP")
                authed = not username
                while True:
                    line = self.rfile.readline()
                    if not line:
                        return
                    command = line.decode().strip()
                    verb = command.split(" ")[0].upper()
                    if verb in ("EHLO", "HELO"):
                        self.wfile.write(b"250-fake.smtp\r\n250-AUTH PLAIN\r\n250 8BITMIME\r\n")
                    elif verb == "AUTH":
                        token = command.split(" ")[2] if len(command.split(" ")) > 2 else ""
                        _, user, secret = base64.b64decode(token).split(b"\0")
                        authed = (user.decode(), secret.decode()) == (username, password)
                        self.reply("235 ok" if authed else "535 5.7.8 authentication failed")
                    elif verb == "MAIL":
                        self.reply("250 ok" if authed else "530 5.7.0 authentication required")
                    elif verb == "RCPT":
                        self.reply("250 ok")
                    elif verb == "DATA":
                        if server.fail_with:
                            self.reply(f"{server.fail_with} {'try again later' if server.fail_with < 500 else 'no'}")
                            continue
                        self.reply("354 end with .")
                        data = b""
                        while True:
                            chunk = self.rfile.readline()
                            if chunk in (b".\r\n", b".\n", b""):
                                break
                            data += chunk
                        server.messages.append(data)
                        self.reply("250 queued")
                    elif verb == "RSET" or verb == "NOOP":
                        self.reply("250 ok")
                    elif verb == "QUIT":
                        self.reply("221 bye")
                        return
                    else:
                        self.reply("502 not implemented")

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
