"""History: raw samples folded into fixed-resolution buckets, 5-minute rollups, and retention.

Raw history is kept at TELEMETRY_HISTORY_RESOLUTION_S (default 60 s): one row per node and per GPU per bucket,
whatever the report interval, holding the number of reports folded in (`samples`), the mean, min and max of each
gauge, the highest volatile uncorrected ECC count and the OR of the clock-event reason masks. `history_writes()`
is the one place history is written: ingest hands it the per-report rows, it folds those of one batch that share
a bucket in Python, and upserts the result (INSERT … ON CONFLICT (owner, at) DO UPDATE) so that a later report
of the same bucket updates the running aggregate. A gauge's mean is weighted by `samples`, so a reading missing
from some of a bucket's reports weighs the others slightly differently (docs/telemetry.md).

On PostgreSQL the raw tables are partitioned by day (`partitions.py`) and retention drops whole partitions;
SQLite deletes rows.
"""

import math
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from functools import cache, reduce

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max

from fleet.core import rowsets

from ..models import Event, GPUSample, GPUSampleRollup, NodeSample, NodeSampleRollup
from . import partitions

BUCKET_S = 300
NODE_GAUGES = ("cpu_busy_pct", "cpu_steal_pct", "cpu_iowait_pct", "mem_used_pct", "load1", "tcp_retrans_pct",
               "gpu_util_avg_pct")
GPU_GAUGES = ("utilization_gpu_pct", "memory_used_bytes", "temperature_c", "power_draw_w", "sm_clock_mhz")
_INTEGER_COLUMNS = {"memory_used_bytes", "sm_clock_mhz"}
_GPU_MAXED = ("ecc_volatile_uncorrected",)
_GPU_ORED = ("clock_event_reasons_mask",)
# Rows older than the raw window are not written (they would be pruned at once); on PostgreSQL their partition
# may already be gone. Retention keeps this much more than the window, so no process drops a partition another
# process is still writing into.
PRUNE_MARGIN = timedelta(hours=1)


def _bucket(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0, minute=at.minute - at.minute % 5)


def history_bucket(at: datetime) -> datetime:
    """Start of the raw history bucket holding `at`."""
    resolution = settings.TELEMETRY_HISTORY_RESOLUTION_S
    stamp = at.timestamp()
    return datetime.fromtimestamp(stamp - stamp % resolution, tz=at.tzinfo or UTC)


def finite_mean(values: list[float]) -> float:
    """The mean of finite values, which is finite even where their sum overflows (two readings of 1e308)."""
    total = sum(values)
    return total / len(values) if math.isfinite(total) else sum(v / len(values) for v in values)


# --- writing raw history ---------------------------------------------------------------------------------------

def history_writes(node_rows: list[dict], gpu_rows: list[dict], *, now: datetime,
                   guarded: bool = False) -> list[rowsets.Statement]:
    """The upserts that fold per-report rows into history buckets.

    `node_rows` have node_id, at and the NODE_GAUGES; `gpu_rows` gpu_id, at, the GPU_GAUGES, ecc_volatile_uncorrected
    and clock_event_reasons_mask (one row per report, `at` its collection time). Rows of any number of nodes and
    reports may be passed together. On PostgreSQL the partitions of their days are made sure of first.
    """
    cutoff = now - timedelta(hours=settings.TELEMETRY_RAW_RETENTION_HOURS)
    nodes = _fold([r for r in node_rows if r["at"] >= cutoff], "node_id", NODE_GAUGES, (), ())
    gpus = _fold([r for r in gpu_rows if r["at"] >= cutoff], "gpu_id", GPU_GAUGES, _GPU_MAXED, _GPU_ORED)
    if partitions.supported():
        # Every report has a node row, and its GPU rows share its time.
        partitions.ensure_days({at.astimezone(UTC).date() for at in {row["at"] for row in nodes}})
    writes = []
    if nodes:
        writes.append(rowsets.insert_rows(NodeSample, nodes, conflict=("node_id", "at"),
                                          merge=_merge_sql(connection.vendor, NODE_GAUGES, (), ()), guarded=guarded))
    if gpus:
        writes.append(rowsets.insert_rows(GPUSample, gpus, conflict=("gpu_id", "at"),
                                          merge=_merge_sql(connection.vendor, GPU_GAUGES, _GPU_MAXED, _GPU_ORED),
                                          guarded=guarded))
    return writes


# A gauge smaller than this in magnitude is stored as 0: no reading means anything at 1e-9 (percent, watts, °C,
# bytes/s), and PostgreSQL raises "value out of range: underflow" where the bucket merge divides a subnormal
# float (a hostile report may send 5e-324), which would turn a well-formed report into a 500.
_TINY = 1e-9


def _tidy(value):
    return 0.0 if isinstance(value, float) and -_TINY < value < _TINY else value


def _fold(rows: list[dict], key: str, gauges, maxed, ored) -> list[dict]:
    """One row per (owner, bucket): the reports' count, and each gauge's mean, min and max over its readings."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    buckets: dict[datetime, datetime] = {}  # a report's node and GPU rows share one time
    for row in rows:
        at = row["at"]
        bucket = buckets.get(at)
        if bucket is None:
            bucket = buckets[at] = history_bucket(at)
        groups[(row[key], bucket)].append(row)
    folded = []
    for (owner, at), members in groups.items():
        if len(members) == 1:  # the usual case: one report per bucket in a batch
            member = members[0]
            out = {key: owner, "at": at, "samples": 1}
            for gauge in gauges:
                out[gauge] = out[f"{gauge}_min"] = out[f"{gauge}_max"] = _tidy(member.get(gauge))
            for column in (*maxed, *ored):
                out[column] = member.get(column)
            folded.append(out)
            continue
        out = {key: owner, "at": at, "samples": len(members)}
        for gauge in gauges:
            values = [_tidy(m[gauge]) for m in members if m.get(gauge) is not None]
            if gauge in _INTEGER_COLUMNS:
                out[gauge] = (sum(values) + len(values) // 2) // len(values) if values else None
            else:
                out[gauge] = _tidy(finite_mean(values)) if values else None
            out[f"{gauge}_min"] = min(values) if values else None
            out[f"{gauge}_max"] = max(values) if values else None
        for column in maxed:
            values = [m[column] for m in members if m.get(column) is not None]
            out[column] = max(values) if values else None
        for column in ored:
            values = [m[column] for m in members if m.get(column) is not None]
            out[column] = reduce(lambda a, b: a | b, values) if values else None
        folded.append(out)
    return folded


@cache
def _merge_sql(vendor: str, gauges: tuple, maxed: tuple, ored: tuple) -> tuple[tuple[str, str], ...]:
    """SET clauses folding a new bucket row (EXCLUDED) into the stored one (t)."""
    pg = vendor == "postgresql"

    def either(column, combined):
        return (f"CASE WHEN EXCLUDED.{column} IS NULL THEN t.{column} WHEN t.{column} IS NULL "
                f"THEN EXCLUDED.{column} ELSE {combined} END")

    def least(column):
        return f"LEAST(t.{column}, EXCLUDED.{column})" if pg else either(column, f"min(t.{column}, EXCLUDED.{column})")

    def greatest(column):
        return f"GREATEST(t.{column}, EXCLUDED.{column})" if pg \
            else either(column, f"max(t.{column}, EXCLUDED.{column})")

    total = "(t.samples + EXCLUDED.samples)"
    sets = []
    for gauge in gauges:
        if gauge in _INTEGER_COLUMNS:
            mean = (f"((t.{gauge}::numeric * t.samples + EXCLUDED.{gauge}::numeric * EXCLUDED.samples) / {total})"
                    "::bigint") if pg else \
                (f"CAST(round((t.{gauge} * 1.0 * t.samples + EXCLUDED.{gauge} * 1.0 * EXCLUDED.samples) / {total})"
                 " AS INTEGER)")
        else:
            # Incremental, so two readings near the float limit do not overflow their sum.
            mean = f"t.{gauge} + (EXCLUDED.{gauge} - t.{gauge}) * EXCLUDED.samples / {total}"
            if not pg:
                mean = f"t.{gauge} + (EXCLUDED.{gauge} - t.{gauge}) * 1.0 * EXCLUDED.samples / {total}"
        sets += [(gauge, either(gauge, mean)), (f"{gauge}_min", least(f"{gauge}_min")),
                 (f"{gauge}_max", greatest(f"{gauge}_max"))]
    sets += [(column, greatest(column)) for column in maxed]
    sets += [(column, either(column, f"t.{column} | EXCLUDED.{column}")) for column in ored]
    sets.append(("samples", "t.samples + EXCLUDED.samples"))
    return tuple(sets)


# --- rollups and retention -------------------------------------------------------------------------------------

def _rollup(raw_model, rollup_model, key: str, avg_fields: tuple[str, ...], extra, since: datetime,
            until: datetime, chunk: int = 50_000) -> int:
    """Fold raw buckets into 5-minute rollups: means weighted by each raw row's `samples`."""
    groups: dict[tuple[int, datetime], list[tuple]] = defaultdict(list)
    rows = (raw_model.objects.filter(at__gte=since, at__lt=until)
            .values_list(f"{key}_id", "at", "samples", *avg_fields, *extra.keys()).iterator(chunk_size=chunk))
    for row in rows:
        groups[(row[0], _bucket(row[1]))].append(row[2:])
    objects = []
    for (owner, bucket), values in groups.items():
        columns = list(zip(*values, strict=True))
        weights = columns[0]
        fields = {name: _weighted(columns[i + 1], weights, name in _INTEGER_COLUMNS)
                  for i, name in enumerate(avg_fields)}
        for j, (name, reducer) in enumerate(extra.items()):
            fields.update(reducer(name, columns[1 + len(avg_fields) + j]))
        objects.append(rollup_model(**{f"{key}_id": owner}, bucket=bucket, samples=sum(weights), **fields))
    # Partitions of the buckets' days (PostgreSQL; a no-op once known to this process).
    partitions.ensure_days({bucket.astimezone(UTC).date() for _, bucket in groups}, tables=partitions.ROLLUP_TABLES)
    update = [f.name for f in rollup_model._meta.concrete_fields if f.name not in ("id", key, "bucket")]
    for start in range(0, len(objects), 5000):
        rollup_model.objects.bulk_create(objects[start:start + 5000], update_conflicts=True,
                                         unique_fields=[key, "bucket"], update_fields=update)
    return len(objects)


def _weighted(values, weights, integer: bool):
    """The mean of a bucket's raw means, each weighted by the reports it holds (nulls and non-finite left out)."""
    pairs = [(v, w or 1) for v, w in zip(values, weights, strict=True) if v is not None]
    if integer:
        return sum(v * w for v, w in pairs) // sum(w for _, w in pairs) if pairs else None
    pairs = [(v, w) for v, w in pairs if math.isfinite(v)]
    if not pairs:
        return None
    total = sum(w for _, w in pairs)
    mean = sum(v * w for v, w in pairs) / total
    return mean if math.isfinite(mean) else sum(v * (w / total) for v, w in pairs)


def _gpu_extra():
    def highest(target):
        def reducer(name, column):
            values = [v for v in column if v is not None]
            return {target: max(values) if values else None}
        return reducer

    return {"utilization_gpu_pct_max": highest("utilization_gpu_pct_max"),
            "temperature_c_max": highest("temperature_c_max"),
            "ecc_volatile_uncorrected": highest("ecc_volatile_uncorrected")}


def rollup_history(*, now: datetime) -> dict:
    """Aggregate completed 5-minute buckets since the last rollup (re-doing the newest one is harmless)."""
    until = _bucket(now)
    result = {}
    for name, raw, rollup, key, fields, extra in (
        ("nodes", NodeSample, NodeSampleRollup, "node", NODE_GAUGES, {}),
        ("gpus", GPUSample, GPUSampleRollup, "gpu", GPU_GAUGES, _gpu_extra()),
    ):
        last = rollup.objects.aggregate(last=Max("bucket"))["last"]
        since = last if last else now - timedelta(hours=settings.TELEMETRY_RAW_RETENTION_HOURS)
        with transaction.atomic():
            result[name] = _rollup(raw, rollup, key, fields, extra, since, until)
    return result


def prune_history(*, now: datetime) -> dict:
    """Drop raw history past the raw window, rollups past the long window and events past theirs.

    On PostgreSQL raw history goes a whole day partition at a time, once the day ended more than the window (plus
    PRUNE_MARGIN) ago, so up to a day more than the window is kept; rollups go a whole day partition at a time
    once the day ended before their window (and rows past it are deleted from their default partition); on
    SQLite rows are deleted.
    """
    raw_cutoff = now - timedelta(hours=settings.TELEMETRY_RAW_RETENTION_HOURS)
    rollup_cutoff = now - timedelta(days=settings.TELEMETRY_ROLLUP_RETENTION_DAYS)
    event_cutoff = now - timedelta(days=settings.TELEMETRY_EVENT_RETENTION_DAYS)
    if partitions.supported():
        dropped = partitions.drop_before(raw_cutoff - PRUNE_MARGIN)
        raw = {"node_sample_partitions": dropped[NodeSample._meta.db_table],
               "gpu_sample_partitions": dropped[GPUSample._meta.db_table]}
        # Rollups likewise a whole day at a time, and what the default partition holds past the window.
        dropped = partitions.drop_before(rollup_cutoff, tables=partitions.ROLLUP_TABLES)
        rollups = {"node_rollup_partitions": dropped[NodeSampleRollup._meta.db_table],
                   "gpu_rollup_partitions": dropped[GPUSampleRollup._meta.db_table]}
        with connection.cursor() as cursor:
            for name, model in (("node_rollups", NodeSampleRollup), ("gpu_rollups", GPUSampleRollup)):
                table = partitions.default_name(model._meta.db_table)
                cursor.execute(f"DELETE FROM {table} WHERE bucket < %s", [rollup_cutoff])  # noqa: S608 (constant)
                rollups[name] = cursor.rowcount
    else:
        raw = {"node_samples": NodeSample.objects.filter(at__lt=raw_cutoff).delete()[0],
               "gpu_samples": GPUSample.objects.filter(at__lt=raw_cutoff).delete()[0]}
        rollups = {"node_rollups": NodeSampleRollup.objects.filter(bucket__lt=rollup_cutoff).delete()[0],
                   "gpu_rollups": GPUSampleRollup.objects.filter(bucket__lt=rollup_cutoff).delete()[0]}
    return {**raw, **rollups, "events": Event.objects.filter(at__lt=event_cutoff).delete()[0]}


def create_history_partitions(*, now: datetime) -> dict:
    """PostgreSQL: the day partitions of the raw window and TELEMETRY_PARTITIONS_AHEAD_DAYS ahead."""
    return {"created": partitions.ensure_window(now=now)}
