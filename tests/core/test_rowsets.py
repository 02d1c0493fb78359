from datetime import UTC, datetime

import pytest
from django.db import connection

from fleet.core import rowsets
from fleet.telemetry.models import AgentEpoch, GPUStatus, NodeSample
from tests.factories import GPUFactory, NodeFactory

pytestmark = pytest.mark.django_db
AT = datetime(2026, 12, 3, 7, 30, 15, 123456, tzinfo=UTC)


def _status(gpu, **values):
    row = {"gpu_id": gpu.pk, "node_id": gpu.node_id, "collected_at": AT, "lost": False, "utilization_gpu_pct": 50.0,
           "temperature_c": 61.5, "sm_clock_mhz": 1980, "clock_event_reasons": ["gpu_idle"], "process_count": 1,
           "process_memory_bytes": 2**40, "processes": [{"pid": 7, "name": "python"}], "nvlink": []}
    row.update(values)
    return row


def test_insert_rows_then_upsert_keeps_types_json_and_time():
    gpus = [GPUFactory(), GPUFactory()]
    rowsets.execute([rowsets.insert_rows(GPUStatus, [_status(g) for g in gpus], conflict="gpu_id",
                                         update=("utilization_gpu_pct", "processes"))])
    stored = GPUStatus.objects.get(gpu=gpus[0])
    assert stored.collected_at == AT
    assert stored.processes == [{"pid": 7, "name": "python"}]
    assert stored.clock_event_reasons == ["gpu_idle"]
    assert stored.process_memory_bytes == 2**40
    assert stored.lost is False and stored.sm_clock_mhz == 1980

    later = _status(gpus[0], utilization_gpu_pct=99.0, processes=[], temperature_c=90.0, sm_clock_mhz=8.0)
    rowsets.execute([rowsets.insert_rows(GPUStatus, [later], conflict="gpu_id",
                                         update=("utilization_gpu_pct", "processes", "sm_clock_mhz"))])
    stored.refresh_from_db()
    assert (stored.utilization_gpu_pct, stored.processes, stored.sm_clock_mhz) == (99.0, [], 8)
    assert stored.temperature_c == 61.5  # not in the update list
    assert GPUStatus.objects.count() == 2


def test_several_statements_run_in_order(history_days):
    node = NodeFactory()
    history_days(AT)
    samples = [{"node_id": node.pk, "at": AT.replace(second=s), "samples": 1, "cpu_busy_pct": pct}
               for s, pct in ((1, 1.0), (2, 2.0), (3, 3.0))]
    rowsets.execute([rowsets.insert_rows(NodeSample, samples[:2]), rowsets.insert_rows(NodeSample, samples[2:]),
                     rowsets.statement("UPDATE telemetry_nodesample SET load1 = %s WHERE node_id = %s", 0.5, node.pk)])
    assert sorted(NodeSample.objects.values_list("cpu_busy_pct", "load1")) == [(1.0, 0.5), (2.0, 0.5), (3.0, 0.5)]


def test_unknown_column_is_refused():
    with pytest.raises(ValueError, match="no column"):
        rowsets.insert_rows(NodeSample, [{"node_id": 1, "at": AT, "cpu_pct": 1.0}])


@pytest.mark.skipif(connection.vendor != "postgresql", reason="data-modifying WITH is PostgreSQL's")
def test_guarded_writes_happen_only_when_the_guard_matches(history_days):
    node = NodeFactory()
    history_days(AT)
    epoch = AgentEpoch.objects.create(node=node, instance_id="i-1", last_sequence=5)
    guard_sql = "UPDATE telemetry_agentepoch SET last_sequence = %s WHERE id = %s AND last_sequence < %s"

    def attempt(sequence):
        row = {"node_id": node.pk, "at": AT.replace(second=sequence), "samples": 1, "cpu_busy_pct": float(sequence)}
        return rowsets.execute_guarded(rowsets.statement(guard_sql, sequence, epoch.pk, sequence),
                                       [rowsets.insert_rows(NodeSample, [row], guarded=True)])

    assert attempt(5) is False
    assert NodeSample.objects.count() == 0
    assert attempt(6) is True
    assert attempt(6) is False
    assert list(NodeSample.objects.values_list("cpu_busy_pct", flat=True)) == [6.0]
    epoch.refresh_from_db()
    assert epoch.last_sequence == 6


def test_upsert_on_a_composite_key_merges_with_expressions(history_days):
    """`merge` sets each column from an expression over the stored row (t) and the new one (EXCLUDED)."""
    node = NodeFactory()
    history_days(AT)
    merge = (("samples", "t.samples + EXCLUDED.samples"), ("load1", "t.load1 + EXCLUDED.load1"))

    def upsert(load):
        rowsets.execute([rowsets.insert_rows(NodeSample, [{"node_id": node.pk, "at": AT, "samples": 1, "load1": load}],
                                             conflict=("node_id", "at"), merge=merge)])

    upsert(1.5)
    upsert(2.0)
    assert list(NodeSample.objects.values_list("samples", "load1")) == [(2, 3.5)]
