"""Read-side queries: latest status, time series, fleet summary."""

import math
from collections import defaultdict
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count

from fleet.inventory.models import GPU, Node

from .models import Event, GPUSample, GPUSampleRollup, GPUStatus, NodeSample, NodeSampleRollup, NodeStatus
from .services.history import finite_mean, history_bucket

NODE_METRICS = ["cpu_busy_pct", "cpu_steal_pct", "cpu_iowait_pct", "mem_used_pct", "load1", "tcp_retrans_pct",
                "gpu_util_avg_pct"]
GPU_METRICS = ["utilization_gpu_pct", "memory_used_bytes", "temperature_c", "power_draw_w", "sm_clock_mhz",
               "ecc_volatile_uncorrected"]
MAX_POINTS = 2000


class SeriesError(ValueError):
    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(message)


def _finite(value) -> bool:
    return value is not None and math.isfinite(value)


def _bucketed(rows, start: datetime, step: int) -> list[list]:
    """Points [ISO time, mean, min, max] per `step`: the mean of the rows' means, the lowest of their minima and the
    highest of their maxima (None where the rows carry no minimum or maximum, e.g. 5-minute rollups)."""
    buckets: dict[int, list[list[float]]] = defaultdict(lambda: [[], [], []])
    base = int(start.timestamp())
    for at, value, low, high in rows:
        # Non-finite values cannot be rendered as JSON; the schema bounds every number now, but rows stored
        # before it did must not turn a chart into a server error.
        if not _finite(value):
            continue
        slot = base + max(0, (int(at.timestamp()) - base) // step) * step
        means, lows, highs = buckets[slot]
        means.append(value)
        if _finite(low):
            lows.append(low)
        if _finite(high):
            highs.append(high)
    return [[datetime.fromtimestamp(slot, tz=start.tzinfo).isoformat(), round(finite_mean(means), 3),
             round(min(lows), 3) if lows else None, round(max(highs), 3) if highs else None]
            for slot, (means, lows, highs) in sorted(buckets.items())]


def _columns(model, metric: str) -> list[str | None]:
    """The metric's mean column and its min and max columns where the model keeps them (else None)."""
    names = {f.name for f in model._meta.concrete_fields}
    return [metric, *(f"{metric}_{bound}" if f"{metric}_{bound}" in names else None for bound in ("min", "max"))]


def _series(*, raw_model, rollup_model, key: dict, metrics: list[str], allowed: list[str], start: datetime,
            end: datetime, step: int, now: datetime) -> list[dict]:
    unknown = [m for m in metrics if m not in allowed]
    if unknown:
        raise SeriesError("metric", f"Unknown metric {unknown[0]!r}; choose from {', '.join(allowed)}.")
    span = (end - start).total_seconds()
    if span / step > MAX_POINTS:
        raise SeriesError("step", f"Too many points; use a step of at least {int(span / MAX_POINTS) + 1} s.")
    raw_since = now - timedelta(hours=settings.TELEMETRY_RAW_RETENTION_HOURS)
    use_raw = start >= raw_since and step < 300
    model, time_field = (raw_model, "at") if use_raw else (rollup_model, "bucket")
    # A raw row is a bucket (TELEMETRY_HISTORY_RESOLUTION_S) stamped with its start: the one holding `start`
    # belongs to the first point.
    since = history_bucket(start) if use_raw else start
    columns = [_columns(model, metric) for metric in metrics]
    fetched = sorted({c for group in columns for c in group if c})
    index = {name: i + 1 for i, name in enumerate(fetched)}
    rows = list(model.objects.filter(**key, **{f"{time_field}__gte": since, f"{time_field}__lt": end})
                .order_by(time_field).values_list(time_field, *fetched))

    def values(group):
        return ((row[0], *(row[index[c]] if c else None for c in group)) for row in rows)

    return [{"metric": metric, "step": step, "source": "raw" if use_raw else "5m",
             "points": _bucketed(values(group), since, step)}
            for metric, group in zip(metrics, columns, strict=True)]


def node_series(*, node: Node, metrics: list[str], start: datetime, end: datetime, step: int,
                now: datetime) -> list[dict]:
    return _series(raw_model=NodeSample, rollup_model=NodeSampleRollup, key={"node": node}, metrics=metrics,
                   allowed=NODE_METRICS, start=start, end=end, step=step, now=now)


def gpu_series(*, gpu: GPU, metrics: list[str], start: datetime, end: datetime, step: int,
               now: datetime) -> list[dict]:
    return _series(raw_model=GPUSample, rollup_model=GPUSampleRollup, key={"gpu": gpu}, metrics=metrics,
                   allowed=GPU_METRICS, start=start, end=end, step=step, now=now)


def node_latest_status(*, node: Node) -> tuple[NodeStatus | None, list[GPUStatus]]:
    status = NodeStatus.objects.filter(node=node).first()
    gpus = list(GPUStatus.objects.filter(node=node, gpu__present=True).select_related("gpu").order_by("gpu__index"))
    return status, gpus


def _counts(queryset, field: str) -> dict[str, int]:
    return {row[field] or "none": row["n"] for row in queryset.values(field).annotate(n=Count("id")).order_by(field)}


def fleet_summary() -> dict:
    nodes = Node.objects.exclude(state="retired")
    silent = NodeStatus.objects.filter(silent=True, node__in=nodes).count()
    reporting = NodeStatus.objects.filter(silent=False, node__in=nodes).count()
    return {
        "nodes": nodes.count(),
        "gpus": GPU.objects.filter(present=True, node__in=nodes).count(),
        "silent": silent,
        "reporting": reporting,
        "by_state": _counts(Node.objects.all(), "state"),
        "by_delivery_form": _counts(nodes, "delivery_form"),
        "by_billing_mode": _counts(nodes, "billing_mode"),
        "by_provider": _counts(nodes, "provider__name"),
        "nvml_unavailable": NodeStatus.objects.filter(node__in=nodes).exclude(nvml_status="ok").count(),
    }


# --- Fleet-wide charts -------------------------------------------------------------------------------------
# Read from the 5-minute rollups where the range allows (one row per GPU per bucket, aggregated in the database
# to one row per bucket), and from the raw samples only for the last hour.

def fleet_utilisation(*, start: datetime, end: datetime, step: int, now: datetime) -> list[list]:
    """Mean GPU utilisation (%) of the fleet per bucket of `step` seconds: [[ISO time, mean or None], ...].

    Every bucket of the range is present (None where no GPU reported), so a gap in reporting is a gap in the
    line rather than a straight line across it. Rollup buckets are weighted by their sample counts.
    """
    from django.db.models import ExpressionWrapper, F, FloatField, Sum

    raw_since = now - timedelta(hours=settings.TELEMETRY_RAW_RETENTION_HOURS)
    # Raw history and rollups both hold means over buckets with a sample count: weight each by its count.
    weighted = ExpressionWrapper(F("utilization_gpu_pct") * F("samples"), output_field=FloatField())
    if start >= raw_since and step < 300:
        rows = (GPUSample.objects.filter(at__gte=start, at__lt=end, samples__gt=0,
                                         utilization_gpu_pct__isnull=False)
                .values("at").annotate(total=Sum(weighted), n=Sum("samples")).order_by())
        pairs = ((row["at"], row["total"], row["n"]) for row in rows)
    else:
        rows = (GPUSampleRollup.objects.filter(bucket__gte=start, bucket__lt=end, samples__gt=0,
                                               utilization_gpu_pct__isnull=False)
                .values("bucket").annotate(total=Sum(weighted), n=Sum("samples")).order_by())
        pairs = ((row["bucket"], row["total"], row["n"]) for row in rows)
    base = int(start.timestamp())
    sums: dict[int, list[float]] = defaultdict(lambda: [0.0, 0])
    for at, total, n in pairs:
        if total is None or not n or not math.isfinite(total):
            continue
        slot = base + ((int(at.timestamp()) - base) // step) * step
        sums[slot][0] += total
        sums[slot][1] += n
    out = []
    for slot in range(base, int(end.timestamp()), step):
        total, n = sums.get(slot, (0.0, 0))
        out.append([datetime.fromtimestamp(slot, tz=start.tzinfo).isoformat(), round(total / n, 2) if n else None])
    return out


def xid_daily(*, start: datetime, end: datetime) -> dict[int, dict[str, int]]:
    """Xid events per day (UTC) and code: {code: {"YYYY-MM-DD": count}}."""
    from django.db.models.functions import TruncDate

    from .choices import EventKind

    rows = (Event.objects.filter(kind=EventKind.XID, at__gte=start, at__lt=end, code__isnull=False)
            .annotate(day=TruncDate("at", tzinfo=start.tzinfo)).values("day", "code").annotate(n=Count("id"))
            .order_by())
    out: dict[int, dict[str, int]] = defaultdict(dict)
    for row in rows:
        out[row["code"]][row["day"].isoformat()] = row["n"]
    return dict(out)

