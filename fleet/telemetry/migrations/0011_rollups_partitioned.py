"""The 5-minute rollups laid out like the raw history, partitioned by day on PostgreSQL.

The rollup tables change from an `id` primary key with a unique (owner, bucket) constraint to (owner, bucket) as
the primary key, without foreign-key constraints. On PostgreSQL they are partitioned by range on `bucket`, one
partition per UTC day (`fleet.telemetry.services.partitions`), plus a default partition for a row whose day has
none, with a BRIN index on `bucket`; retention drops whole day partitions instead of deleting rows. SQLite keeps
plain tables with a b-tree index on `bucket`. Django cannot change a primary key to a composite one in place, so
the old tables are renamed, the new ones created, every row copied, and the old tables dropped.
"""

import django.db.models.deletion
from django.db import migrations, models

NODE_GAUGES = ["cpu_busy_pct", "cpu_steal_pct", "cpu_iowait_pct", "mem_used_pct", "load1", "tcp_retrans_pct",
               "gpu_util_avg_pct"]


def _common(owner, to):
    return [
        ("pk", models.CompositePrimaryKey(owner, "bucket", blank=True, editable=False, primary_key=True,
                                          serialize=False)),
        (owner, models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                  related_name="+", to=to)),
        ("bucket", models.DateTimeField()),
        ("samples", models.PositiveIntegerField()),
    ]


NODE_FIELDS = _common("node", "inventory.node") + [(name, models.FloatField(null=True)) for name in NODE_GAUGES]
GPU_FIELDS = _common("gpu", "inventory.gpu") + [
    ("utilization_gpu_pct", models.FloatField(null=True)),
    ("utilization_gpu_pct_max", models.FloatField(null=True)),
    ("memory_used_bytes", models.BigIntegerField(null=True)),
    ("temperature_c", models.FloatField(null=True)),
    ("temperature_c_max", models.FloatField(null=True)),
    ("power_draw_w", models.FloatField(null=True)),
    ("sm_clock_mhz", models.IntegerField(null=True)),
    ("ecc_volatile_uncorrected", models.BigIntegerField(null=True)),
]
_MODELS = (("NodeSampleRollup", "LegacyNodeSampleRollup", NODE_FIELDS),
           ("GPUSampleRollup", "LegacyGPUSampleRollup", GPU_FIELDS))


def create_tables(apps, schema_editor):
    from fleet.telemetry.services import partitions

    for name, _, _ in _MODELS:
        model = apps.get_model("telemetry", name)
        table = model._meta.db_table
        if schema_editor.connection.vendor == "postgresql":
            sql, params = schema_editor.table_sql(model)
            schema_editor.execute(f"{sql} PARTITION BY RANGE (bucket)", params or None)
            schema_editor.execute(f"CREATE TABLE {partitions.default_name(table)} PARTITION OF {table} DEFAULT")
            schema_editor.execute(f"CREATE INDEX {table}_bucket_brin ON {table} USING brin (bucket)")
        else:
            schema_editor.create_model(model)
            schema_editor.execute(f"CREATE INDEX {table}_bucket ON {table} (bucket)")
    if schema_editor.connection.vendor == "postgresql":
        partitions.forget()


def drop_tables(apps, schema_editor):
    for name, _, _ in _MODELS:
        schema_editor.execute(f"DROP TABLE {apps.get_model('telemetry', name)._meta.db_table}")


def copy_rollups(apps, schema_editor):
    from fleet.telemetry.services import partitions

    connection = schema_editor.connection
    for name, legacy, fields in _MODELS:
        table = apps.get_model("telemetry", name)._meta.db_table
        legacy_table = apps.get_model("telemetry", legacy)._meta.db_table
        columns = ", ".join(f"{field}_id" if field in ("node", "gpu") else field
                            for field, _ in fields if field != "pk")
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(f"SELECT min(bucket), max(bucket) FROM {legacy_table}")
                first, last = cursor.fetchone()
            if first is None:
                continue
            partitions.ensure_range(first, last, tables=(table,), using=connection)
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM {legacy_table}")


class Migration(migrations.Migration):

    dependencies = [
        ("inventory", "0002_gpu_and_stack_fit_report_schema"),
        ("telemetry", "0010_status_tables_room_for_hot_updates"),
    ]

    operations = [
        migrations.RenameModel("NodeSampleRollup", "LegacyNodeSampleRollup"),
        migrations.RenameModel("GPUSampleRollup", "LegacyGPUSampleRollup"),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(name="NodeSampleRollup", fields=NODE_FIELDS),
                migrations.CreateModel(name="GPUSampleRollup", fields=GPU_FIELDS),
            ],
            database_operations=[],
        ),
        migrations.RunPython(create_tables, drop_tables),
        migrations.RunPython(copy_rollups, migrations.RunPython.noop),
        migrations.DeleteModel("LegacyNodeSampleRollup"),
        migrations.DeleteModel("LegacyGPUSampleRollup"),
    ]
