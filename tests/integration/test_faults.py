"""Faults during ingest: real gunicorn, a real Celery worker, a real ingest writer, a private Redis (cache,
broker and ingest queue, with the append-only file as production runs it) and agents running the real agent
code (spool, delivery, acknowledgements) over HTTP. Mid-run the Celery worker is
SIGKILLed and restarted, Redis is stopped and started again, and a gunicorn worker is SIGKILLed. Every report
must be stored exactly once: none lost, none doubled. While Redis is down ingest goes on (flood protection and
the urgent-evaluation trigger fail open), and once it is back an Xid still reaches the worker."""

import contextlib
import json
import os
import shutil
import signal
import sys
import threading
import time
from datetime import timedelta
from importlib import resources

import pytest
from django.db.models import Sum

from fleet.core import failopen
from fleet.health.models import Finding
from fleet.telemetry.models import AgentEpoch, NodeSample
from fleet.telemetry.services.enrollment import enrollment_token_create
from fleet_agent.simulator import SimulatedAgent, load_scenario, parse_scenario
from fleet_agent.timeutil import utc_now
from tests.factories import ProviderFactory, UserFactory
from tests.processes import RedisServer, child_pids, free_port, gunicorn, running, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True),
              pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")]

AGENTS = 6
STEP_S = 0.3  # real seconds between reports of one agent; each report is 15 s of the agent's own clock
# The Xid node's two Xids happen on its own clock; the test moves that clock to them while Redis is down (13)
# and after it is back (79). Clocks start in the past so that no report is ever ahead of the server; the Xid
# node's is set so that its Xid 79 is two minutes old, recent enough for the rule, and from then on it
# advances 1 s per report, slower than real time.
XID_13_AT, XID_79_AT = 100_000.0, 150_000.0


def _xid_scenario():
    data = json.loads(resources.files("fleet_agent.scenarios").joinpath("xid.json").read_text())
    data["nodes"][0]["faults"][0]["at_s"], data["nodes"][0]["faults"][1]["at_s"] = XID_79_AT, XID_13_AT
    return parse_scenario(data, "xid-during-redis-outage")


class Runner(threading.Thread):
    """One agent: a report every STEP_S, each followed by a delivery of everything spooled (as the daemon
    does when its interval comes round), then a final flush until the spool is empty."""

    def __init__(self, agent: SimulatedAgent, stop: threading.Event):
        super().__init__(daemon=True)
        self.agent, self.stop = agent, stop
        self.sent: list[dict] = []
        self.deliveries: list[tuple[float, float, bool]] = []  # (started, seconds, everything acknowledged)
        self.flushed = False
        self.error: BaseException | None = None
        self.jump_to = 0.0  # set by the test: the agent's clock moves on to this (a fault's time)

    def deliver(self) -> bool:
        started = time.monotonic()
        ok = self.agent.deliver(force=True)
        self.deliveries.append((started, time.monotonic() - started, ok))
        return ok

    def run(self):
        try:
            t = 0.0
            while not self.stop.is_set():
                t = max(t, self.jump_to)
                report = self.agent.step(t)
                if report is not None:
                    self.sent.append(report)
                self.deliver()
                t += 1.0 if t >= XID_79_AT else 15.0
                time.sleep(STEP_S)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not self.flushed:
                self.flushed = self.deliver()
                if not self.flushed:
                    time.sleep(0.3)
        except BaseException as exc:  # reported by the test
            self.error = exc


def _celery_worker(stack: contextlib.ExitStack, log, env):
    command = [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo", "--loglevel", "INFO",
               "--without-gossip", "--without-mingle", "--without-heartbeat", "-n", f"faults-{time.time_ns()}@%h"]
    return stack.enter_context(running(command, log=log, env=env, what="celery worker", timeout=60,
                                       ready=lambda: log.exists() and b"ready." in log.read_bytes()))


def _ingest_writer(stack: contextlib.ExitStack, log, env):
    command = [sys.executable, "manage.py", "fleet_writer", "--consumer", "faults", "--claim-idle", "2"]
    return stack.enter_context(running(command, log=log, env=env, what="ingest writer", timeout=60,
                                       ready=lambda: log.exists() and b"draining" in log.read_bytes()))


def _queue_drained(redis: RedisServer) -> bool:
    import redis as redis_py

    client = redis_py.Redis.from_url(redis.url, socket_timeout=5)
    return client.xlen("fleet:ingest") == 0 and client.xpending("fleet:ingest", "writers")["pending"] == 0


def test_no_report_lost_or_doubled_through_worker_kills_and_a_redis_restart(tmp_path, seeded_catalog):
    # Steady reports are acknowledged once in the ingest queue (REDIS_URL turns it on): the append-only file keeps
    # them through the restart, and the writer stores them.
    redis = RedisServer(tmp_path / "redis", aof=True).start()
    port = free_port()
    env = {"DJANGO_SETTINGS_MODULE": "config.settings.local", "DEBUG": "false", "REDIS_URL": redis.url,
           "CELERY_BROKER_URL": redis.url, "CELERY_RESULT_BACKEND": redis.url, "AGENT_RATE_LIMIT": "100000/min",
           "LOG_LEVEL": "WARNING",
           # Overload shedding has its own test; here a 503 on a busy test machine would blur what is measured.
           "WEB_QUEUE_MAX_MS": "0",
           # The simulated agents report from up to 42 h ago; keep raw history for all of it (the count below).
           "TELEMETRY_RAW_RETENTION_HOURS": "72"}
    operator = UserFactory(role="operator")
    _, token = enrollment_token_create(actor=operator, name="faults", provider=ProviderFactory(kind="own", cloud=""),
                                       delivery_form="bare_metal_owned", billing_mode="reserved")
    healthy = load_scenario("healthy")
    agents = [SimulatedAgent.from_scenario(healthy, i, work_dir=tmp_path / "agents",
                                           start=utc_now() - timedelta(days=1)) for i in range(1, AGENTS)]
    agents.insert(0, SimulatedAgent.from_scenario(_xid_scenario(), 0, work_dir=tmp_path / "agents",
                                                  start=utc_now() - timedelta(seconds=XID_79_AT + 120)))
    stop = threading.Event()
    try:
        with contextlib.ExitStack() as stack:
            web = stack.enter_context(gunicorn(port, "--workers", "2", "--timeout", "30",
                                               log=tmp_path / "gunicorn.log", env=env))
            first_worker = _celery_worker(stack, tmp_path / "celery-1.log", env)
            _ingest_writer(stack, tmp_path / "writer.log", env)
            server = f"http://127.0.0.1:{port}"
            for agent in agents:
                agent.enroll(server, token)
            runners = [Runner(agent, stop) for agent in agents]
            for runner in runners:
                runner.start()
            # Each fault after the previous one, with a few reports' time of normal running in between.
            time.sleep(2)
            os.kill(first_worker.pid, signal.SIGKILL)
            _celery_worker(stack, tmp_path / "celery-2.log", env)
            time.sleep(2)
            redis.stop()
            redis_down = time.monotonic()
            runners[0].jump_to = XID_13_AT  # an urgent report: its evaluation cannot be enqueued now
            time.sleep(4)
            redis_up = time.monotonic()
            redis.start()
            # A web worker whose enqueue failed skips the broker for 5 s (fleet.core.failopen); after that the
            # next urgent report is enqueued again, through a new broker connection.
            time.sleep(failopen.RETRY_AFTER_FAILURE_S - 2)
            runners[0].jump_to = XID_79_AT
            time.sleep(1)
            os.kill(child_pids(web.pid)[0], signal.SIGKILL)
            time.sleep(3)
            stop.set()
            for runner in runners:
                runner.join(timeout=60)

            assert [r.error for r in runners] == [None] * AGENTS
            assert all(r.flushed for r in runners), "every spool must empty once the faults are over"
            # Ingest went on while Redis was down: every delivery then was acknowledged, promptly.
            outage = [d for r in runners for d in r.deliveries if redis_down + 0.5 < d[0] < redis_up - 0.5]
            assert outage and all(ok for _, _, ok in outage), outage
            assert max(seconds for _, seconds, _ in outage) < 3.0

            # What was queued (some of it overtaken by batches written in the request while Redis was down) is
            # written by the writer, which waited out the restart.
            wait_for(lambda: _queue_drained(redis), timeout=60, what=f"the ingest queue to drain (logs in {tmp_path})")
            total = 0
            for runner in runners:
                node_id = runner.agent.identity.node_id
                # History rows are minute buckets; their report counts add up to what was sent, no more, no less.
                stored = NodeSample.objects.filter(node_id=node_id).aggregate(n=Sum("samples"))["n"] or 0
                assert stored == len(runner.sent), f"node {node_id}: {len(runner.sent)} sent, {stored} stored"
                epoch = AgentEpoch.objects.get(node_id=node_id)
                assert epoch.last_sequence == runner.sent[-1]["sequence"]
                assert epoch.gaps == []  # every report the epoch jumped over was filled in
                total += stored
            assert total >= AGENTS * 40

            # The Xid 79 logged after Redis came back was enqueued by the web tier and evaluated by the new worker.
            xid_node = runners[0].agent.identity.node_id
            wait_for(lambda: Finding.objects.filter(node_id=xid_node, rule__slug="xid").exists(), timeout=30,
                     what=f"an xid finding (logs in {tmp_path})")
    finally:
        stop.set()
        for agent in agents:
            agent.close()
        redis.stop()
