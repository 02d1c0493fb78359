"""The outbound policy (fleet/core/outbound.py) through the real API and the real delivery paths: no integration
or executor can be aimed at the server's own network, not when it is saved and not when it sends; a listener on
loopback proves that nothing ever connects to it. These tests run with the policy's production default: no
network allow-listed (the suite's other tests allow loopback for their stand-in services)."""

import socket
import threading

import pytest
import urllib3

from fleet.core import crypto, outbound
from fleet.executors.models import ExecutorConfig, ExternalRequest
from fleet.integrations.models import Integration, OutboxMessage
from fleet.integrations.services.delivery import message_deliver
from fleet.integrations.services.outbox import integration_test_message_write

pytestmark = pytest.mark.django_db


class Listener:
    """A TCP listener on 127.0.0.1 that counts the connections it accepts and answers each with `answer`."""

    def __init__(self, answer: bytes = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"):
        self.answer = answer
        self.accepted = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            try:
                conn.settimeout(2)
                conn.recv(65536)
                conn.sendall(self.answer)
            except OSError:
                pass
            finally:
                conn.close()

    def close(self):
        self._stop = True
        self.sock.close()


@pytest.fixture
def listener():
    opened = []

    def make(answer: bytes | None = None) -> Listener:
        opened.append(Listener(answer) if answer is not None else Listener())
        return opened[-1]

    yield make
    for each in opened:
        each.close()


@pytest.fixture
def closed_policy(settings):
    """Production's default: no private or loopback network allowed."""
    settings.OUTBOUND_ALLOWED_NETWORKS = []
    return settings


def _resolving(monkeypatch, names: dict[str, list[str]], calls: list | None = None):
    """Make getaddrinfo answer `names` (each call pops the next answer when several are given, the last repeats)."""
    real = socket.getaddrinfo

    def fake(host, port, *args, **kwargs):
        if host in names:
            if calls is not None:
                calls.append(host)
            answers = names[host]
            address = answers.pop(0) if len(answers) > 1 else answers[0]
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            return [(family, socket.SOCK_STREAM, 6, "", (address, port or 0))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake)


# --- when an address is saved --------------------------------------------------------------------------------------

HOSTILE_URLS = ["http://127.0.0.1:{port}/", "http://169.254.169.254/latest/meta-data/", "http://[::1]:{port}/",
                "http://localhost:{port}/", "http://0.0.0.0:{port}/", "http://[::ffff:127.0.0.1]:{port}/",
                "http://10.1.2.3/", "http://192.168.1.10/", "http://[fd00::1]/", "http://224.0.0.1/",
                "http://127.0.0.1:5432/", "http://localhost:6391/"]


@pytest.mark.parametrize("template", HOSTILE_URLS)
@pytest.mark.parametrize(("kind", "field", "extra"), [
    ("webhook", "url", {"secrets": {"signing_secret": "whsec-0123456789"}}),
    ("pagerduty", "events_url", {"secrets": {"routing_key": "R0UTINGKEY"}}),
    ("opsgenie", "api_url", {"secrets": {"api_key": "k" * 20}}),
])
def test_an_admin_cannot_aim_an_integration_at_the_servers_own_network(admin_api, closed_policy, listener, template,
                                                                        kind, field, extra):
    sink = listener()
    url = template.format(port=sink.port)
    response = admin_api.post("/api/v1/integrations/", {"name": "probe", "kind": kind, "config": {field: url},
                                                        **extra}, format="json")
    assert response.status_code == 400, response.json()
    message = response.json()["error"]["fields"][f"config.{field}"][0]
    assert message.startswith("Not allowed:") and "does not connect there" in message
    assert not Integration.objects.exists()
    assert sink.accepted == 0


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "169.254.169.254", "::1", "10.0.0.25"])
def test_an_smtp_host_on_the_servers_own_network_is_refused(admin_api, closed_policy, host):
    response = admin_api.post("/api/v1/integrations/", {"name": "mail", "kind": "email", "config": {
        "to": ["oncall@example.com"], "smtp_host": host, "smtp_port": 25}}, format="json")
    assert response.status_code == 400
    assert "does not connect there" in response.json()["error"]["fields"]["config.smtp_host"][0]


def test_a_private_network_is_allowed_once_it_is_listed(admin_api, closed_policy):
    body = {"name": "onprem-jira", "kind": "webhook", "config": {"url": "http://10.20.0.5/hooks"},
            "secrets": {"signing_secret": "whsec-0123456789"}}
    assert admin_api.post("/api/v1/integrations/", body, format="json").status_code == 400
    closed_policy.OUTBOUND_ALLOWED_NETWORKS = ["10.20.0.0/16"]
    assert admin_api.post("/api/v1/integrations/", body, format="json").status_code == 201
    # Metadata and the unspecified address stay refused whatever the list says.
    closed_policy.OUTBOUND_ALLOWED_NETWORKS = ["0.0.0.0/0", "::/0"]
    for url in ("http://169.254.169.254/", "http://0.0.0.0/", "http://224.0.0.1/"):
        response = admin_api.post("/api/v1/integrations/", {**body, "name": url, "config": {"url": url}},
                                  format="json")
        assert response.status_code == 400, url


def test_the_servers_own_database_and_redis_are_refused_even_on_an_allowed_network(settings, monkeypatch):
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    settings.REDIS_URL = "redis://127.0.0.1:6391/0"
    database = settings.DATABASES["default"]
    if not database.get("HOST"):  # the embedded SQLite default has no host: name one (SQLite ignores it)
        monkeypatch.setitem(database, "HOST", "127.0.0.1")
        monkeypatch.setitem(database, "PORT", "5432")
    assert "own database" in outbound.address_refusal(database["HOST"], int(database["PORT"] or 5432))
    assert "own database" in outbound.address_refusal("127.0.0.1", 6391)
    assert outbound.address_refusal("127.0.0.1", 8080) == ""


def test_an_executor_webhook_on_the_servers_own_network_is_refused(admin_api, closed_policy, listener):
    from tests.factories import PoolFactory

    sink = listener()
    pool = PoolFactory()
    response = admin_api.post("/api/v1/executor-configs/", {
        "pool": pool.pk, "executor": "webhook", "settings": {"url": f"http://127.0.0.1:{sink.port}/provision"},
        "secret": "whsec-" + "x" * 24}, format="json")
    assert response.status_code == 400, response.json()
    assert "does not connect there" in response.json()["error"]["fields"]["settings.url"][0]
    assert not ExecutorConfig.objects.exists() and sink.accepted == 0


# --- when a message is sent ---------------------------------------------------------------------------------------


def _webhook(make_integration, url: str, name: str = "hook") -> Integration:
    return make_integration("webhook", {"url": url}, {"signing_secret": "whsec-0123456789"}, name=name)


def test_a_saved_destination_is_checked_again_when_it_sends(make_integration, admin_user, settings, listener):
    sink = listener()
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]  # saved while loopback was allowed…
    integration = _webhook(make_integration, f"http://127.0.0.1:{sink.port}/events")
    settings.OUTBOUND_ALLOWED_NETWORKS = []  # …and the policy tightened afterwards
    message = integration_test_message_write(integration=integration, actor=admin_user)
    message_deliver(message_id=message.pk)
    message.refresh_from_db()
    assert message.state == "dead" and "refused by the outbound policy" in message.last_error
    assert "loopback" in message.last_error
    assert sink.accepted == 0


def test_a_name_that_resolves_to_loopback_when_it_sends_is_refused(make_integration, admin_user, closed_policy,
                                                                   listener, monkeypatch):
    sink = listener()
    integration = _webhook(make_integration, f"http://hooks.customer.example:{sink.port}/events")  # no DNS yet
    _resolving(monkeypatch, {"hooks.customer.example": ["127.0.0.1"]})
    message = integration_test_message_write(integration=integration, actor=admin_user)
    message_deliver(message_id=message.pk)
    message.refresh_from_db()
    assert "resolves to a loopback address" in message.last_error and sink.accepted == 0


def test_the_connection_goes_to_the_address_that_was_checked(make_integration, admin_user, settings, listener,
                                                             monkeypatch):
    """DNS rebinding: the first answer passes the check, a later one points at metadata. The name is resolved once
    and the connection made to the checked address."""
    sink = listener()
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    integration = _webhook(make_integration, f"http://rebind.example:{sink.port}/events")
    calls = []
    _resolving(monkeypatch, {"rebind.example": ["127.0.0.1", "169.254.169.254"]}, calls)
    message = integration_test_message_write(integration=integration, actor=admin_user)
    assert message_deliver(message_id=message.pk) == "delivered"
    assert sink.accepted == 1 and calls == ["rebind.example"]


def test_redirects_are_never_followed(make_integration, admin_user, settings, listener):
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    target = listener()
    redirecting = listener(f"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{target.port}/\r\n"
                           "Content-Length: 0\r\nConnection: close\r\n\r\n".encode())
    integration = _webhook(make_integration, f"http://127.0.0.1:{redirecting.port}/events")
    message = integration_test_message_write(integration=integration, actor=admin_user)
    message_deliver(message_id=message.pk)
    message.refresh_from_db()
    assert message.state != "delivered" and "answered 302" in message.last_error
    assert redirecting.accepted == 1 and target.accepted == 0


def test_a_closed_port_and_a_filtered_one_read_the_same(make_integration, admin_user, settings, monkeypatch):
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    refused = integration_test_message_write(integration=_webhook(make_integration, f"http://127.0.0.1:{port}/",
                                                                  "refused"), actor=admin_user)
    message_deliver(message_id=refused.pk)

    def filtered(*args, **kwargs):
        raise TimeoutError("timed out")

    monkeypatch.setattr(urllib3.util.connection, "create_connection", filtered)
    monkeypatch.setattr(urllib3.connection.connection, "create_connection", filtered)
    dropped = integration_test_message_write(integration=_webhook(make_integration, "http://127.0.0.2:80/",
                                                                  "filtered"), actor=admin_user)
    message_deliver(message_id=dropped.pk)
    errors = [OutboxMessage.objects.get(pk=m.pk).last_error.split(": ", 1)[1] for m in (refused, dropped)]
    assert errors[0] == errors[1] == "could not connect (refused, unreachable or timed out)"


def test_what_a_receiver_answered_is_shown_to_admins_only(make_integration, admin_user, settings, listener,
                                                          admin_api, operator_api, viewer_api):
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    banner = b"internal-service-banner v9.9"
    sink = listener(b"HTTP/1.1 500 Oops\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(banner), banner))
    message = integration_test_message_write(integration=_webhook(make_integration, f"http://127.0.0.1:{sink.port}/"),
                                             actor=admin_user)
    message_deliver(message_id=message.pk)
    for api, sees in ((admin_api, True), (operator_api, False), (viewer_api, False)):
        listed = api.get("/api/v1/deliveries/").content.decode()
        detail = api.get(f"/api/v1/deliveries/{message.pk}/").content.decode()
        assert ("internal-service-banner" in listed + detail) is sees, api
        assert "answered 500" in detail


def test_an_executor_webhook_is_checked_again_when_it_sends(settings, listener):
    from fleet.executors.services.webhook import webhook_deliver
    from tests.factories import PoolFactory

    sink = listener()
    settings.FLEET_PUBLIC_URL = "https://fleet.example"
    pool = PoolFactory()
    config = ExecutorConfig.objects.create(pool=pool, executor="webhook",
                                           settings={"url": f"http://127.0.0.1:{sink.port}/provision"},
                                           secret_encrypted=crypto.encrypt("whsec-" + "y" * 24))
    settings.OUTBOUND_ALLOWED_NETWORKS = []
    request = ExternalRequest.objects.create(pool=pool, executor="webhook", idempotency_key="inc-1:1:1",
                                             kind="request_replacement")
    request = webhook_deliver(config=config, request=request, payload={"kind": "request_replacement"})
    assert "refused by the outbound policy" in request.detail["last_answer"] and sink.accepted == 0


def test_an_smtp_relay_is_checked_again_when_it_sends(make_integration, admin_user, closed_policy, listener,
                                                      monkeypatch):
    sink = listener(b"220 mail.internal ESMTP\r\n")
    integration = make_integration("email", {"to": ["oncall@example.com"], "smtp_host": "relay.customer.example",
                                             "smtp_port": sink.port, "smtp_security": "none"}, name="mail")
    _resolving(monkeypatch, {"relay.customer.example": ["127.0.0.1"]})
    message = integration_test_message_write(integration=integration, actor=admin_user)
    message_deliver(message_id=message.pk)
    message.refresh_from_db()
    assert "refused by the outbound policy" in message.last_error and sink.accepted == 0


def test_a_host_header_outside_allowed_hosts_gets_no_hint(client, settings):
    settings.ALLOWED_HOSTS = ["fleet.example"]
    for path in ("/api/v1/nodes/", "/healthz", "/"):
        response = client.get(path, HTTP_HOST="attacker.example")
        assert response.status_code == 400, path
        assert b"ALLOWED_HOSTS" not in response.content and b"attacker.example" not in response.content, path


@pytest.mark.parametrize(("executor", "field", "extra"), [
    ("kubernetes", "api_url", {}),
    ("aws", "endpoint_url", {"region": "eu-west-1"}),
])
def test_a_kubernetes_api_or_aws_endpoint_on_the_servers_own_network_is_refused(admin_api, closed_policy, listener,
                                                                                 executor, field, extra):
    from tests.factories import PoolFactory

    sink = listener()
    for url in (f"http://127.0.0.1:{sink.port}/", "http://169.254.169.254/"):
        response = admin_api.post("/api/v1/executor-configs/", {
            "pool": PoolFactory().pk, "executor": executor, "settings": {field: url, **extra},
            "secret": "s" * 32}, format="json")
        assert response.status_code == 400, response.json()
        assert "does not connect there" in response.json()["error"]["fields"][f"settings.{field}"][0]
    assert not ExecutorConfig.objects.exists() and sink.accepted == 0


def test_the_kubernetes_client_is_checked_again_when_it_connects(settings, listener):
    """Saved while loopback was allowed, the policy tightened since: the cordon never reaches the address."""
    from fleet.executors import interface as steps
    from fleet.executors.backends.kubernetes import KubernetesExecutor
    from tests.factories import NodeFactory, PoolFactory

    sink = listener()
    pool = PoolFactory()
    ExecutorConfig.objects.create(pool=pool, executor="kubernetes",
                                  settings={"api_url": f"http://127.0.0.1:{sink.port}", "eviction_retry_s": 5,
                                            "taint_key": "fleet.io/unhealthy", "verify_tls": True,
                                            "node_name_label": "kubernetes-node"},
                                  secret_encrypted=crypto.encrypt("sa-token"))
    node = NodeFactory(pool=pool, hostname="gpu-node-3")
    settings.OUTBOUND_ALLOWED_NETWORKS = []
    outcome = KubernetesExecutor().start(steps.StepContext(
        incident_id=2, incident_key="INC-2", node_id=node.pk, step_index=0, attempt=1, kind="cordon", params={},
        dry_run=False, idempotency_key="INC-2:0:1", facts={"title": "Xid 79"}))
    assert outcome.status == "failed" and "refused by the outbound policy" in outcome.message
    assert sink.accepted == 0


def test_an_aws_endpoint_is_checked_again_when_it_replaces(settings, listener):
    from fleet.executors.services.aws import aws_request_replacement
    from tests.factories import NodeFactory, PoolFactory

    sink = listener()
    pool = PoolFactory()
    config = ExecutorConfig.objects.create(pool=pool, executor="aws", settings={
        "region": "eu-west-1", "mode": "asg", "endpoint_url": f"http://127.0.0.1:{sink.port}",
        "access_key_id": "AKIAFLEETTESTKEY0001"}, secret_encrypted=crypto.encrypt("secret-" + "z" * 24))
    node = NodeFactory(pool=pool, instance_id="i-0123456789abcdef0")
    settings.OUTBOUND_ALLOWED_NETWORKS = []
    request = ExternalRequest.objects.create(pool=pool, executor="aws", idempotency_key="inc-3:4:1",
                                             kind="request_replacement")
    request = aws_request_replacement(config=config, node=node, request=request)
    assert request.state == "failed" and "refused by the outbound policy" in request.message
    assert sink.accepted == 0
