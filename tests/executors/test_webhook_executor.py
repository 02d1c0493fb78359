"""The `webhook` executor against a real local HTTP receiver: signed requests, retried with the same idempotency key
until accepted, completed by a signed callback; bad, stale or foreign callbacks are refused."""

import json
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.utils import timezone

from fleet.executors import interface as steps
from fleet.executors.backends.webhook import WebhookExecutor
from fleet.executors.models import ExternalRequest
from fleet.executors.services.executor_configs import executor_config_save
from fleet.executors.services.webhook import sign, verify
from tests.factories import NodeFactory, PoolFactory, UserFactory

pytestmark = pytest.mark.django_db
SECRET = "whsec-test-0123456789abcdef"


class Receiver:
    def __init__(self):
        self.requests: list[tuple[dict, bytes]] = []
        self.status = 202
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.requests.append((dict(self.headers), body))
                self.send_response(outer.status)
                self.end_headers()
                self.wfile.write(b'{"ok": true}')

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/replace"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def receiver():
    server = Receiver()
    yield server
    server.server.shutdown()


@pytest.fixture
def node(receiver, settings):
    settings.FLEET_PUBLIC_URL = "https://fleet.example"
    pool = PoolFactory()
    executor_config_save(actor=UserFactory(role="admin"), pool=pool, executor="webhook", secret=SECRET,
                         settings={"url": receiver.url, "timeout_s": 5})
    return NodeFactory(pool=pool, hostname="gpu-9", instance_id="ecs-0042")


def ctx(node, kind="request_replacement"):
    return steps.StepContext(incident_id=3, incident_key="INC-3", node_id=node.pk, step_index=2, attempt=1,
                             kind=kind, params={"size": "8xH100"}, dry_run=False, idempotency_key="INC-3:2:1",
                             facts={"title": "GPU fell off the bus", "region": "cn-hangzhou"})


def callback(api, request_id, data, *, secret=SECRET, at=None):
    body = json.dumps(data).encode()
    return api.generic("POST", f"/api/v1/executor-callbacks/{request_id}", body, content_type="application/json",
                       HTTP_X_FLEET_SIGNATURE=sign(secret, body, at=at))


def test_signed_request_then_callback_completes_the_step(node, receiver, api):
    executor = WebhookExecutor()
    started = executor.start(ctx(node))
    assert (started.status, started.waiting_on) == ("waiting", "replacement"), started.message
    [(headers, body)] = receiver.requests
    assert verify(SECRET, body, headers["X-Fleet-Signature"]) == ""
    sent = json.loads(body)
    assert sent["node"]["instance_id"] == "ecs-0042" and sent["node"]["region"] == "cn-hangzhou"
    assert sent["kind"] == "request_replacement" and sent["params"] == {"size": "8xH100"}
    assert headers["Idempotency-Key"] == "INC-3:2:1" and headers["X-Fleet-Delivery"] == sent["id"]
    assert sent["callback_url"] == f"https://fleet.example/api/v1/executor-callbacks/{sent['id']}"
    assert SECRET not in body.decode()

    assert callback(api, sent["id"], {"status": "done"}, secret="other").status_code == 401
    assert callback(api, sent["id"], {"status": "done"}, at=int(time.time()) - 3600).status_code == 401
    bad = callback(api, sent["id"], {"status": "sort-of"})
    assert bad.status_code == 400 and "status" in bad.json()["error"]["fields"]
    assert ExternalRequest.objects.get().state == "accepted"
    assert callback(api, "00000000-0000-4000-8000-000000000000", {"status": "done"}).status_code == 404

    assert callback(api, sent["id"], {"status": "in_progress"}).json()["state"] == "accepted"
    done = callback(api, sent["id"], {"status": "done", "message": "ecs-0099 is up",
                                      "replacement": {"instance_id": "ecs-0099"}})
    assert done.status_code == 200 and done.json()["state"] == "done"
    finished = executor.poll(ctx(node))
    assert finished.status == "done" and finished.output["replacement"] == {"instance_id": "ecs-0099"}
    assert callback(api, sent["id"], {"status": "failed"}).json()["state"] == "done"  # the first final word stands
    assert len(receiver.requests) == 1


def test_failed_deliveries_are_retried_with_the_same_key(node, receiver):
    receiver.status = 500
    executor = WebhookExecutor()
    first = executor.start(ctx(node, "drain"))
    assert first.status == "waiting" and "delivery 1 failed (500)" in first.message
    assert executor.poll(ctx(node, "drain")).status == "waiting"
    assert len(receiver.requests) == 1  # not due yet
    ExternalRequest.objects.update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    receiver.status = 200
    second = executor.poll(ctx(node, "drain"))
    assert (second.status, second.waiting_on) == ("waiting", "executor") and "accepted" in second.message
    keys = {(h["Idempotency-Key"], h["X-Fleet-Delivery"]) for h, _ in receiver.requests}
    assert len(receiver.requests) == 2 and len(keys) == 1


def test_without_settings_or_callback_url_an_operator_is_needed(receiver, settings):
    settings.FLEET_PUBLIC_URL = ""
    unconfigured = WebhookExecutor().start(ctx(NodeFactory(pool=PoolFactory())))
    assert unconfigured.waiting_on == "operator"
    pool = PoolFactory()
    executor_config_save(actor=UserFactory(role="admin", username="w2"), pool=pool, executor="webhook",
                         secret=SECRET, settings={"url": receiver.url})
    no_url = WebhookExecutor().start(ctx(NodeFactory(pool=pool)))
    assert no_url.waiting_on == "operator" and "FLEET_PUBLIC_URL" in no_url.message
    assert receiver.requests == []
