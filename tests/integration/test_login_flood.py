"""A wrong-password flood against real gunicorn workers with the real password hasher: the throttle answers it
before any hashing, so agents' ingest on the same workers keeps its rate.

Flood clients get their share of the workers like any client; what the throttle changes is what each of their
requests costs: a 429 from two cache lookups instead of a PBKDF2 run (≈0.4 s of a worker). So the yardstick
is ingest under an equally large flood of requests Django refuses cheaply."""

import http.cookiejar
import json
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher

from fleet.telemetry.services.enrollment import enrollment_token_create, node_enroll
from tests.factories import PoolFactory, UserFactory
from tests.processes import running
from tests.telemetry.reports import ReportBuilder

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

WORKERS = 2
LOCKOUT_AFTER = 2
AGENTS, FLOODERS = 4, 8


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _status(request: urllib.request.Request, opener=None) -> int:
    try:
        with (opener or urllib.request.build_opener()).open(request, timeout=10) as response:  # noqa: S310
            response.read()
            return response.status
    except urllib.error.HTTPError as err:
        err.read()
        return err.code


def _healthy(url: str) -> bool:
    try:
        return _status(urllib.request.Request(f"{url}/healthz")) == 200
    except OSError:
        return False


class Ingest(threading.Thread):
    """One agent sending one report at a time, as fast as the server takes them; records when each was stored."""

    def __init__(self, url: str, node_id: int, credential: str):
        super().__init__(daemon=True)
        self.url, self.credential = url, credential
        self.builder = ReportBuilder(node_id, gpus=2)  # its own agent instance: sequences never collide
        self.accepted: list[float] = []
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            body = json.dumps({"reports": [self.builder.report()]}).encode()
            request = urllib.request.Request(f"{self.url}/api/v1/agent/reports", data=body, headers={
                "Authorization": f"Node {self.credential}", "Content-Type": "application/json"})
            if _status(request) == 200:
                self.accepted.append(time.monotonic())

    def rate(self, start: float, end: float) -> float:
        return sum(start <= t < end for t in self.accepted) / (end - start)


class Flood:
    """FLOODERS clients posting a login as fast as the server answers, counting the answers by status."""

    def __init__(self, url: str, username: str, *, with_csrf: bool):
        self.url, self.with_csrf = url, with_csrf
        self.body = json.dumps({"username": username, "password": "not-the-password"}).encode()
        self.outcomes: Counter = Counter()
        self.lock, self.stop = threading.Lock(), threading.Event()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(FLOODERS)]

    def _run(self):
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        _status(urllib.request.Request(f"{self.url}/api/v1/auth/session/"), opener)
        headers = {"Content-Type": "application/json"}
        if self.with_csrf:
            headers["X-CSRFToken"] = next(cookie.value for cookie in jar if cookie.name == "csrftoken")
        while not self.stop.is_set():
            request = urllib.request.Request(f"{self.url}/api/v1/auth/session/", data=self.body, headers=headers)
            status = _status(request, opener)
            with self.lock:
                self.outcomes[status] += 1

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=15)


def _measure(agents: list, settle: float, length: float) -> float:
    time.sleep(settle)
    start = time.monotonic()
    time.sleep(length)
    return sum(agent.rate(start, time.monotonic()) for agent in agents)


def test_ingest_keeps_its_rate_while_a_wrong_password_flood_runs(tmp_path):
    hasher = PBKDF2PasswordHasher()
    # A fresh name each run: the shared cache outlives the test database.
    victim = UserFactory(username=f"victim-{uuid.uuid4().hex[:8]}")
    victim.password = hasher.encode("the-password-42", hasher.salt())  # as production stores it
    victim.save(update_fields=["password"])
    operator = UserFactory(username="flood-op", role="operator")
    pool = PoolFactory()
    _, token = enrollment_token_create(actor=operator, name="flood", provider=pool.provider, pool=pool,
                                       delivery_form="cloud_dedicated", billing_mode="on_demand")
    nodes = [node_enroll(token_key=token, facts={"machine_id": f"flood-machine-{n:04d}", "hostname": f"gpu-{n}",
                                                 "gpu_count": 2}) for n in range(AGENTS)]

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{port}",
               "--workers", str(WORKERS), "--timeout", "30"]
    # The real hasher, and the cache production shares between workers (Redis, or files under var/).
    env = {"FLEET_TEST_REAL_PASSWORD_HASHER": "1", "FLEET_TEST_SHARED_CACHE": "1", "AGENT_RATE_LIMIT": "100000/min",
           "LOGIN_LOCKOUT_FAILURES": str(LOCKOUT_AFTER)}
    with running(command, log=tmp_path / "gunicorn.log", ready=lambda: _healthy(url), what="gunicorn", env=env):
        agents = [Ingest(url, enrolled.node.pk, enrolled.credential) for enrolled in nodes]
        for agent in agents:
            agent.start()
        try:
            # The yardstick: as many clients whose requests Django refuses cheaply (no CSRF token, 403), because on
            # a small shared machine any flood takes its share of the workers and of the CPU the clients run on.
            with Flood(url, victim.username, with_csrf=False) as control:
                cheap = _measure(agents, settle=0.5, length=2.5)
            # The wrong-password flood. The first LOCKOUT_AFTER attempts are hashed (they arm the lockout):
            # measure the steady state after them.
            with Flood(url, victim.username, with_csrf=True) as flood:
                during = _measure(agents, settle=1.5, length=3.5)
        finally:
            for agent in agents:
                agent.stop.set()
                agent.join(timeout=15)

    outcomes, total = flood.outcomes, sum(flood.outcomes.values())
    # The yardstick ran (a sanity bound: a busy machine halves these counts, so they stay well below a quiet run's).
    assert control.outcomes[403] > 20 and cheap > 5, (control.outcomes, cheap)
    # Only the wrong passwords that arm the lockout reach the hasher (plus one per other worker that had already
    # passed the check when the lock was set); everything else is a 429 that costs no more than a refused request.
    assert outcomes[401] <= LOCKOUT_AFTER + WORKERS - 1, outcomes
    assert outcomes[429] >= 0.9 * total and total > 50, outcomes
    # Without the throttle every attempt is hashed and ingest fell to 2-5 % of the yardstick (1.1 reports/s against
    # 22-50); with it, it stays about level with it. The margin absorbs a busy machine.
    assert during >= 0.4 * cheap, f"ingest {cheap:.1f}/s under a cheap flood, {during:.1f}/s under this one: {outcomes}"
