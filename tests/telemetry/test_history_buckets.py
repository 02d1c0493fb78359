"""Raw history at a fixed resolution (rows are buckets of reports) and its day partitions on PostgreSQL."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from fleet.inventory.models import GPU
from fleet.telemetry.models import GPUSample, GPUStatus, NodeSample, NodeStatus
from fleet.telemetry.services import partitions
from fleet.telemetry.services.history import create_history_partitions, prune_history
from tests.telemetry.reports import ReportBuilder, stored_reports

pytestmark = pytest.mark.django_db
postgresql_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="partitions are PostgreSQL's")


def _minute(minutes_ago: int) -> datetime:
    return datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=minutes_ago)


def _report(builder, at, *, cpu, util, memory, mask=0, ecc=0, **kw):
    report = builder.report(at=at, **kw)
    report["system"]["cpu_busy_pct"] = cpu
    for gpu in report["gpus"]:
        gpu.update(utilization_gpu_pct=util, memory_used_bytes=memory, clock_event_reasons_mask=mask)
        gpu["ecc"]["volatile_uncorrected"] = ecc
    return report


def test_reports_of_one_minute_fold_into_one_row_across_batches(enroll):
    """Four reports at 15 s make one row per node and per GPU; a later batch of the same minute (the upsert)
    and the general path (an inventory) fold in the same way as reports of one batch."""
    agent = enroll()
    builder = ReportBuilder(agent.node_id, gpus=2)
    minute = _minute(5)
    first = _report(builder, minute, cpu=10.0, util=20, memory=1000, mask=0x1, with_inventory=True)
    second = _report(builder, minute + timedelta(seconds=15), cpu=30.0, util=40, memory=2000, mask=0x4)
    assert agent.send(first, second).status_code == 200
    third = _report(builder, minute + timedelta(seconds=30), cpu=50.0, util=90, memory=4000, ecc=3)
    assert agent.send(third).status_code == 200  # the steady path on PostgreSQL: one guarded statement
    fourth = _report(builder, minute + timedelta(seconds=45), cpu=None, util=10, memory=3000, ecc=1)
    assert agent.send(fourth).status_code == 200
    nxt = _report(builder, minute + timedelta(seconds=60), cpu=99.0, util=99, memory=1)
    assert agent.send(nxt).status_code == 200

    rows = list(NodeSample.objects.filter(node_id=agent.node_id).order_by("at"))
    assert [(r.at, r.samples) for r in rows] == [(minute, 4), (minute + timedelta(minutes=1), 1)]
    node = rows[0]
    # The missing reading (cpu None) leaves min and max alone.
    assert (node.cpu_busy_pct_min, node.cpu_busy_pct_max) == (10.0, 50.0)
    assert node.cpu_busy_pct == pytest.approx(30.0, abs=8)  # a mean of 10, 30 and 50, weighted by reports
    assert node.gpu_util_avg_pct == pytest.approx(40.0)  # node's mean GPU utilisation: 20, 40, 90, 10

    gpu = GPUSample.objects.get(gpu__node_id=agent.node_id, gpu__index=0, at=minute)
    assert gpu.samples == 4
    assert (gpu.utilization_gpu_pct, gpu.utilization_gpu_pct_min, gpu.utilization_gpu_pct_max) == (40.0, 10, 90)
    assert (gpu.memory_used_bytes, gpu.memory_used_bytes_min, gpu.memory_used_bytes_max) == (2500, 1000, 4000)
    assert gpu.clock_event_reasons_mask == 0x5  # every reason seen in the minute
    assert gpu.ecc_volatile_uncorrected == 3  # the highest count
    # The latest status still moves with every report.
    assert GPUStatus.objects.get(gpu__node_id=agent.node_id, gpu__index=0).utilization_gpu_pct == 99
    assert NodeStatus.objects.get(node_id=agent.node_id).sequence == nxt["sequence"]
    assert stored_reports(GPUSample) == 2 * 5


def test_a_replayed_report_does_not_count_twice_in_its_bucket(enroll):
    agent = enroll()
    builder = ReportBuilder(agent.node_id, gpus=1)
    report = _report(builder, _minute(3), cpu=10.0, util=10, memory=1, with_inventory=True)
    assert agent.send(report).status_code == 200
    assert agent.send(report).json()["duplicates"] == 1
    assert NodeSample.objects.get(node_id=agent.node_id).samples == 1


def test_resolution_is_a_setting(enroll, settings):
    settings.TELEMETRY_HISTORY_RESOLUTION_S = 15  # one row per report at the default interval
    agent = enroll()
    builder = ReportBuilder(agent.node_id, gpus=1)
    start = _minute(4)
    reports = [_report(builder, start + timedelta(seconds=15 * i), cpu=float(i), util=i, memory=i,
                       with_inventory=i == 0) for i in range(4)]
    assert agent.send(*reports).status_code == 200
    assert list(NodeSample.objects.order_by("at").values_list("samples", "cpu_busy_pct")) == \
        [(1, 0.0), (1, 1.0), (1, 2.0), (1, 3.0)]


def test_resolution_must_divide_the_rollup_bucket(monkeypatch):
    import importlib

    from django.core.exceptions import ImproperlyConfigured

    import config.settings.base as base

    monkeypatch.setenv("TELEMETRY_HISTORY_RESOLUTION_S", "45")
    with pytest.raises(ImproperlyConfigured, match="divide 300"):
        importlib.reload(base)
    monkeypatch.delenv("TELEMETRY_HISTORY_RESOLUTION_S")
    importlib.reload(base)


def test_a_report_older_than_the_raw_window_updates_status_but_keeps_no_history(enroll, settings):
    agent = enroll()
    builder = ReportBuilder(agent.node_id, gpus=1)
    old = datetime.now(UTC) - timedelta(hours=settings.TELEMETRY_RAW_RETENTION_HOURS, minutes=5)
    assert agent.send(_report(builder, old, cpu=1.0, util=1, memory=1, with_inventory=True)).status_code == 200
    assert NodeStatus.objects.get(node_id=agent.node_id).sequence == 1
    assert stored_reports(NodeSample) == 0 and stored_reports(GPUSample) == 0


@postgresql_only
def test_partitions_are_made_ahead_and_on_demand_and_retention_drops_whole_days(enroll, settings):
    now = datetime.now(UTC)
    assert create_history_partitions(now=now)["created"] >= 0
    days = {(p["table"], p["day"]) for p in partitions.partitions() if p["attached"]}
    for offset in range(-1, settings.TELEMETRY_PARTITIONS_AHEAD_DAYS + 1):
        day = (now + timedelta(days=offset)).date()
        assert {("telemetry_nodesample", day), ("telemetry_gpusample", day)} <= days, day

    # A partition the task has not made yet is made by ingest (here: one dropped by hand behind its back).
    today = now.date()
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE {partitions.partition_name('telemetry_gpusample', today)}")
    agent = enroll()
    builder = ReportBuilder(agent.node_id, gpus=2)
    assert agent.send(_report(builder, _minute(2), cpu=1.0, util=1, memory=1, with_inventory=True)).status_code == 200
    assert agent.send(_report(builder, _minute(1), cpu=1.0, util=1, memory=1)).status_code == 200
    assert stored_reports(GPUSample) == 4

    # Retention: a day goes once it ended more than the raw window (+1 h) ago; today's rows stay.
    yesterday = today - timedelta(days=1)
    result = prune_history(now=datetime.combine(today, datetime.min.time(), UTC)
                           + timedelta(hours=settings.TELEMETRY_RAW_RETENTION_HOURS + 2))
    assert result["gpu_sample_partitions"] >= 1 and result["node_sample_partitions"] >= 1
    left = {(p["table"], p["day"]) for p in partitions.partitions()}
    assert ("telemetry_gpusample", yesterday) not in left and ("telemetry_gpusample", today) in left
    assert stored_reports(GPUSample) == 4


@postgresql_only
def test_an_interrupted_detach_is_finished_by_the_next_prune(transactional_db):
    """DETACH … CONCURRENTLY that was cancelled leaves the partition 'detach pending'; prune finalises it."""
    old = datetime.now(UTC) - timedelta(days=5)
    partitions.ensure_range(old, old)
    name = partitions.partition_name("telemetry_nodesample", old.date())
    with connection.cursor() as cursor:
        # A second session holding a snapshot makes the concurrent detach wait; cancel it with a timeout.
        cursor.execute("SET statement_timeout = '300ms'")
        import psycopg

        db = connection.settings_dict
        blocker = psycopg.connect(host=db["HOST"], port=db["PORT"] or 5432, user=db["USER"], dbname=db["NAME"],
                                  password=db["PASSWORD"] or None)
        try:
            blocker.execute("SELECT count(*) FROM telemetry_nodesample")  # holds a lock on the parent until rollback
            with pytest.raises(Exception, match="statement timeout|canceling"):
                cursor.execute(f"ALTER TABLE telemetry_nodesample DETACH PARTITION {name} CONCURRENTLY")
        finally:
            blocker.rollback()
            blocker.close()
        cursor.execute("RESET statement_timeout")
    assert [p["detach_pending"] for p in partitions.partitions() if p["name"] == name] == [True]
    dropped = partitions.drop_before(datetime.now(UTC) - timedelta(days=2))
    assert dropped["telemetry_nodesample"] >= 1
    assert name not in {p["name"] for p in partitions.partitions()}


def test_charts_read_minute_rows(enroll, viewer_api):
    agent = enroll()
    builder = ReportBuilder(agent.node_id, gpus=1)
    start = _minute(6)
    reports = [_report(builder, start + timedelta(seconds=15 * i), cpu=float(i), util=i, memory=i,
                       with_inventory=i == 0) for i in range(8)]
    assert agent.send(*reports).status_code == 200
    pk = GPU.objects.get(node_id=agent.node_id).pk
    # A start inside a minute still gets that minute's row as its first point.
    response = viewer_api.get(f"/api/v1/gpus/{pk}/series/", {"metric": "utilization_gpu_pct", "step": 60,
                                                             "start": (start + timedelta(seconds=20)).isoformat()})
    assert response.status_code == 200, response.content
    points = response.json()[0]["points"]
    assert [point[1] for point in points] == [1.5, 5.5]
    # With the lowest and highest reading of each point's buckets alongside the mean.
    assert [point[2:] for point in points] == [[0, 3], [4, 7]]


def test_subnormal_readings_folded_into_a_stored_bucket_are_no_server_error(enroll):
    """A hostile report's 5e-324 merged into a bucket that already holds a reading: PostgreSQL raises "underflow"
    where the merge divides such a float, so history stores it as 0 (the hypothesis fuzz found the 500)."""
    agent = enroll()
    builder = ReportBuilder(agent.node_id, gpus=1)
    minute = _minute(3)
    assert agent.send(_report(builder, minute, cpu=0.0, util=0, memory=0)).status_code == 200
    later = _report(builder, minute + timedelta(seconds=15), cpu=5e-324, util=0, memory=0)
    assert agent.send(later).status_code == 200
    later = _report(builder, minute + timedelta(seconds=30), cpu=2.2e-308, util=0, memory=0)
    assert agent.send(later).status_code == 200
    row = NodeSample.objects.get(node_id=agent.node_id, at=minute)
    assert row.samples == 3 and row.cpu_busy_pct == 0.0 and row.cpu_busy_pct_min == 0.0
