"""Prometheus exposition: fleet/node/GPU gauges read from the database at scrape time, plus control-plane
counters kept by the processes that serve the agents.

With several gunicorn workers set PROMETHEUS_MULTIPROC_DIR (runstack and docker-compose do) so the
counters are summed across processes.
"""

import os
from pathlib import Path

from django.conf import settings
from django.utils import timezone
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
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

# Clock reasons that are no slowdown (idle, clocks set by an operator or the display, sync boost); any other bit
# means the clocks are held down by power, heat or a hardware slowdown.
_IDLE_BITS = (CLOCK_REASON_GPU_IDLE | CLOCK_REASON_APPLICATIONS_CLOCKS_SETTING | CLOCK_REASON_SYNC_BOOST
              | CLOCK_REASON_DISPLAY_CLOCK_SETTING)


def reports_accepted(accepted: int, duplicates: int, seconds: float) -> None:
    _REPORTS.inc(accepted)
    if duplicates:
        _DUPLICATES.inc(duplicates)
    _LATENCY.observe(seconds)


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

        # Imported here: health and billing import telemetry models, so a module-level import would cycle.
        from fleet.billing.selectors import preemption_rates_for_metrics
        from fleet.health.selectors import findings_by_severity

        findings = GaugeMetricFamily("fleet_findings_open", "Open findings", labels=["severity"])
        for severity, count in findings_by_severity().items():
            findings.add_metric([severity], count)
        yield findings

        for gauge in preemption_rates_for_metrics():
            family = GaugeMetricFamily(gauge.name, gauge.documentation, labels=list(gauge.labels))
            for labels, value in gauge.samples:
                family.add_metric(list(labels), value)
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


def render() -> bytes:
    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        MultiProcessCollector(registry)
    else:
        for collector in (_REPORTS, _DUPLICATES, _REJECTED, _DROPPED, _ENROLL_REFUSED, _LATENCY,
                          *core_metrics.COLLECTORS):
            registry.register(collector)
    registry.register(FleetCollector())
    from fleet.remediation.metrics import RemediationCollector  # imported here for the same reason as above

    registry.register(RemediationCollector())
    return generate_latest(registry)
