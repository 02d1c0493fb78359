"""Silent nodes: no report for more than 2 report intervals. Separate from the lifecycle state."""

import logging
from datetime import datetime, timedelta

from ..models import NodeStatus

logger = logging.getLogger(__name__)
SILENT_AFTER_INTERVALS = 2
MIN_INTERVAL_S = 1


def mark_silent_nodes(*, now: datetime) -> dict:
    """Flag nodes whose last report is older than 2× their interval; ingestion clears the flag."""
    # Cheap pre-filter in SQL (the shortest interval an agent accepts is 1 s), exact per-node check in Python.
    candidates = NodeStatus.objects.filter(silent=False, received_at__lt=now - timedelta(
        seconds=SILENT_AFTER_INTERVALS * MIN_INTERVAL_S))
    newly_silent = [node_id for node_id, received_at, interval in
                    candidates.values_list("node_id", "received_at", "interval_s")
                    if received_at < now - timedelta(seconds=SILENT_AFTER_INTERVALS * max(interval, 1))]
    if newly_silent:
        NodeStatus.objects.filter(node_id__in=newly_silent, silent=False).update(silent=True, silent_since=now)
        _notify_billing(newly_silent, now)
    return {"silent": len(newly_silent), "node_ids": newly_silent}


def _notify_billing(node_ids: list[int], now: datetime) -> None:
    """A silent spot node may have been reclaimed; billing records the preemption when the cloud confirms."""
    from fleet.billing.services import preemption_on_node_silent  # here: billing imports telemetry models

    preemption_on_node_silent(node_ids=node_ids, now=now)
