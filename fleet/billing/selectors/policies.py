"""Checkpoint policy as the health engine reads it."""

from collections.abc import Iterable

from fleet.inventory.choices import BillingMode
from fleet.inventory.models import Node


def checkpoint_policy_for_nodes(node_ids: Iterable[int]) -> dict[int, int | None]:
    """{node_id: maximum checkpoint age in seconds, or None when no policy covers the node}, in one query.

    A pool's policy covers its spot nodes, and every other node too when `applies_to_all_billing_modes`.
    Ids of nodes that do not exist are left out.
    """
    rows = Node.objects.filter(pk__in=set(node_ids)).values_list(
        "pk", "billing_mode", "pool__checkpoint_policy__max_checkpoint_age_s",
        "pool__checkpoint_policy__applies_to_all_billing_modes")
    return {
        node_id: max_age if max_age is not None and (mode == BillingMode.SPOT or all_modes) else None
        for node_id, mode, max_age, all_modes in rows
    }
