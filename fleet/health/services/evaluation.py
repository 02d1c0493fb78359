"""One evaluation cycle: load facts in bulk, run every rule, move conditions and findings through hysteresis.

This module runs the cycle and measures it; each step has a module of its own:

* `cycle_lock` — one cycle at a time (the periodic cycle skips while another runs, an urgent node cycle waits);
* `rule_config` — the catalog rows, per-pool effective settings and the Xid policy table;
* `facts` — everything the rules read, in a constant number of queries;
* `hysteresis` — the pending → open → resolved state machine, deciding a `ChangeSet`;
* `finding_routing` — who is responsible for each open finding and what to do;
* `finding_writes` — the bulk writes that apply the `ChangeSet`.

The whole cycle is one transaction, so a failure anywhere leaves the state as the previous cycle left it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from fleet.core.runtime import cyclic_gc_paused
from fleet.inventory.choices import NodeState

from ..exceptions import EvaluationConflict
from ..rules.catalog import RULES, RULES_BY_SLUG
from ..rules.facts import NodeFacts
from .cycle_lock import ADVISORY_LOCK_KEY, cycle_lock_acquire
from .facts import facts_load
from .finding_routing import findings_route
from .finding_writes import cycle_changes_write
from .hysteresis import Hysteresis, StateKey
from .rule_config import CycleConfig, RuleConfig

if TYPE_CHECKING:
    from ..models import Rule
    from ..rules.base import RuleDefinition

# The lock key is part of this module's interface: a session that holds it keeps cycles from running.
__all__ = ["ADVISORY_LOCK_KEY", "NODE_CYCLE_LOCK_TIMEOUT", "EvaluationResult", "evaluate"]

logger = logging.getLogger(__name__)

# How long an urgent node cycle waits for a running cycle before its task retries.
NODE_CYCLE_LOCK_TIMEOUT = "30s"


@dataclass
class EvaluationResult:
    nodes: int = 0
    opened: int = 0
    updated: int = 0
    resolved: int = 0
    pending: int = 0
    queries: int = 0
    duration_ms: float = 0.0
    skipped: bool = False
    opened_ids: list[int] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


class _QueryCounter:
    def __init__(self):
        self.count = 0

    def __call__(self, execute, sql, params, many, context):
        self.count += 1
        return execute(sql, params, many, context)


def evaluate(*, node_ids: list[int] | None = None, now: datetime | None = None) -> EvaluationResult:
    """Evaluate every rule on the given nodes (the whole fleet when None) at `now` (default: the clock)."""
    now = now or timezone.now()
    if node_ids is not None:
        node_ids = sorted({int(n) for n in node_ids})
    counter = _QueryCounter()
    started = time.perf_counter()
    with connection.execute_wrapper(counter), cyclic_gc_paused():
        try:
            with transaction.atomic():
                wait_timeout = NODE_CYCLE_LOCK_TIMEOUT if node_ids is not None else None
                if not cycle_lock_acquire(wait_timeout=wait_timeout):
                    result = EvaluationResult(skipped=True)
                else:
                    result = _cycle_run(node_ids=node_ids, now=now)
        except IntegrityError as exc:
            raise EvaluationConflict(str(exc)) from exc
    result.queries = counter.count
    result.duration_ms = round((time.perf_counter() - started) * 1000, 1)
    level = logging.INFO if result.opened or result.resolved else logging.DEBUG
    logger.log(level, "health evaluation: %s", result.as_dict() | {"opened_ids": len(result.opened_ids)})
    return result


def _cycle_run(*, node_ids: list[int] | None, now: datetime) -> EvaluationResult:
    config = CycleConfig.load(now=now)
    windows, gpu_filter, annotations = config.fact_windows()
    facts = facts_load(node_ids=node_ids, now=now, windows=windows, gpu_filter=gpu_filter,
                       gpu_annotations=annotations, needs_gpu_summary=config.gpu_summary_needed())
    for definition in RULES:  # fleet aggregates some checks compare a node against (no queries)
        fleet_config = config.for_pool(definition.slug, None)
        if definition.prepare is not None and fleet_config is not None and fleet_config.enabled:
            definition.prepare(facts, fleet_config.params, config.ctx, node_ids is not None)
    state = Hysteresis.load(node_ids=node_ids, now=now)
    active = state.active_keys()
    active_nodes = {node_id for _, node_id in active}
    plans: dict[tuple, list[_PlanEntry]] = {}
    ctx = config.ctx
    evaluated = 0
    for node in facts.values():
        if node.state == NodeState.RETIRED:
            continue
        evaluated += 1
        node_id, silent, nvml_ok = node.id, node.silent, node.nvml_ok
        # Rules a node cannot answer (it is silent, NVML is down, no GPU row is a candidate) are left out of its
        # plan unless it has state to clear; the plans are built once per combination, not per node.
        has_state = node_id in active_nodes
        shape = (node.pool_id, silent, nvml_ok, has_state or bool(node.candidate_gpus))
        plan = plans.get(shape)
        if plan is None:
            plan = plans[shape] = _plan(config, *shape)
        for check, params, entry in plan:  # the hot loop: a healthy node's checks mostly return [] or None
            try:
                observations = check(node, params, ctx)
            except Exception:
                logger.exception("rule %s failed on node %s; treated as unknown", entry.definition.slug, node_id)
                continue
            if observations is None or not (observations or has_state):
                continue
            key = (entry.rule_id, node_id)
            if observations or key in active:
                state.observe(key, node, entry.definition, entry.row, entry.rule_config, observations)
                active.discard(key)
    _force_clear(state, active, facts, config)
    findings_route(findings=state.changes.to_route, facts=facts)
    created = cycle_changes_write(changes=state.changes, now=now)
    return EvaluationResult(nodes=evaluated, opened=len(created), updated=state.updated, resolved=state.resolved,
                            pending=state.pending, opened_ids=[f.pk for f in created if f.pk is not None])


class _PlanEntry(NamedTuple):
    definition: RuleDefinition
    rule_id: int
    row: Rule
    rule_config: RuleConfig


def _plan(config: CycleConfig, pool_id: int | None, silent: bool, nvml_ok: bool, any_candidate: bool
          ) -> list[tuple[Callable, dict, _PlanEntry]]:
    """The rules that run on a pool's nodes of this shape, in catalog order, with their effective settings: a
    rule that needs a report skips silent nodes, one that needs NVML nodes where it failed, and a GPU rule that
    only candidate rows can make true nodes with none (`any_candidate`: or with state to clear)."""
    plan = []
    for definition in RULES:
        if (definition.needs_report and silent) or (definition.needs_nvml and not nvml_ok) or (
                definition.candidates_only and not any_candidate):
            continue
        row, rule_config = config.rows.get(definition.slug), config.for_pool(definition.slug, pool_id)
        if row is not None and rule_config is not None and rule_config.enabled:
            plan.append((definition.check, rule_config.params, _PlanEntry(definition, row.pk, row, rule_config)))
    return plan


def _force_clear(state: Hysteresis, keys: set[StateKey], facts: dict[int, NodeFacts], config: CycleConfig) -> None:
    """State left for rules that are disabled (for the node's pool or fleet-wide), gone from the catalog, or
    for retired nodes: resolve at once, whatever the clear-hold."""
    for key in keys:
        rule_id, node_id = key
        node, row = facts.get(node_id), config.rows_by_id.get(rule_id)
        if node is not None and node.state == NodeState.RETIRED:
            reason = "node retired"
        elif row is None or row.slug not in RULES_BY_SLUG:
            reason = "rule removed from the catalog"
        elif node is None:
            continue
        else:
            rule_config = config.for_pool(row.slug, node.pool_id)
            if rule_config is not None and rule_config.enabled:
                continue  # the rule could not tell this cycle: keep the state
            reason = "rule disabled" + (" for this pool" if rule_config is not None and rule_config.overridden else "")
        state.resolve_now(key, reason)
