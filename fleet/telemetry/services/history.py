"""History upkeep: 5-minute rollups of raw samples, and retention pruning."""

import math
from collections import defaultdict
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Max

from ..models import Event, GPUSample, GPUSampleRollup, NodeSample, NodeSampleRollup

BUCKET_S = 300
_NODE_AVG = ["cpu_busy_pct", "cpu_steal_pct", "cpu_iowait_pct", "mem_used_pct", "load1", "tcp_retrans_pct",
             "gpu_util_avg_pct"]
_GPU_AVG = ["utilization_gpu_pct", "memory_used_bytes", "temperature_c", "power_draw_w", "sm_clock_mhz"]


def _bucket(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0, minute=at.minute - at.minute % 5)


_INTEGER_COLUMNS = {"memory_used_bytes", "sm_clock_mhz"}


def _int_mean(values):
    # Exact: a float mean of values near 2**63 rounds up past the 64-bit column.
    values = [v for v in values if v is not None]
    return sum(values) // len(values) if values else None


def _mean(values):
    # Non-finite readings (stored before the schema bounded every number) would roll up into Infinity.
    values = [v for v in values if v is not None and math.isfinite(v)]
    return finite_mean(values) if values else None


def finite_mean(values: list[float]) -> float:
    """The mean of finite values, which is finite even where their sum overflows (two readings of 1e308)."""
    total = sum(values)
    return total / len(values) if math.isfinite(total) else sum(v / len(values) for v in values)


def _rollup(raw_model, rollup_model, key: str, avg_fields: list[str], extra, since: datetime, until: datetime,
            chunk: int = 50_000) -> int:
    groups: dict[tuple[int, datetime], list[tuple]] = defaultdict(list)
    rows = (raw_model.objects.filter(at__gte=since, at__lt=until)
            .values_list(f"{key}_id", "at", *avg_fields, *extra.keys()).iterator(chunk_size=chunk))
    for row in rows:
        groups[(row[0], _bucket(row[1]))].append(row[2:])
    objects = []
    for (owner, bucket), values in groups.items():
        columns = list(zip(*values, strict=True))
        fields = {name: (_int_mean if name in _INTEGER_COLUMNS else _mean)(columns[i])
                  for i, name in enumerate(avg_fields)}
        for j, (name, reducer) in enumerate(extra.items()):
            fields.update(reducer(name, columns[len(avg_fields) + j]))
        objects.append(rollup_model(**{f"{key}_id": owner}, bucket=bucket, samples=len(values), **fields))
    update = [f.name for f in rollup_model._meta.concrete_fields if f.name not in ("id", key, "bucket")]
    for start in range(0, len(objects), 5000):
        rollup_model.objects.bulk_create(objects[start:start + 5000], update_conflicts=True,
                                         unique_fields=[key, "bucket"], update_fields=update)
    return len(objects)


def _gpu_extra():
    def util_max(name, column):
        values = [v for v in column if v is not None]
        return {"utilization_gpu_pct_max": max(values) if values else None}

    def temp_max(name, column):
        values = [v for v in column if v is not None]
        return {"temperature_c_max": max(values) if values else None}

    def ecc_last(name, column):
        values = [v for v in column if v is not None]
        return {"ecc_volatile_uncorrected": max(values) if values else None}

    return {"utilization_gpu_pct": util_max, "temperature_c": temp_max, "ecc_volatile_uncorrected": ecc_last}


def rollup_history(*, now: datetime) -> dict:
    """Aggregate completed 5-minute buckets since the last rollup (re-doing the newest one is harmless)."""
    until = _bucket(now)
    result = {}
    for name, raw, rollup, key, fields, extra in (
        ("nodes", NodeSample, NodeSampleRollup, "node", _NODE_AVG, {}),
        ("gpus", GPUSample, GPUSampleRollup, "gpu", _GPU_AVG, _gpu_extra()),
    ):
        last = rollup.objects.aggregate(last=Max("bucket"))["last"]
        since = last if last else now - timedelta(hours=settings.TELEMETRY_RAW_RETENTION_HOURS)
        with transaction.atomic():
            result[name] = _rollup(raw, rollup, key, fields, extra, since, until)
    return result


def prune_history(*, now: datetime) -> dict:
    """Delete raw samples past the raw window, rollups past the long window, events past theirs."""
    raw_cutoff = now - timedelta(hours=settings.TELEMETRY_RAW_RETENTION_HOURS)
    rollup_cutoff = now - timedelta(days=settings.TELEMETRY_ROLLUP_RETENTION_DAYS)
    event_cutoff = now - timedelta(days=settings.TELEMETRY_EVENT_RETENTION_DAYS)
    return {
        "node_samples": NodeSample.objects.filter(at__lt=raw_cutoff).delete()[0],
        "gpu_samples": GPUSample.objects.filter(at__lt=raw_cutoff).delete()[0],
        "node_rollups": NodeSampleRollup.objects.filter(bucket__lt=rollup_cutoff).delete()[0],
        "gpu_rollups": GPUSampleRollup.objects.filter(bucket__lt=rollup_cutoff).delete()[0],
        "events": Event.objects.filter(at__lt=event_cutoff).delete()[0],
    }
