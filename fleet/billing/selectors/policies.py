"""Checkpoint policy as the health engine reads it."""

from collections.abc import Iterable

from fleet.inventory.choices import BillingMode
from fleet.inventory.models import Node

from ..models import CheckpointPolicy


def checkpoint_max_age(policy: tuple[int, bool] | None, billing_mode: str) -> int | None:
    """The maximum checkpoint age a pool's policy `(max_age_s, applies_to_all_billing_modes)` sets for a node of
    this billing mode, or None: a policy covers its pool's spot nodes, and every other node too when it says so."""
    if policy is None:
        return None
    max_age, all_modes = policy
    return max_age if billing_mode == BillingMode.SPOT or all_modes else None


def checkpoint_policies_by_pool(pool_ids: Iterable[int | None]) -> dict[int, tuple[int, bool]]:
    """{pool_id: (max_age_s, applies_to_all_billing_modes)} for the pools that have a policy, in one query over the
    policies (a handful of rows however many nodes ask)."""
    wanted = {pool_id for pool_id in pool_ids if pool_id is not None}
    rows = CheckpointPolicy.objects.filter(pool_id__in=wanted).values_list(
        "pool_id", "max_checkpoint_age_s", "applies_to_all_billing_modes")
    return {pool_id: (max_age, all_modes) for pool_id, max_age, all_modes in rows}


def checkpoint_policy_for_nodes(node_ids: Iterable[int]) -> dict[int, int | None]:
    """{node_id: maximum checkpoint age in seconds, or None when no policy covers the node}, in one query.
    Ids of nodes that do not exist are left out. (A whole fleet's worth reads the pools' policies instead:
    `checkpoint_policies_by_pool`.)"""
    rows = Node.objects.filter(pk__in=set(node_ids)).values_list(
        "pk", "billing_mode", "pool__checkpoint_policy__max_checkpoint_age_s",
        "pool__checkpoint_policy__applies_to_all_billing_modes")
    return {node_id: checkpoint_max_age(None if max_age is None else (max_age, all_modes), mode)
            for node_id, mode, max_age, all_modes in rows}
