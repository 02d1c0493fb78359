"""Findings over time for the fleet charts: open findings by triage step, and the share of healthy GPUs.

Both are read from the findings' own intervals ([opened_at, resolved_at)), so they need no history table of
their own and stay right when a finding is resolved late. Each bucket is sampled at its end (or now, for the
bucket still running): "how many were open then".
"""

from collections import defaultdict
from datetime import datetime

from django.db.models import Q

from fleet.core.timeranges import TimeRange
from fleet.inventory.models import GPU

from ..choices import Severity, TriageStep
from ..models import Finding

# A GPU is unhealthy while a critical or warning finding is open on it, or on its node as a whole (a node
# finding — say the driver stack — takes every GPU of the node out of service). Info findings do not count.
UNHEALTHY_SEVERITIES = (Severity.CRITICAL, Severity.WARNING)


def _open_at(row: dict, at: datetime) -> bool:
    return row["opened_at"] <= at and (row["resolved_at"] is None or row["resolved_at"] > at)


def finding_trends(*, rng: TimeRange, now: datetime) -> dict:
    """{"times": [...], "by_step": {step: [count, ...]}, "healthy_gpu_share": [fraction or None, ...]}."""
    findings = list(Finding.objects.filter(Q(resolved_at__isnull=True) | Q(resolved_at__gt=rng.start),
                                           opened_at__lt=rng.end)
                    .values("step", "severity", "node_id", "gpu_id", "opened_at", "resolved_at"))
    gpus = list(GPU.objects.filter(present=True).exclude(node__state="retired")
                .values("id", "node_id", "first_seen"))
    gpus_of_node: dict[int, list[int]] = defaultdict(list)
    for gpu in gpus:
        gpus_of_node[gpu["node_id"]].append(gpu["id"])
    present = {gpu["id"] for gpu in gpus}
    times, by_step, healthy = [], {step: [] for step in TriageStep.values}, []
    for bucket in rng.buckets():
        at = min(bucket + rng.step, now)
        times.append(bucket.isoformat())
        open_rows = [row for row in findings if _open_at(row, at)]
        counts = defaultdict(int)
        for row in open_rows:
            counts[row["step"]] += 1
        for step in TriageStep.values:
            by_step[step].append(counts[step])
        seen = {gpu["id"] for gpu in gpus if gpu["first_seen"] <= at}
        if not seen:
            healthy.append(None)
            continue
        affected: set[int] = set()
        for row in open_rows:
            if row["severity"] not in UNHEALTHY_SEVERITIES:
                continue
            if row["gpu_id"] is not None:
                affected.add(row["gpu_id"])
            else:
                affected.update(gpus_of_node.get(row["node_id"], ()))
        healthy.append(round(1 - len(affected & seen & present) / len(seen), 4))
    return {"times": times, "by_step": by_step, "healthy_gpu_share": healthy}
