"""PostgreSQL: leave half of every page of the latest-status tables (and the agent epochs) free.

Each report updates its node's status row, its GPUs' rows and its epoch; no indexed column changes, so the update
can be HOT (no new index entries) only if the new row version fits on the same page. Packed full at insert, the
pages could not hold it: during a 3,000-node soak only 11 % of GPU status updates and 21 % of node status updates
were HOT, so every report wrote index entries and left dead ones for vacuum and for the health cycle's scans
(docs/performance.md). These tables hold one row per node or GPU, so the space costs little. Existing pages take
the setting as they are rewritten (VACUUM FULL or pg_repack for an immediate effect); new pages at once.
"""

from django.db import migrations

TABLES = ("telemetry_nodestatus", "telemetry_gpustatus", "telemetry_agentepoch")
FILLFACTOR = 50


def room(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for table in TABLES:
            schema_editor.execute(f"ALTER TABLE {table} SET (fillfactor = {FILLFACTOR})")


def packed(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for table in TABLES:
            schema_editor.execute(f"ALTER TABLE {table} RESET (fillfactor)")


class Migration(migrations.Migration):

    dependencies = [
        ('telemetry', '0009_agentepoch_sequence_gaps'),
    ]

    operations = [
        migrations.RunPython(room, packed),
    ]
