"""History at a fixed resolution, partitioned by day on PostgreSQL.

The raw sample tables change from one row per report (an `id` primary key) to one row per owner per history
bucket with (owner, bucket start) as the primary key, holding the mean, min and max of the bucket's reports.
Django cannot change a table's primary key to a composite one in place, so the old tables are renamed, new ones
created and the old rows inside the raw retention window folded into buckets, then the old tables dropped.

On PostgreSQL the new tables are declaratively partitioned by range on `at`, one partition per UTC day
(`fleet.telemetry.services.partitions`), with a BRIN index on `at` for the rollup's time-range scans; on SQLite
they are plain tables with a b-tree index on `at`.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def _gauges(names, integer=False):
    field = models.BigIntegerField if integer else models.FloatField
    return [(f"{name}{suffix}", field(null=True)) for name in names for suffix in ("", "_min", "_max")]


NODE_GAUGES = ["cpu_busy_pct", "cpu_steal_pct", "cpu_iowait_pct", "mem_used_pct", "load1", "tcp_retrans_pct",
               "gpu_util_avg_pct"]


def _common(owner, to):
    return [
        ("pk", models.CompositePrimaryKey(owner, "at", blank=True, editable=False, primary_key=True,
                                          serialize=False)),
        (owner, models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                  related_name="+", to=to)),
        ("at", models.DateTimeField(help_text="Start of the history bucket")),
        ("samples", models.PositiveIntegerField(default=1, help_text="Reports folded into this row")),
    ]


NODE_FIELDS = _common("node", "inventory.node") + _gauges(NODE_GAUGES)
GPU_FIELDS = _common("gpu", "inventory.gpu") + [
    *_gauges(["utilization_gpu_pct"]), *_gauges(["memory_used_bytes"], integer=True),
    *_gauges(["temperature_c", "power_draw_w"]), *_gauges(["sm_clock_mhz"], integer=True),
    ("ecc_volatile_uncorrected", models.BigIntegerField(help_text="Highest count in the bucket", null=True)),
    ("clock_event_reasons_mask", models.BigIntegerField(help_text="Every reason seen in the bucket (OR)",
                                                        null=True)),
]

# (new model, legacy model, owner column, gauge columns averaged, columns reduced with max)
_COPIES = (
    ("nodesample", "legacynodesample", "node_id", NODE_GAUGES, []),
    ("gpusample", "legacygpusample", "gpu_id",
     ["utilization_gpu_pct", "memory_used_bytes", "temperature_c", "power_draw_w", "sm_clock_mhz"],
     ["ecc_volatile_uncorrected", "clock_event_reasons_mask"]),
)


def create_tables(apps, schema_editor):
    from fleet.telemetry.services import partitions

    for name in ("NodeSample", "GPUSample"):
        model = apps.get_model("telemetry", name)
        if schema_editor.connection.vendor == "postgresql":
            sql, params = schema_editor.table_sql(model)
            schema_editor.execute(f"{sql} PARTITION BY RANGE ({schema_editor.quote_name('at')})", params or None)
            schema_editor.execute(f"CREATE INDEX {model._meta.db_table}_at_brin ON {model._meta.db_table} "
                                  "USING brin (at)")
        else:
            schema_editor.create_model(model)
            schema_editor.execute(f"CREATE INDEX {model._meta.db_table}_at ON {model._meta.db_table} (at)")
    if schema_editor.connection.vendor == "postgresql":
        partitions.forget()


def drop_tables(apps, schema_editor):
    for name in ("NodeSample", "GPUSample"):
        schema_editor.execute(f"DROP TABLE {apps.get_model('telemetry', name)._meta.db_table}")


def copy_history(apps, schema_editor):
    """Fold the old per-report rows inside the raw window into buckets (older ones would be pruned anyway)."""
    from datetime import timedelta

    from django.utils import timezone

    from fleet.telemetry.services import partitions

    connection = schema_editor.connection
    resolution = settings.TELEMETRY_HISTORY_RESOLUTION_S
    since = timezone.now() - timedelta(hours=settings.TELEMETRY_RAW_RETENTION_HOURS)
    for new, legacy, owner, gauges, maxed in _COPIES:
        new_table, legacy_table = f"telemetry_{new}", f"telemetry_{legacy}"
        if connection.vendor == "postgresql":
            bucket = f"to_timestamp(floor(extract(epoch from at) / {resolution}) * {resolution})"
            with connection.cursor() as cursor:
                cursor.execute(f"SELECT min(at), max(at) FROM {legacy_table} WHERE at >= %s", [since])
                first, last = cursor.fetchone()
            if first is None:
                continue
            partitions.ensure_range(first, last, using=connection)
            since_param = since
        else:
            bucket = (f"datetime((CAST(strftime('%%s', at) AS INTEGER) / {resolution}) * {resolution}, "
                      "'unixepoch')")
            since_param = connection.ops.adapt_datetimefield_value(since)
        columns = [owner, "at", "samples"]
        picks = [owner, bucket, "count(*)"]
        for gauge in gauges:
            columns += [gauge, f"{gauge}_min", f"{gauge}_max"]
            mean = f"avg({gauge})"
            if gauge in ("memory_used_bytes", "sm_clock_mhz"):
                mean = f"CAST(round(avg({gauge})) AS BIGINT)" if connection.vendor == "postgresql" \
                    else f"CAST(round(avg({gauge})) AS INTEGER)"
            picks += [mean, f"min({gauge})", f"max({gauge})"]
        for column in maxed:
            columns.append(column)
            picks.append(f"max({column})")
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {new_table} ({', '.join(columns)}) SELECT {', '.join(picks)} "
                           f"FROM {legacy_table} WHERE at >= %s GROUP BY {owner}, {bucket}", [since_param])


class Migration(migrations.Migration):

    dependencies = [
        ("inventory", "0002_gpu_and_stack_fit_report_schema"),
        ("telemetry", "0007_event_kind_diag"),
    ]

    operations = [
        migrations.RenameModel("NodeSample", "LegacyNodeSample"),
        migrations.RenameModel("GPUSample", "LegacyGPUSample"),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(name="NodeSample", fields=NODE_FIELDS),
                migrations.CreateModel(name="GPUSample", fields=GPU_FIELDS),
            ],
            database_operations=[],
        ),
        migrations.RunPython(create_tables, drop_tables),
        migrations.RunPython(copy_history, migrations.RunPython.noop),
        migrations.DeleteModel("LegacyNodeSample"),
        migrations.DeleteModel("LegacyGPUSample"),
    ]
