"""The fabric digest's content key, a column PostgreSQL computes from the digest (SHA-256 of its text).

Nodes of one hardware build report the same digest; the health cycle reads each distinct digest once per cycle
instead of 10,000 copies of it (docs/performance.md). Adding a stored generated column rewrites the table once.
On SQLite the column is NULL (no hash function there) and every row is read as distinct.
"""

from django.db import migrations, models

import fleet.core.db

# IMMUTABLE (a generated column may only call immutable functions; convert_to is STABLE because the database's
# encoding could differ, and within one database it does not).
CONTENT_KEY_FUNCTION = """
CREATE OR REPLACE FUNCTION fleet_content_key(value text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT encode(sha256(convert_to(value, 'UTF8')), 'hex') $$
"""


def create_function(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CONTENT_KEY_FUNCTION)


def drop_function(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP FUNCTION IF EXISTS fleet_content_key(text)")


class Migration(migrations.Migration):

    dependencies = [
        ('telemetry', '0011_rollups_partitioned'),
    ]

    operations = [
        migrations.RunPython(create_function, drop_function),  # unapplied last, after the column is gone
        migrations.AddField(
            model_name='nodestatus',
            name='fabric_key',
            field=models.GeneratedField(db_persist=True, expression=fleet.core.db.ContentKey('fabric'), null=True,
                                        output_field=models.CharField(max_length=64)),
        ),
    ]
