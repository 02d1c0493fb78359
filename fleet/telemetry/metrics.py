"""Prometheus exposition: fleet/node/GPU gauges read from the database at scrape time, plus control-plane
counters kept by the processes that serve the agents.

With several gunicorn workers set PROMETHEUS_MULTIPROC_DIR (runstack and docker-compose do) so the
counters are summed across processes.
"""

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from django.conf import settings
from django.utils import timezone
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector

from fleet.core import metrics as core_metrics
from fleet.inventory.models import Node
from fleet_agent.protocol import (
    CLOCK_REASON_APPLICATIONS_CLOCKS_SETTING,
    CLOCK_REASON_DISPLAY_CLOCK_SETTING,
    CLOCK_REASON_GPU_IDLE,
    CLOCK_REASON_SYNC_BOOST,
)

from .models import GPUStatus, NodeStatus, ReceivingState

# Gauges of the apps above telemetry (open findings, preemption rates): each registers a callable yielding
# metric families in its AppConfig.ready(), so this module imports none of them.
GAUGE_SOURCES: list[Callable[[], Iterable[Metric]]] = []


def gauge_source_register(source: Callable[[], Iterable[Metric]]) -> None:
    """Add `source` to every scrape of /metrics (once, however often an app's ready() runs)."""
    if source not in GAUGE_SOURCES:
        GAUGE_SOURCES.append(source)


_REPORTS = Counter("fleet_reports_accepted_total", "Agent reports stored")
_DUPLICATES = Counter("fleet_reports_duplicate_total", "Agent reports acknowledged but already stored")
_REJECTED = Counter("fleet_reports_rejected_total", "Agent report batches rejected", ["reason"])
_DROPPED = Counter("fleet_agent_items_dropped_total",
                   "Parts of stored agent reports left out: events over a limit, GPUs over the per-node limit, "
                   "GPU uuids that belong to another node", ["what"])
_ENROLL_REFUSED = Counter("fleet_enrollments_refused_total",
                          "Enrolments of a known machine refused (no proof, or the token's scope does not match)",
                          ["reason"])
_LATENCY = Histogram("fleet_ingest_seconds", "Time to validate and store one report batch",
                     buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5))

# The ingest queue (services/stream.py, services/writer.py).
_QUEUED = Counter("fleet_reports_queued_total", "Agent reports acknowledged once appended to the ingest stream")
_QUEUE_UNAVAILABLE = Counter("fleet_ingest_queue_unavailable_total",
                             "Report batches written in the request because the ingest stream (Redis) was "
                             "unavailable", ["reason"])
QUEUE_UNAVAILABLE = _QUEUE_UNAVAILABLE
CREDENTIAL_CACHE_UNAVAILABLE = Counter("fleet_credential_cache_unavailable_total",
                                       "Agent requests authenticated from the database because the credential "
                                       "cache (Redis) was unavailable", ["op"])
_WRITER_BATCHES = Counter("fleet_writer_batches_total", "Batches of stream entries the writer committed")
_WRITER_REPORTS = Counter("fleet_writer_reports_total", "Queued reports the writer handled", ["outcome"])
_WRITER_SECONDS = Histogram("fleet_writer_batch_seconds", "Time to store one batch of stream entries",
                            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0))

# Clock reasons that are no slowdown (idle, clocks set by an operator or the display, sync boost); any other bit
# means the clocks are held down by power, heat or a hardware slowdown.
_IDLE_BITS = (CLOCK_REASON_GPU_IDLE | CLOCK_REASON_APPLICATIONS_CLOCKS_SETTING | CLOCK_REASON_SYNC_BOOST
              | CLOCK_REASON_DISPLAY_CLOCK_SETTING)


def reports_accepted(accepted: int, duplicates: int, seconds: float) -> None:
    _REPORTS.inc(accepted)
    if duplicates:
        _DUPLICATES.inc(duplicates)
    _LATENCY.observe(seconds)


def reports_queued(count: int) -> None:
    _QUEUED.inc(count)


def ingest_queue_unavailable(reason: str) -> None:
    _QUEUE_UNAVAILABLE.labels(reason).inc()


def writer_batch(*, stored: int, duplicates: int, dead: int, seconds: float) -> None:
    _WRITER_BATCHES.inc()
    _REPORTS.inc(stored)
    _DUPLICATES.inc(duplicates)
    _WRITER_REPORTS.labels("stored").inc(stored)
    _WRITER_REPORTS.labels("duplicate").inc(duplicates)
    if dead:
        _WRITER_REPORTS.labels("dead_letter").inc(dead)
    _WRITER_SECONDS.observe(seconds)


def reports_rejected(reason: str) -> None:
    _REJECTED.labels(reason=reason).inc()


def items_dropped(dropped: dict[str, int]) -> None:
    for what, count in dropped.items():
        if count:
            _DROPPED.labels(what=what).inc(count)


def enrollment_refused(reason: str) -> None:
    _ENROLL_REFUSED.labels(reason=reason).inc()


class FleetCollector:
    """Gauges computed from the latest status rows, one query per family group."""

    def collect(self):
        node_names = dict(Node.objects.values_list("pk", "hostname"))
        up = GaugeMetricFamily("fleet_node_up", "1 when the node reported within 2 intervals", labels=["node"])
        silent = GaugeMetricFamily("fleet_node_silent", "1 when the node stopped reporting", labels=["node"])
        newest = None
        for node_id, is_silent, received_at in NodeStatus.objects.values_list("node_id", "silent", "received_at"):
            name = node_names.get(node_id, str(node_id))
            up.add_metric([name], 0 if is_silent else 1)
            silent.add_metric([name], 1 if is_silent else 0)
            newest = received_at if newest is None or received_at > newest else newest
        yield up
        yield silent
        # The server's own receiving: alert on these rather than on a wave of silent nodes (docs/telemetry.md).
        state = ReceivingState.objects.filter(pk=1).values_list("gap_started_at", "gap_ended_at").first()
        receiving = GaugeMetricFamily("fleet_ingest_receiving", "0 while the silence sweep sees a gap in receiving: "
                                      "no report from any node although several were due")
        receiving.add_metric([], 0 if state and state[0] is not None and state[1] is None else 1)
        yield receiving
        if newest is not None:
            age = GaugeMetricFamily("fleet_ingest_newest_report_age_seconds", "Seconds since any node's report arrived")
            age.add_metric([], max(0.0, (timezone.now() - newest).total_seconds()))
            yield age

        labels = ["node", "gpu", "uuid"]
        families = {
            "utilization_gpu_pct": GaugeMetricFamily("fleet_gpu_utilization_percent", "GPU utilisation", labels=labels),
            "memory_used_bytes": GaugeMetricFamily("fleet_gpu_memory_used_bytes", "GPU memory used", labels=labels),
            "memory_total_bytes": GaugeMetricFamily("fleet_gpu_memory_total_bytes", "GPU memory", labels=labels),
            "temperature_c": GaugeMetricFamily("fleet_gpu_temperature_celsius", "GPU temperature", labels=labels),
            "power_draw_w": GaugeMetricFamily("fleet_gpu_power_watts", "GPU power draw", labels=labels),
            "ecc_volatile_uncorrected": GaugeMetricFamily("fleet_gpu_ecc_volatile_uncorrected",
                                                          "Volatile uncorrectable ECC errors", labels=labels),
        }
        throttled = GaugeMetricFamily("fleet_gpu_throttled", "1 when clocks are held down by power/thermal/slowdown",
                                      labels=labels)
        rows = GPUStatus.objects.values_list("node_id", "gpu__index", "gpu__uuid", "clock_event_reasons_mask",
                                             *families.keys())
        for node_id, index, uuid, mask, *values in rows:
            key = [node_names.get(node_id, str(node_id)), str(index), uuid]
            for family, value in zip(families.values(), values, strict=True):
                if value is not None:
                    family.add_metric(key, value)
            if mask is not None:
                throttled.add_metric(key, 1 if mask & ~_IDLE_BITS else 0)
        yield from families.values()
        yield throttled

        for source in GAUGE_SOURCES:
            yield from source()

        ingest = ingest_queue_depth()
        if ingest is not None:
            for name, help_text, value in (
                    ("fleet_ingest_queue_entries", "Report batches in the ingest stream not yet written", ingest[0]),
                    ("fleet_ingest_queue_pending", "Ingest stream entries read by a writer, not yet acknowledged",
                     ingest[1])):
                family = GaugeMetricFamily(name, help_text)
                family.add_metric([], value)
                yield family

        depth = queue_depth()
        if depth is not None:
            queue = GaugeMetricFamily("fleet_task_queue_depth", "Messages waiting in the default Celery queue")
            queue.add_metric([], depth)
            yield queue


def queue_depth() -> int | None:
    broker = settings.CELERY_BROKER_URL
    try:
        if broker.startswith("redis"):
            import redis

            return redis.Redis.from_url(broker, socket_timeout=1).llen("celery")
        if broker.startswith("filesystem"):
            folder = Path(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"])
            return sum(1 for p in folder.iterdir() if p.suffix == ".msg")
    except Exception:  # the metric is best effort; a scrape must not fail over it
        return None
    return None


def ingest_queue_depth() -> tuple[int, int] | None:
    """(entries in the stream, entries read but not acknowledged), or None without a queue or when Redis is down."""
    if not settings.INGEST_QUEUE:
        return None
    from .services.stream import stream_depth

    try:
        return stream_depth()
    except Exception:  # best effort, like queue_depth
        return None


def render() -> bytes:
    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        MultiProcessCollector(registry)
    else:
        for collector in (_REPORTS, _DUPLICATES, _REJECTED, _DROPPED, _ENROLL_REFUSED, _LATENCY, _QUEUED,
                          _QUEUE_UNAVAILABLE, CREDENTIAL_CACHE_UNAVAILABLE, _WRITER_BATCHES, _WRITER_REPORTS,
                          _WRITER_SECONDS,
                          *core_metrics.COLLECTORS):
            registry.register(collector)
    registry.register(FleetCollector())
    return generate_latest(registry)
