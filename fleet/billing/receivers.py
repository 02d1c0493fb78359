"""Billing's answers to what telemetry announces (connected in BillingConfig.ready())."""

from fleet.core import failopen

from .services import preemption_on_node_silent


def record_announced_preemptions(*, notice_event_ids: list[int], **kwargs) -> None:
    """One task per stored notice; the periodic sweep records any a dead broker kept from being sent."""
    for event_id in notice_event_ids:
        failopen.enqueue("billing.record_preemption_notice", event_id=event_id)


def preemptions_for_silent_nodes(*, node_ids: list[int], now, **kwargs) -> None:
    """A silent spot node may have been reclaimed; the record is made when the cloud confirms it."""
    preemption_on_node_silent(node_ids=node_ids, now=now)
