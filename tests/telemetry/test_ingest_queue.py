"""The ingest queue against a real redis-server (append-only file on, as in production): steady batches are
acknowledged once in the stream and written by the writer exactly once; everything else, and everything while
the stream is unavailable, is written in the request."""

import uuid
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from django.db import connection
from django.test import override_settings
from prometheus_client import REGISTRY

from fleet.core import rowsets
from fleet.inventory.models import Node
from fleet.telemetry.models import AgentEpoch, Event, GPUSample, NodeSample, NodeStatus
from fleet.telemetry.services import stream
from fleet.telemetry.services import writer as writer_module
from fleet.telemetry.services.history import history_bucket
from fleet.telemetry.services.ingest import MAX_SEQUENCE_GAPS, gaps_decode, gaps_update, in_gaps
from fleet.telemetry.services.writer import Writer, entries_store
from tests.factories import NodeFactory, ProviderFactory
from tests.processes import RedisServer
from tests.telemetry.reports import ReportBuilder, gpu_entry, stored_reports

pytestmark = pytest.mark.django_db

XID79 = ("[ 1234.567890] NVRM: Xid (PCI:0000:01:00): 79, pid=<unknown>, name=<unknown>, "
         "GPU has fallen off the bus.")


def _reset_clients():
    stream.redis_client.cache_clear()
    stream._registered.cache_clear()
    stream.stream_health.reset()


@pytest.fixture
def queue(tmp_path):
    """The queue on, against a private redis-server; yields the server."""
    with RedisServer(tmp_path / "redis", aof=True) as server, override_settings(
            INGEST_QUEUE=True, INGEST_QUEUE_URL=server.url, INGEST_STREAM=f"test:{uuid.uuid4().hex[:8]}"):
        _reset_clients()
        yield server
    _reset_clients()


def _writer(**kwargs) -> Writer:
    return Writer(consumer=kwargs.pop("consumer", "w1"), block_ms=kwargs.pop("block_ms", 50), **kwargs)


def _drain(writer: Writer | None = None) -> int:
    writer = writer or _writer()
    handled = 0
    while (count := writer.step()):
        handled += count
    return handled


def _stream_len() -> int:
    return stream.redis_client().xlen(stream.stream_name())


def _started(agent, *, gpus: int = 8) -> ReportBuilder:
    builder = ReportBuilder(agent.node_id, gpus=gpus)
    # GPUs of its own (a uuid another node holds is refused, and its readings not stored)
    builder.gpus = [gpu_entry(i, uuid=f"GPU-{agent.node_id:08d}-aaaa-bbbb-cccc-{i:012d}") for i in range(gpus)]
    first = agent.send(builder.report(with_inventory=True))  # an inventory: written in the request
    assert first.status_code == 200 and "queued" not in first.json()
    return builder


def test_steady_batch_is_acknowledged_queued_and_written_by_the_writer(queue, enroll):
    agent = enroll()
    builder = _started(agent)
    response = agent.send(builder.report(), builder.report())
    assert response.status_code == 200, response.content
    assert response.json() == {"acked_sequence": 3, "agent_instance_id": builder.instance_id, "accepted": 2,
                               "duplicates": 0, "queued": True}
    assert NodeStatus.objects.get(node_id=agent.node_id).sequence == 1  # not yet: in the stream
    assert _stream_len() == 1
    assert stream.redis_client().smembers(stream.node_key(agent.node_id))

    assert _drain() == 1
    status = NodeStatus.objects.get(node_id=agent.node_id)
    assert status.sequence == 3 and status.silent is False
    assert stored_reports(NodeSample, node_id=agent.node_id) == 3
    assert stored_reports(GPUSample, gpu__node_id=agent.node_id) == 24
    assert AgentEpoch.objects.get(node_id=agent.node_id).last_sequence == 3
    # Acknowledged, deleted from the stream and off the node's set.
    assert _stream_len() == 0
    assert not stream.redis_client().smembers(stream.node_key(agent.node_id))
    assert stream.stream_depth() == (0, 0)


def test_a_resent_batch_and_an_entry_of_a_dead_writer_are_stored_once(queue, enroll):
    agent = enroll()
    builder = _started(agent)
    second = builder.report()
    agent.send(second)
    agent.send(second)  # the agent timed out and sent it again: queued twice
    dead = _writer(consumer="dead")
    assert len(dead.read()) == 2  # read by a writer that dies before storing them: pending in the group
    assert _drain(_writer(consumer="alive", claim_idle_s=0)) == 2  # claimed and stored
    assert stored_reports(NodeSample, node_id=agent.node_id) == 2
    assert AgentEpoch.objects.get(node_id=agent.node_id).last_sequence == 2
    assert stream.stream_depth() == (0, 0)

    # Stored but never acknowledged (a writer killed between commit and XACK): found stored, only acknowledged.
    third = builder.report()
    agent.send(third)
    half = _writer(consumer="half")
    entries = [stream.entry_decode(i, f) for i, f in half.read()]
    assert entries_store(entries).stored == 1
    duplicates_before = REGISTRY.get_sample_value("fleet_writer_reports_total", {"outcome": "duplicate"}) or 0
    assert _drain(_writer(consumer="successor", claim_idle_s=0)) == 1
    assert REGISTRY.get_sample_value("fleet_writer_reports_total", {"outcome": "duplicate"}) == duplicates_before + 1
    assert stored_reports(NodeSample, node_id=agent.node_id) == 3
    assert stream.stream_depth() == (0, 0)


def test_a_batch_with_events_is_written_at_once_after_the_nodes_queued_reports(queue, enroll):
    agent = enroll()
    builder = _started(agent)
    assert agent.send(builder.report()).json()["queued"] is True  # sequence 2, still in the stream
    urgent = builder.report(events=[{"kind": "xid", "at": "2026-12-02T10:00:00Z", "gpu_uuid": builder.gpus[0]["uuid"],
                                     "pci_bus_id": None, "code": 79, "severity": "critical", "message": XID79,
                                     "raw": XID79}])
    response = agent.send(urgent)
    assert response.status_code == 200, response.content
    assert "queued" not in response.json() and response.json()["acked_sequence"] == 3
    assert Event.objects.filter(node_id=agent.node_id, kind="xid").count() == 1
    # Sequence 2 was written first, in the request, so it was not lost to the guard as an "old" report, and
    # the epoch did not jump over it.
    assert AgentEpoch.objects.get(node_id=agent.node_id).gaps == []
    assert stored_reports(NodeSample, node_id=agent.node_id) == 3
    assert NodeStatus.objects.get(node_id=agent.node_id).sequence == 3
    assert _drain() == 1  # the writer finds it stored
    assert stored_reports(NodeSample, node_id=agent.node_id) == 3
    assert NodeStatus.objects.get(node_id=agent.node_id).sequence == 3  # not set back to 2
    assert stream.stream_depth() == (0, 0)


def test_reports_are_written_in_the_request_while_redis_is_down(queue, enroll):
    agent = enroll()
    builder = _started(agent)
    queue.stop()
    before = REGISTRY.get_sample_value("fleet_ingest_queue_unavailable_total", {"reason": "unavailable"}) or 0
    response = agent.send(builder.report())
    assert response.status_code == 200, response.content
    assert "queued" not in response.json()
    assert NodeStatus.objects.get(node_id=agent.node_id).sequence == 2
    assert REGISTRY.get_sample_value("fleet_ingest_queue_unavailable_total", {"reason": "unavailable"}) == before + 1
    # The next request does not ask Redis again for a while (failopen): written at once too.
    assert "queued" not in agent.send(builder.report()).json()
    assert stored_reports(NodeSample, node_id=agent.node_id) == 3


def test_reports_overtaken_while_redis_was_down_keep_their_history(queue, enroll):
    agent = enroll()
    builder = _started(agent)
    assert agent.send(builder.report()).json()["queued"] is True  # sequence 2 in the stream (on disk: AOF)
    queue.stop()  # killed: no writer got to sequence 2
    assert "queued" not in agent.send(builder.report()).json()  # sequence 3 written in the request
    assert NodeStatus.objects.get(node_id=agent.node_id).sequence == 3
    # The batch jumped over sequence 2: the epoch remembers it as never stored.
    assert _ranges(AgentEpoch.objects.get(node_id=agent.node_id).gaps) == [[2, 2]]
    queue.start()  # the same port and directory: the stream comes back from the append-only file
    assert _stream_len() == 1
    (entry_id, fields), = stream.redis_client().xrange(stream.stream_name())
    assert _drain() == 1
    assert stored_reports(NodeSample, node_id=agent.node_id) == 3  # sequence 2's history is there
    assert stored_reports(GPUSample, gpu__node_id=agent.node_id) == 24
    assert NodeStatus.objects.get(node_id=agent.node_id).sequence == 3  # the latest status stays the newest
    epoch = AgentEpoch.objects.get(node_id=agent.node_id)
    assert (epoch.last_sequence, epoch.gaps) == (3, [])
    # Delivered once more (a writer killed before its XACK): now a replay, not added to its bucket again.
    again = entries_store([stream.entry_decode(entry_id, fields)])
    assert (again.stored, again.duplicates) == (0, 1)
    assert stored_reports(NodeSample, node_id=agent.node_id) == 3
    assert stored_reports(GPUSample, gpu__node_id=agent.node_id) == 24
    stream.stream_health.reset()  # as after failopen.RETRY_AFTER_FAILURE_S: the stream is asked again
    assert agent.send(builder.report(), builder.report()).json()["queued"] is True
    assert _drain() == 1
    assert stored_reports(NodeSample, node_id=agent.node_id) == 5


def test_a_full_stream_sends_batches_down_the_synchronous_path(queue, enroll):
    agent = enroll()
    builder = _started(agent)
    with override_settings(INGEST_QUEUE_MAX_ENTRIES=1):
        assert agent.send(builder.report()).json().get("queued") is True
        assert "queued" not in agent.send(builder.report()).json()
    assert NodeStatus.objects.get(node_id=agent.node_id).sequence == 3
    assert _drain() == 1
    assert stored_reports(NodeSample, node_id=agent.node_id) == 3


def test_one_writer_batch_stores_many_nodes_and_sends_the_odd_ones_down_the_general_path(queue, enroll):
    agents = [enroll(machine_id=f"{i:016x}", hostname=f"gpu-{i}") for i in range(6)]
    builders = [_started(a) for a in agents]
    for agent, builder in zip(agents, builders, strict=True):
        agent.send(builder.report())
        agent.send(builder.report())
    # A reinstalled agent (a new instance: no epoch yet) and a hot-added GPU that has no row yet.
    reinstalled = ReportBuilder(agents[0].node_id)
    agents[0].send(reinstalled.report())
    builders[1].gpus.append(gpu_entry(8, uuid="GPU-00000008-aaaa-bbbb-cccc-hotadded0000"))
    agents[1].send(builders[1].report())
    assert _stream_len() == 14

    assert _drain(_writer(batch=500)) == 14
    for agent, builder in zip(agents, builders, strict=True):
        assert AgentEpoch.objects.get(node_id=agent.node_id, instance_id=builder.instance_id).last_sequence == \
            builder.sequence
    assert AgentEpoch.objects.get(node_id=agents[0].node_id, instance_id=reinstalled.instance_id).last_sequence == 1
    assert stored_reports(NodeSample) == 6 * 3 + 1 + 1
    assert stored_reports(GPUSample, gpu__uuid__endswith="hotadded0000") == 1
    assert NodeStatus.objects.get(node_id=agents[2].node_id).sequence == 3
    assert stream.stream_depth() == (0, 0)


def test_a_malformed_entry_is_set_aside_not_retried_forever(queue, enroll):
    stream.redis_client().xadd(stream.stream_name(), {"n": "1", "t": "not a time", "r": b"[]"})
    assert _drain() == 1
    assert _stream_len() == 0
    assert stream.redis_client().xlen(f"{stream.stream_name()}:dead") == 1


def test_merged_statements_keep_every_row():
    a = rowsets.Statement("INSERT x", ('[{"a": 1}]',))
    b = rowsets.Statement("INSERT y", ("plain",))
    c = rowsets.Statement("INSERT x", ('[{"a": 2}, {"a": 3}]',))
    assert rowsets.merge([a, b, c]) == [rowsets.Statement("INSERT x", ('[{"a": 1},{"a": 2}, {"a": 3}]',)), b]


def _history(model, **filters) -> dict:
    """{bucket start: reports folded in} of a node's or GPU's raw history."""
    return dict(model.objects.filter(**filters).values_list("at", "samples"))


def _minute_ago(minutes: int) -> datetime:
    return history_bucket(datetime.now(UTC)) - timedelta(minutes=minutes)


def test_a_later_entry_stored_first_leaves_a_gap_that_the_earlier_one_fills_once(queue, enroll):
    """Two writers: one holds sequence 2 (slow, or killed and claimed later) while another stores sequence 3."""
    agent = enroll()
    builder = _started(agent)
    older, newer = _minute_ago(5), _minute_ago(4)
    agent.send(builder.report(at=older + timedelta(seconds=7)))
    agent.send(builder.report(at=newer + timedelta(seconds=7)))
    first, second = [stream.entry_decode(i, f) for i, f in _writer(consumer="slow").read()]
    assert entries_store([second]).stored == 1
    epoch = AgentEpoch.objects.get(node_id=agent.node_id)
    assert (epoch.last_sequence, _ranges(epoch.gaps)) == (3, [[2, 2]])

    assert (entries_store([first]).stored, entries_store([first]).duplicates) == (1, 1)  # stored once, then a replay
    assert AgentEpoch.objects.get(node_id=agent.node_id).gaps == []
    status = NodeStatus.objects.get(node_id=agent.node_id)
    assert status.sequence == 3 and status.collected_at == newer + timedelta(seconds=7)  # not set back
    both = entries_store([first, second])
    assert (both.stored, both.duplicates) == (0, 2)
    history = _history(NodeSample, node_id=agent.node_id)
    assert (history[older], history[newer], sum(history.values())) == (1, 1, 3)
    gpu = _history(GPUSample, gpu__uuid=builder.gpus[0]["uuid"])
    assert (gpu[older], gpu[newer]) == (1, 1)
    assert _drain(_writer(consumer="successor", claim_idle_s=0)) == 2  # only acknowledged
    assert sum(_history(NodeSample, node_id=agent.node_id).values()) == 3
    assert stream.stream_depth() == (0, 0)


def test_sequences_an_agent_skips_are_remembered_boundedly(queue, enroll, monkeypatch):
    agent = enroll()
    builder = _started(agent)
    skips = MAX_SEQUENCE_GAPS + 3
    for _ in range(skips):
        builder.sequence += 1  # a report the agent set aside as poison: never sent
        assert agent.send(builder.report()).json()["queued"] is True
    assert _drain(_writer(batch=1)) == skips
    epoch = AgentEpoch.objects.get(node_id=agent.node_id)
    # Gaps at 2, 4, ..., 2 * skips; the newest MAX_SEQUENCE_GAPS are kept.
    assert _ranges(epoch.gaps) == [[s, s] for s in range(2 * (skips - MAX_SEQUENCE_GAPS + 1), 2 * skips + 1, 2)]
    assert stored_reports(NodeSample, node_id=agent.node_id) == 1 + skips

    # A report inside a remembered gap is stored once; one in a gap that was let go counts as a replay.
    kept, forgotten = epoch.gaps[0][0], 2
    for sequence in (kept, forgotten):
        report = builder.report(sequence=sequence)
        builder.sequence -= 1
        agent.send(report)
    outcome = entries_store([stream.entry_decode(i, f) for i, f in _writer(consumer="late").read()])
    assert (outcome.stored, outcome.duplicates) == (1, 1)
    assert stored_reports(NodeSample, node_id=agent.node_id) == 2 + skips
    assert AgentEpoch.objects.get(node_id=agent.node_id).gaps == epoch.gaps[1:]
    assert _drain(_writer(consumer="late", claim_idle_s=0)) == 2  # found stored, only acknowledged
    assert stored_reports(NodeSample, node_id=agent.node_id) == 2 + skips

    # Reports that continue the sequence take the set-based path again (PostgreSQL).
    if connection.vendor == "postgresql":
        monkeypatch.setattr(writer_module, "reports_ingest", _not_expected)
    agent.send(builder.report(), builder.report())
    assert _drain() == 1
    assert stored_reports(NodeSample, node_id=agent.node_id) == 4 + skips


def _not_expected(**kwargs):
    raise AssertionError(f"stored one node at a time: {kwargs['node_id']}")


def test_a_writer_batch_folds_many_reports_of_one_minute_of_many_nodes_in_one_statement_per_table(
        queue, enroll, monkeypatch, caplog):
    """Several requests of one node in one minute, several nodes, a second agent instance of one of them, all in
    one writer batch: the set-based statements upsert each bucket once (PostgreSQL refuses `ON CONFLICT DO UPDATE`
    touching one row twice in a statement), and the folded bucket holds every reading."""
    agents = [enroll(machine_id=f"{i:016x}", hostname=f"gpu-{i}") for i in range(4)]
    builders = [_started(a, gpus=2) for a in agents]
    minute = _minute_ago(3)
    busy = [10.0, 20.0, 30.0, 40.0, 50.0]
    for agent, builder in zip(agents, builders, strict=True):
        reports = []
        for k, value in enumerate(busy):
            report = builder.report(at=minute + timedelta(seconds=5 + 10 * k))
            report["system"]["cpu_busy_pct"] = value
            report["gpus"][1]["temperature_c"] = 50 + k
            reports.append(report)
        for report in reports[:3]:  # three requests, then one with two reports
            agent.send(report)
        agent.send(*reports[3:])
    reinstalled = ReportBuilder(agents[0].node_id, gpus=2)
    reinstalled.gpus = builders[0].gpus
    agents[0].send(reinstalled.report(at=minute + timedelta(seconds=58)))
    assert _stream_len() == 4 * 4 + 1

    went_alone = []
    if connection.vendor == "postgresql":  # only the second instance leaves the set-based batch
        original = writer_module.reports_ingest
        monkeypatch.setattr(writer_module, "reports_ingest",
                            lambda **kw: (went_alone.append(kw["reports"][0]["agent"]["instance_id"]),
                                          original(**kw))[1])
    assert _drain(_writer(batch=500)) == 4 * 4 + 1
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.text
    if connection.vendor == "postgresql":
        assert went_alone == [reinstalled.instance_id]

    for agent, builder in zip(agents, builders, strict=True):
        extra = 1 if agent is agents[0] else 0
        row = NodeSample.objects.get(node_id=agent.node_id, at=minute)
        assert row.samples == len(busy) + extra
        if not extra:
            assert (row.cpu_busy_pct, row.cpu_busy_pct_min, row.cpu_busy_pct_max) == (30.0, 10.0, 50.0)
        assert stored_reports(NodeSample, node_id=agent.node_id) == 1 + len(busy) + extra
        hot = GPUSample.objects.get(gpu__uuid=builder.gpus[1]["uuid"], at=minute)
        assert hot.samples == len(busy) + extra
        if not extra:
            assert (hot.temperature_c, hot.temperature_c_min, hot.temperature_c_max) == (52.0, 50.0, 54.0)
        assert AgentEpoch.objects.get(node_id=agent.node_id, instance_id=builder.instance_id).last_sequence == 6
    assert stream.stream_depth() == (0, 0)


def _ranges(gaps) -> list[list[int]]:
    """The gaps' sequence ranges, without the time each was recorded at."""
    return [gap[:2] for gap in gaps]


def test_gap_bookkeeping():
    now = datetime.now(UTC)

    def update(gaps, last, stored, **kwargs):
        return _ranges(gaps_update([[lo, hi, None] for lo, hi in gaps], last, stored, now=now, **kwargs))

    assert update([], 4, [5, 6]) == []
    assert update([], 4, [7, 9]) == [[5, 6], [8, 8]]
    assert update([], -1, [3]) == [[1, 2]]  # a new epoch: sequences start at 1
    assert update([], -1, [1, 2]) == []
    assert update([[5, 9]], 12, [], filled=[5, 7, 9]) == [[6, 6], [8, 8]]
    assert update([[2, 2], [5, 6]], 8, [11], filled=[2]) == [[5, 6], [9, 10]]
    many = update([], 0, list(range(2, 2 * (MAX_SEQUENCE_GAPS + 5), 2)))
    assert len(many) == MAX_SEQUENCE_GAPS and many[-1] == [2 * (MAX_SEQUENCE_GAPS + 4) - 1] * 2


def test_gaps_are_let_go_once_older_than_the_raw_retention(settings):
    settings.TELEMETRY_RAW_RETENTION_HOURS = 24
    now = datetime(2026, 12, 3, 12, tzinfo=UTC)
    at = int(now.timestamp())
    recorded = gaps_update([], 4, [7], now=now)
    assert recorded == [[5, 6, at]]
    # A split keeps its gap's time; a gap stored before gaps had one gets the time of this update.
    assert gaps_update([[5, 9, at - 60], [11, 11, None]], 12, [], filled=[7], now=now) == [
        [5, 6, at - 60], [8, 9, at - 60], [11, 11, at]]
    # A day later the first is at the limit and kept; a second later it is let go, the newer one stays.
    later = gaps_update([[5, 6, at], [8, 8, at + 3600]], 20, [], now=now + timedelta(days=1))
    assert later == [[5, 6, at], [8, 8, at + 3600]]
    assert gaps_update(later, 20, [], now=now + timedelta(days=1, seconds=1)) == [[8, 8, at + 3600]]
    assert gaps_decode("[[5, 6]]") == [[5, 6, None]] and gaps_decode([[5, 6, at]]) == [[5, 6, at]]
    assert in_gaps(6, [[5, 6, at]]) and not in_gaps(7, [[5, 6, at]])


def test_a_report_in_an_expired_gap_counts_as_a_replay(queue, enroll, settings):
    settings.TELEMETRY_RAW_RETENTION_HOURS = 1
    agent = enroll()
    builder = _started(agent)
    builder.sequence += 1  # sequence 2 never sent (yet)
    queue.stop()  # Redis down: written in the request, the epoch records the gap [2, 2]
    assert agent.send(builder.report()).status_code == 200
    epoch = AgentEpoch.objects.get(node_id=agent.node_id)
    assert _ranges(epoch.gaps) == [[2, 2]]
    # Two hours later (past the retention) the gap's time is moved back instead of waiting: sequence 2 arrives.
    epoch.gaps = [[2, 2, epoch.gaps[0][2] - 2 * 3600]]
    epoch.save(update_fields=["gaps"])
    late = builder.report(sequence=2)
    builder.sequence -= 1
    response = agent.send(late)
    assert response.status_code == 200 and response.json()["duplicates"] == 1
    assert stored_reports(NodeSample, node_id=agent.node_id) == 2
    # The next update of the epoch's gaps (a report jumping over sequence 4) stores it without the expired one.
    builder.sequence += 1
    assert agent.send(builder.report()).json()["accepted"] == 1
    assert _ranges(AgentEpoch.objects.get(node_id=agent.node_id).gaps) == [[4, 4]]


def test_a_lagging_writer_makes_silence_late_never_false(queue):
    """A node's last report received 2 min ago (interval 30 s) is silent, unless the writer has not yet stored
    what arrived since: then the sweep judges as of the oldest report still queued, and flags it once the stream
    is drained (by then its next report would have cleared it, had it sent one)."""
    from fleet.telemetry.services.silence import mark_silent_nodes
    from tests.health.factories import healthy_node

    now = datetime.now(UTC)
    node = healthy_node(gpus=1, at=now - timedelta(seconds=120))
    NodeStatus.objects.filter(node=node).update(interval_s=30)
    client = stream.redis_client()
    client.xadd(stream.stream_name(), {"n": 999999, "t": (now - timedelta(seconds=150)).isoformat(),
                                       "r": b'[{"sequence": 1}]'})
    assert stream.written_through(now) == now - timedelta(seconds=150)

    assert mark_silent_nodes(now=now)["silent"] == 0  # judged as of 150 s ago: its report then was not due yet
    assert not NodeStatus.objects.get(node=node).silent

    client.delete(stream.stream_name())  # the writer caught up: nothing queued
    assert stream.written_through(now) == now
    assert mark_silent_nodes(now=now)["node_ids"] == [node.pk]
    assert NodeStatus.objects.get(node=node).silent


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the writer's epoch guard is PostgreSQL's statement")
def test_the_epoch_guard_looks_up_a_steady_batchs_rows_instead_of_scanning_every_nodes():
    """A writer batch of a few reports must not cost a pass over the whole fleet's epochs: at 10,000 nodes the
    planner hashed the full table for every batch (it takes the batch's JSON rows for 100), and the statement
    took more PostgreSQL time than any other of the soak."""
    provider = ProviderFactory()
    nodes = Node.objects.bulk_create([NodeFactory.build(provider=provider) for _ in range(3000)])
    AgentEpoch.objects.bulk_create([AgentEpoch(node=node, instance_id=f"i-{node.pk}", last_sequence=10)
                                    for node in nodes])
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {AgentEpoch._meta.db_table}")  # noqa: S608 (a model's table name)
    batch = [{"node_id": node.pk, "instance_id": f"i-{node.pk}", "first": 11, "last": 12} for node in nodes[:3]]
    plan = "\n".join(row[0] for row in rowsets.fetch_all(
        f"EXPLAIN {writer_module._sql_epochs_advance()}", orjson.dumps(batch).decode(), len(batch),
        datetime.now(UTC)))
    assert f"Seq Scan on {AgentEpoch._meta.db_table}" not in plan, plan
    assert "Hash Join" not in plan, plan
    # and the statement does what it says
    advanced = rowsets.fetch_all(writer_module._sql_epochs_advance(), orjson.dumps(batch).decode(), len(batch),
                                 datetime.now(UTC))
    assert sorted(advanced) == sorted((node.pk, f"i-{node.pk}") for node in nodes[:3])
    assert list(AgentEpoch.objects.filter(last_sequence=12).values_list("node_id", flat=True).order_by(
        "node_id")) == sorted(node.pk for node in nodes[:3])
