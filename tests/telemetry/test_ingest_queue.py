"""The ingest queue against a real redis-server (append-only file on, as in production): steady batches are
acknowledged once in the stream and written by the writer exactly once; everything else, and everything while
the stream is unavailable, is written in the request."""

import uuid

import pytest
from django.test import override_settings
from prometheus_client import REGISTRY

from fleet.core import rowsets
from fleet.telemetry.models import AgentEpoch, Event, GPUSample, NodeSample, NodeStatus
from fleet.telemetry.services import stream
from fleet.telemetry.services.writer import Writer
from tests.processes import RedisServer
from tests.telemetry.reports import ReportBuilder, gpu_entry

pytestmark = pytest.mark.django_db

XID79 = ("[ 1234.567890] NVRM: Xid (PCI:0000:01:00): 79, pid=<unknown>, name=<unknown>, "
         "GPU has fallen off the bus.")


def _reset_clients():
    stream.redis_client.cache_clear()
    stream._enqueue_script.cache_clear()
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


def _started(agent) -> ReportBuilder:
    builder = ReportBuilder(agent.node_id)
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
    assert NodeSample.objects.filter(node_id=agent.node_id).count() == 3
    assert GPUSample.objects.filter(gpu__node_id=agent.node_id).count() == 24
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
    assert NodeSample.objects.filter(node_id=agent.node_id).count() == 2
    assert AgentEpoch.objects.get(node_id=agent.node_id).last_sequence == 2
    assert stream.stream_depth() == (0, 0)

    # Stored but never acknowledged (a writer killed between commit and XACK): found stored, only acknowledged.
    third = builder.report()
    agent.send(third)
    half = _writer(consumer="half")
    entries = [stream.entry_decode(i, f) for i, f in half.read()]
    from fleet.telemetry.services.writer import entries_store

    assert entries_store(entries).stored == 1
    duplicates_before = REGISTRY.get_sample_value("fleet_writer_reports_total", {"outcome": "duplicate"}) or 0
    assert _drain(_writer(consumer="successor", claim_idle_s=0)) == 1
    assert REGISTRY.get_sample_value("fleet_writer_reports_total", {"outcome": "duplicate"}) == duplicates_before + 1
    assert NodeSample.objects.filter(node_id=agent.node_id).count() == 3
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
    # Sequence 2 was written first, in the request, so it was not lost to the guard as an "old" report.
    assert sorted(NodeSample.objects.filter(node_id=agent.node_id).values_list("at", flat=True)) == sorted(
        NodeSample.objects.filter(node_id=agent.node_id).values_list("at", flat=True).distinct())
    assert NodeSample.objects.filter(node_id=agent.node_id).count() == 3
    assert NodeStatus.objects.get(node_id=agent.node_id).sequence == 3
    assert _drain() == 1  # the writer finds it stored
    assert NodeSample.objects.filter(node_id=agent.node_id).count() == 3
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
    assert NodeSample.objects.filter(node_id=agent.node_id).count() == 3


def test_reports_overtaken_while_redis_was_down_keep_their_history(queue, enroll):
    agent = enroll()
    builder = _started(agent)
    assert agent.send(builder.report()).json()["queued"] is True  # sequence 2 in the stream (on disk: AOF)
    queue.stop()  # killed: no writer got to sequence 2
    assert "queued" not in agent.send(builder.report()).json()  # sequence 3 written in the request
    assert NodeStatus.objects.get(node_id=agent.node_id).sequence == 3
    queue.start()  # the same port and directory: the stream comes back from the append-only file
    assert _stream_len() == 1
    assert _drain() == 1
    assert NodeSample.objects.filter(node_id=agent.node_id).count() == 3  # sequence 2's history is there
    assert GPUSample.objects.filter(gpu__node_id=agent.node_id).count() == 24
    assert NodeStatus.objects.get(node_id=agent.node_id).sequence == 3  # the latest status stays the newest
    assert AgentEpoch.objects.get(node_id=agent.node_id).last_sequence == 3
    stream.stream_health.reset()  # as after failopen.RETRY_AFTER_FAILURE_S: the stream is asked again
    assert agent.send(builder.report(), builder.report()).json()["queued"] is True
    assert _drain() == 1
    assert NodeSample.objects.filter(node_id=agent.node_id).count() == 5


def test_a_full_stream_sends_batches_down_the_synchronous_path(queue, enroll):
    agent = enroll()
    builder = _started(agent)
    with override_settings(INGEST_QUEUE_MAX_ENTRIES=1):
        assert agent.send(builder.report()).json().get("queued") is True
        assert "queued" not in agent.send(builder.report()).json()
    assert NodeStatus.objects.get(node_id=agent.node_id).sequence == 3
    assert _drain() == 1
    assert NodeSample.objects.filter(node_id=agent.node_id).count() == 3


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
    assert NodeSample.objects.count() == 6 * 3 + 1 + 1
    assert GPUSample.objects.filter(gpu__uuid__endswith="hotadded0000").count() == 1
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
