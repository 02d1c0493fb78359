"""The outbound policy with real processes: gunicorn refuses to save a destination on the server's own network,
and a real Celery worker refuses to send to one that is already stored (saved under a wider policy, or edited
in the database); a listener on loopback proves that neither process ever connects to it."""

import json
import sys
import urllib.error
import urllib.request

import pytest

from fleet.accounts.services import api_token_create
from fleet.integrations.models import Integration, OutboxMessage
from tests.factories import UserFactory
from tests.integrations.test_outbound_guard import Listener
from tests.processes import free_port, gunicorn, running, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# Both processes run with production's default policy: no private or loopback network allowed.
CLOSED = {"FLEET_OUTBOUND_ALLOWED_NETWORKS": "", "CELERY_TASK_DEFAULT_QUEUE": "outbound-guard-test"}


def _call(base: str, key: str, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(base + path, method=method, data=json.dumps(body or {}).encode(), headers={
        "Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310 (the test's own server)
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def test_neither_the_web_tier_nor_a_worker_connects_to_the_servers_own_network(tmp_path, monkeypatch):
    from config.celery_app import app as celery_app

    monkeypatch.setattr(celery_app.conf, "task_default_queue", CLOSED["CELERY_TASK_DEFAULT_QUEUE"])
    sink = Listener()
    admin = UserFactory(username="guard-admin", role="admin")
    _, key = api_token_create(user=admin, name="probe", write_enabled=True)
    port = free_port()
    worker_log = tmp_path / "worker.log"
    worker = [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo", "--loglevel", "INFO",
              "--without-gossip", "--without-mingle", "--without-heartbeat", "-Q", CLOSED["CELERY_TASK_DEFAULT_QUEUE"],
              "-n", "guard@%h"]
    try:
        with gunicorn(port, "--workers", "1", log=tmp_path / "web.log", env=CLOSED), \
                running(worker, log=worker_log, env=CLOSED, what="celery worker",
                        ready=lambda: worker_log.exists() and b"ready." in worker_log.read_bytes()):
            base = f"http://127.0.0.1:{port}"
            for url in (f"http://127.0.0.1:{sink.port}/", f"http://localhost:{sink.port}/",
                        "http://169.254.169.254/latest/meta-data/", f"http://[::ffff:127.0.0.1]:{sink.port}/"):
                status, body = _call(base, key, "POST", "/api/v1/integrations/", {
                    "name": "probe", "kind": "webhook", "config": {"url": url},
                    "secrets": {"signing_secret": "whsec-0123456789"}})
                assert status == 400, (url, body)
                assert "does not connect there" in body["error"]["fields"]["config.url"][0]
            assert not Integration.objects.exists()

            # Stored anyway (an earlier, wider policy; a database edit): the worker checks again when it sends.
            status, body = _call(base, key, "POST", "/api/v1/integrations/", {
                "name": "hook", "kind": "webhook", "config": {"url": "https://hooks.example/fleet"},
                "secrets": {"signing_secret": "whsec-0123456789"}})
            assert status == 201, body
            Integration.objects.filter(pk=body["id"]).update(config={"url": f"http://127.0.0.1:{sink.port}/"})
            status, sent = _call(base, key, "POST", f"/api/v1/integrations/{body['id']}/test/")
            assert status == 202, sent
            try:
                message = wait_for(lambda: OutboxMessage.objects.filter(pk=sent["id"], state="dead").first(),
                                   timeout=90, what="the worker's verdict")
            except AssertionError as exc:
                row = OutboxMessage.objects.filter(pk=sent["id"]).values("state", "attempts", "last_error").first()
                raise AssertionError(f"{exc}; the message: {row}\nworker log:\n{worker_log.read_text()[-3000:]}"
                                     f"\nweb log:\n{(tmp_path / 'web.log').read_text()[-2000:]}") from None
            assert "refused by the outbound policy" in message.last_error
            status, detail = _call(base, key, "GET", f"/api/v1/deliveries/{message.pk}/")
            assert status == 200 and "loopback" in detail["last_error"]
        assert sink.accepted == 0
    finally:
        sink.close()
