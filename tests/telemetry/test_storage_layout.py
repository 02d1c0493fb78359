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
