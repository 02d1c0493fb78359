"""How the telemetry tables are laid out for a fleet's write rate, and the periodic work that must not pile up."""

import pytest
from django.conf import settings
from django.db import connection

pytestmark = pytest.mark.django_db


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL storage parameters")
def test_status_rows_leave_room_for_hot_updates():
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname, reloptions FROM pg_class WHERE relname = ANY(%s)",
                       [["telemetry_nodestatus", "telemetry_gpustatus", "telemetry_agentepoch"]])
        options = dict(cursor.fetchall())
    assert options == {table: ["fillfactor=50"] for table in
                       ("telemetry_nodestatus", "telemetry_gpustatus", "telemetry_agentepoch")}


def test_the_fleet_cycle_and_the_silence_sweep_expire_instead_of_stacking():
    for name in ("health-evaluate-fleet", "telemetry-mark-silent-nodes"):
        entry = settings.CELERY_BEAT_SCHEDULE[name]
        assert 0 < entry["options"]["expires"] <= entry["schedule"]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL partitions")
def test_rollups_live_in_day_partitions_that_retention_drops_whole(enroll):
    from datetime import UTC, datetime, timedelta

    from fleet.inventory.models import GPU
    from fleet.telemetry.models import GPUSampleRollup, NodeSampleRollup
    from fleet.telemetry.services import partitions
    from fleet.telemetry.services.history import create_history_partitions, prune_history, rollup_history
    from tests.telemetry.reports import ReportBuilder

    now = datetime.now(UTC).replace(second=0, microsecond=0)
    create_history_partitions(now=now)
    days = {(p["table"], p["day"]) for p in partitions.partitions() if p["attached"]}
    for offset in (-settings.TELEMETRY_ROLLUP_RETENTION_DAYS, 0, settings.TELEMETRY_PARTITIONS_AHEAD_DAYS):
        day = (now + timedelta(days=offset)).date()
        assert {(t, day) for t in partitions.ROLLUP_TABLES} <= days, day

    # The rollup task writes into the day's partition.
    agent = enroll()
    builder = ReportBuilder(agent.node_id, gpus=1)
    start = now - timedelta(minutes=now.minute % 5 + 10)
    assert agent.send(*[builder.report(at=start + timedelta(seconds=30 * i), with_inventory=i == 0)
                        for i in range(10)]).status_code == 200
    assert rollup_history(now=now)["nodes"] >= 1
    today = partitions.partition_name("telemetry_nodesamplerollup", start.date())
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {today}")  # noqa: S608 (a partition's name)
        assert cursor.fetchone()[0] == NodeSampleRollup.objects.count() >= 1

    # A row of a day without a partition lands in the default one; making the day's partition moves it there.
    old = now - timedelta(days=settings.TELEMETRY_ROLLUP_RETENTION_DAYS + 20)
    gpu = GPU.objects.get(node_id=agent.node_id)
    GPUSampleRollup.objects.create(gpu=gpu, bucket=old, samples=3, utilization_gpu_pct=50)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM telemetry_gpusamplerollup_default")
        assert cursor.fetchone()[0] == 1
        assert partitions.ensure_range(old, old, tables=partitions.ROLLUP_TABLES) == 2
        cursor.execute("SELECT count(*) FROM telemetry_gpusamplerollup_default")
        assert cursor.fetchone()[0] == 0
    assert GPUSampleRollup.objects.filter(bucket=old).count() == 1

    # Retention drops that whole day and deletes what the default partition holds past the window.
    NodeSampleRollup.objects.create(node_id=agent.node_id, bucket=old - timedelta(days=400), samples=1)
    result = prune_history(now=now)
    assert result["gpu_rollup_partitions"] >= 1 and result["node_rollups"] == 1
    assert not GPUSampleRollup.objects.filter(bucket=old).exists()
    assert partitions.partition_name("telemetry_gpusamplerollup", old.date()) not in {
        p["name"] for p in partitions.partitions()}
    assert NodeSampleRollup.objects.filter(bucket__gte=start).count() >= 1  # inside the window: kept
