"""The queued ingest path with real processes: gunicorn, two `manage.py fleet_writer` processes and a private
redis-server with the append-only file fsynced on every write (as compose runs it). A writer is SIGKILLed in the
middle of a batch twice (once before its transaction commits, once after the commit and before its XACK) and
Redis is SIGKILLed and restarted while agents keep reporting: every acknowledged report ends up stored exactly
once."""

import http.client
import json
import os
import signal
import sys
import threading
import time
import uuid
from collections import Counter

import pytest
from django.db import connection

from fleet.telemetry.models import AgentEpoch, GPUSample, NodeSample, NodeStatus
from fleet.telemetry.services.enrollment import enrollment_token_create, node_enroll
from fleet.telemetry.services.history import history_bucket
from fleet.telemetry.validation import parse_time
from tests.factories import PoolFactory, ProviderFactory, UserFactory
from tests.processes import RedisServer, free_port, gunicorn, running, wait_for
from tests.telemetry.reports import ReportBuilder, gpu_entry

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True),
              pytest.mark.skipif(connection.vendor != "postgresql",
                                 reason="the queue runs with Redis, i.e. with PostgreSQL; the embedded default "
                                        "writes synchronously (the writer's SQLite path has unit tests)")]

NODES = 8
GROUP = "writers"


class Fleet:
    """Agents that post over HTTP and remember every sequence the server acknowledged."""

    def __init__(self, port: int, agents: list[tuple[int, str]]):
        self.port = port
        self.agents = [(node_id, credential, ReportBuilder(node_id, gpus=2)) for node_id, credential in agents]
        for node_id, _, builder in self.agents:  # GPUs of their own (a uuid claimed by two nodes is refused)
            builder.gpus = [gpu_entry(i, uuid=f"GPU-{node_id:08d}-aaaa-bbbb-cccc-{i:012d}") for i in range(2)]
        self.acked: dict[int, int] = {}
        self.sent: dict[int, set[str]] = {node_id: set() for node_id, _ in agents}
        self.queued = 0
        self.failures: list[str] = []
        self.lock = threading.Lock()

    def post(self, credential: str, reports: list[dict]) -> dict | None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("POST", "/api/v1/agent/reports", json.dumps({"reports": reports}),
                         {"Authorization": f"Node {credential}", "Content-Type": "application/json"})
            response = conn.getresponse()
            body = response.read()
        finally:
            conn.close()
        if response.status != 200:
            self.failures.append(f"{response.status} {body[:300]!r}")
            return None
        return json.loads(body)

    def round(self, *, inventory: bool = False, resend: bool = False) -> None:
        """One report from every node (and, with `resend`, each sent twice, as by an agent that timed out)."""
        for node_id, credential, builder in self.agents:
            report = builder.report(with_inventory=inventory)
            for _ in range(2 if resend else 1):
                body = self.post(credential, [report])
                if body is None:
                    continue
                with self.lock:
                    self.acked[node_id] = max(self.acked.get(node_id, 0), body["acked_sequence"])
                    self.sent[node_id].add(report["collected_at"])
                    self.queued += bool(body.get("queued"))

    def keep_reporting(self, stop: threading.Event) -> threading.Thread:
        def loop():
            while not stop.is_set():
                self.round(resend=True)
                time.sleep(0.05)

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        return thread


def _agents() -> list[tuple[int, str]]:
    operator = UserFactory(username="enroller", role="operator")
    provider = ProviderFactory(slug="aws", cloud="aws")
    _, key = enrollment_token_create(actor=operator, name="t", provider=provider, pool=PoolFactory(provider=provider),
                                     delivery_form="cloud_dedicated", billing_mode="spot", labels={})
    agents = []
    for i in range(NODES):
        enrolled = node_enroll(token_key=key, facts={"machine_id": f"{i:016x}", "hostname": f"gpu-{i}",
                                                     "gpu_count": 2})
        agents.append((enrolled.node.pk, enrolled.credential))
    return agents


def _redis(server: RedisServer):
    import redis

    return redis.Redis.from_url(server.url, socket_timeout=5)


def _consumer_pending(server: RedisServer, stream: str, consumer: str) -> int:
    for row in _redis(server).xinfo_consumers(stream, GROUP):
        if row["name"] in (consumer, consumer.encode()):
            return int(row["pending"])
    return 0


def _drained(server: RedisServer, stream: str) -> bool:
    r = _redis(server)
    return r.xlen(stream) == 0 and r.xpending(stream, GROUP)["pending"] == 0


def _writer(name: str, tmp_path, env: dict):
    command = [sys.executable, "manage.py", "fleet_writer", "--consumer", name, "--batch", "4", "--claim-idle", "2"]
    log = tmp_path / f"writer-{name}.log"
    return running(command, log=log, ready=lambda: log.exists() and b"draining" in log.read_bytes(),
                   what=f"writer {name}", env=env)


def test_killed_writers_and_a_restarted_redis_lose_nothing_and_store_nothing_twice(tmp_path):
    stream = f"it:{uuid.uuid4().hex[:8]}"
    port = free_port()
    with RedisServer(tmp_path / "redis", aof=True) as server:
        env = {"FLEET_TEST_INGEST_QUEUE": "1", "INGEST_QUEUE_URL": server.url, "INGEST_STREAM": stream,
               "METRICS_TOKEN": "", "INGEST_QUEUE_TIMEOUT_MS": "500"}
        with gunicorn(port, "--workers", "2", "--timeout", "60", log=tmp_path / "gunicorn.log", env=env):
            fleet = Fleet(port, _agents())
            fleet.round(inventory=True)  # written in the request (inventories), creates the GPU rows
            with _writer("a", tmp_path, env) as a, _writer("b", tmp_path, env) as b:
                fleet.round()
                # Stopped only once idle: stopped inside its transaction, it would hold epoch rows locked.
                wait_for(lambda: _drained(server, stream), timeout=60, what="the first round to be stored")
                os.kill(b.pid, signal.SIGSTOP)  # only `a` works while it is being killed

                # 1. Killed inside its transaction: the epochs are locked, so `a` hangs in the batch's guard.
                blocker = connection.get_new_connection(connection.get_connection_params())
                try:
                    blocker.autocommit = False
                    blocker.execute(f"SELECT 1 FROM {AgentEpoch._meta.db_table} FOR UPDATE")
                    fleet.round()
                    wait_for(lambda: _consumer_pending(server, stream, "a") > 0, what="writer a to read a batch")
                    time.sleep(0.5)
                    os.kill(a.pid, signal.SIGKILL)
                    a.wait(timeout=10)
                finally:
                    blocker.rollback()
                    blocker.close()

            with _writer("a2", tmp_path, env) as a2:
                # a2 first claims and stores what `a` left pending (idle past --claim-idle).
                wait_for(lambda: _drained(server, stream), timeout=60, what="writer a2 to take over a's batch")
                # 2. Killed between its commit and its XACK. Holding the epochs locked keeps a2 inside a batch (it
                # cannot finish one before the test looks, however fast it is); Redis then takes no writes, the lock
                # goes, a2 commits and waits on its XACK, and is killed there.
                before = dict(AgentEpoch.objects.values_list("node_id", "last_sequence"))
                blocker = connection.get_new_connection(connection.get_connection_params())
                try:
                    blocker.autocommit = False
                    blocker.execute(f"SELECT 1 FROM {AgentEpoch._meta.db_table} FOR UPDATE")
                    fleet.round()
                    wait_for(lambda: _consumer_pending(server, stream, "a2") > 0, what="writer a2 to read a batch")
                    _redis(server).execute_command("CLIENT", "PAUSE", "30000", "WRITE")
                finally:
                    blocker.rollback()
                    blocker.close()

                def committed() -> bool:
                    return dict(AgentEpoch.objects.values_list("node_id", "last_sequence")) != before

                wait_for(committed, timeout=20, what="writer a2 to commit its batch", interval=0.05)
                time.sleep(0.3)
                os.kill(a2.pid, signal.SIGKILL)
                a2.wait(timeout=10)
                _redis(server).execute_command("CLIENT", "UNPAUSE")
                # It committed and left its entries unacknowledged.
                assert _consumer_pending(server, stream, "a2") > 0

            os.kill(b.pid, signal.SIGCONT)
            with _writer("c", tmp_path, env):
                # 3. Redis killed and restarted (same files) while agents keep reporting.
                stop = threading.Event()
                reporter = fleet.keep_reporting(stop)
                time.sleep(2)
                server.stop()
                time.sleep(2)  # meanwhile reports are written in the request
                server.start()
                time.sleep(4)
                stop.set()
                reporter.join(timeout=60)
                fleet.round()
                wait_for(lambda: _drained(server, stream), timeout=60, what="the stream to drain")
            os.kill(b.pid, signal.SIGTERM)

    assert not fleet.failures, fleet.failures[:5]
    assert fleet.queued > 0
    for node_id, _, builder in fleet.agents:
        assert fleet.acked[node_id] == builder.sequence
        assert AgentEpoch.objects.get(node_id=node_id, instance_id=builder.instance_id).last_sequence == \
            builder.sequence
        assert NodeStatus.objects.get(node_id=node_id).sequence == builder.sequence
        # Every report once: history is one row per minute holding the number of reports folded in, so each
        # minute must hold exactly the reports the agent sent in it (none lost, none added twice).
        assert len(fleet.sent[node_id]) == builder.sequence
        expected = Counter(history_bucket(parse_time(at)) for at in fleet.sent[node_id])
        stored = dict(NodeSample.objects.filter(node_id=node_id).values_list("at", "samples"))
        assert stored == expected, (node_id, sum(stored.values()), builder.sequence)
        for gpu in builder.gpus:
            assert dict(GPUSample.objects.filter(gpu__uuid=gpu["uuid"]).values_list("at", "samples")) == expected
        # Overtaken reports (written while Redis was down) were all filled in.
        assert AgentEpoch.objects.get(node_id=node_id, instance_id=builder.instance_id).gaps == []
