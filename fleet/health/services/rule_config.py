"""What a cycle is configured with: the catalog rows, each rule's effective settings per pool (fleet-wide
values with the pool's `RuleOverride` on top), the Xid policy table, and what those settings ask of the
fact loader (how far back to read events, which GPU rows any enabled rule can match).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q

from ..models import Rule, RuleOverride, XidPolicy
from ..rules.base import RuleDefinition
from ..rules.catalog import RULES_BY_SLUG, sync_rule_rows
from ..rules.facts import EvalContext, NodeFacts
from ..xid_seed import seed_xid_policies
from .facts import FactWindows

logger = logging.getLogger(__name__)

# The parameter that sets each event rule's look-back, and the escalation rule's long windows.
EVENT_WINDOW_PARAMS = {"xid": "window_s", "gpu_lost": "window_s", "sxid_fatal": "window_s",
                       "preemption_notice": "window_s", "silent_spot_node": "notice_lookback_s"}
HISTORY_WINDOW_PARAMS = {"xid_escalation": ("recurrence_window_s", "fatal_window_s"),
                         "requested_disruption": ("window_s",)}  # reads the change log of that window
DIAG_WINDOW_PARAMS = {"dcgm_diag_failed": "window_s"}
_POLICY_FIELDS = ["code", "meaning", "severity", "action", "layer", "escalation", "changed_in_version"]


@dataclass(frozen=True, slots=True)
class RuleConfig:
    """A rule's effective settings for one pool: fleet-wide values with the pool's override on top."""

    enabled: bool
    params: dict
    duration_s: int
    clear_hold_s: int
    severity: str
    overridden: bool = False


def rule_configs(rows: list[Rule], overrides: list[RuleOverride]) -> dict[tuple[str, int | None], RuleConfig]:
    """Effective config per (rule slug, pool id); pool None is the fleet-wide config."""
    configs: dict[tuple[str, int | None], RuleConfig] = {}
    by_id = {}
    for row in rows:
        definition = RULES_BY_SLUG.get(row.slug)
        if definition is None:
            continue
        params = {**definition.default_params(), **_valid_params(definition, row.params)}
        configs[(row.slug, None)] = RuleConfig(row.enabled, params, row.duration_s, row.clear_hold_s, row.severity)
        by_id[row.pk] = (row, definition)
    for override in overrides:
        if override.rule_id not in by_id:
            continue
        row, definition = by_id[override.rule_id]
        base = configs[(row.slug, None)]
        configs[(row.slug, override.pool_id)] = RuleConfig(
            enabled=base.enabled if override.enabled is None else override.enabled,
            params={**base.params, **_valid_params(definition, override.params)},
            duration_s=base.duration_s if override.duration_s is None else override.duration_s,
            clear_hold_s=base.clear_hold_s if override.clear_hold_s is None else override.clear_hold_s,
            severity=base.severity, overridden=True)
    return configs


def _valid_params(definition: RuleDefinition, values) -> dict:
    """Stored parameters that still validate (a value edited in the admin past the API is ignored, not fatal)."""
    cleaned, errors = definition.clean_params(values or {})
    if errors:
        logger.warning("rule %s: ignoring invalid stored parameters %s", definition.slug, sorted(errors))
    return cleaned


class CycleConfig:
    """The configuration one cycle reads once, at its start (three queries in the usual case)."""

    def __init__(self, *, rows: list[Rule], configs: dict[tuple[str, int | None], RuleConfig], ctx: EvalContext):
        self.rows = {row.slug: row for row in rows}
        self.rows_by_id = {row.pk: row for row in rows}
        self.configs = configs
        self.ctx = ctx

    @classmethod
    def load(cls, *, now: datetime) -> CycleConfig:
        rows = list(Rule.objects.all())
        if set(RULES_BY_SLUG) - {r.slug for r in rows}:
            sync_rule_rows(Rule)
            rows = list(Rule.objects.all())
        configs = rule_configs(rows, list(RuleOverride.objects.all()))
        policies = list(XidPolicy.objects.values(*_POLICY_FIELDS))
        if not policies:  # an emptied table (a flushed test database, a botched restore) falls back to the seed
            seed_xid_policies(XidPolicy)
            policies = list(XidPolicy.objects.values(*_POLICY_FIELDS))
        ctx = EvalContext(now=now, xid_policies={p["code"]: p for p in policies},
                          xid_version=max((p["changed_in_version"] for p in policies), default=None))
        return cls(rows=rows, configs=configs, ctx=ctx)

    def for_pool(self, slug: str, pool_id: int | None) -> RuleConfig | None:
        return self.configs.get((slug, pool_id)) or self.configs.get((slug, None))

    def fact_windows(self) -> tuple[FactWindows, Q | None, dict]:
        """The event windows the enabled rules need (their widest settings in any pool), and the union of the
        enabled GPU rules' SQL prefilters with the annotations those filters use."""
        enabled = [(slug, c) for (slug, _pool), c in self.configs.items() if c.enabled]
        events_s = max([c.params[EVENT_WINDOW_PARAMS[s]] for s, c in enabled if s in EVENT_WINDOW_PARAMS]
                       or [0])
        history_s = max([c.params[p] for s, c in enabled if s in HISTORY_WINDOW_PARAMS
                         for p in HISTORY_WINDOW_PARAMS[s]] or [0])
        diag_s = max([c.params[DIAG_WINDOW_PARAMS[s]] for s, c in enabled if s in DIAG_WINDOW_PARAMS] or [0])
        gpu_filter, annotations = None, {}
        for slug, config in enabled:
            definition = RULES_BY_SLUG[slug]
            if definition.gpu_candidates is None:
                continue
            q = definition.gpu_candidates(config.params)
            gpu_filter = q if gpu_filter is None else gpu_filter | q
            annotations.update(definition.gpu_annotations)
        return (FactWindows(events_s=events_s, history_s=max(history_s, events_s), diag_s=diag_s), gpu_filter,
                annotations)

    def gpu_summary_needed(self) -> Callable[[NodeFacts], bool]:
        """The GPU aggregate feeds the input-bound check (CPU-saturated nodes only) and the GPU count when the
        report has none."""
        floors = [c.params["cpu_busy_pct"] for (slug, _pool), c in self.configs.items()
                  if slug == "data_pipeline_bottleneck" and c.enabled]
        floor = min(floors) if floors else None

        def needs(node: NodeFacts) -> bool:
            status = node.status
            if status is None:
                return False
            if status.get("gpu_count_seen") is None:
                return True
            return floor is not None and (status.get("cpu_busy_pct") or 0) > floor

        return needs
