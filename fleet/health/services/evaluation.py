"""One evaluation cycle: load facts in bulk, run every rule, move conditions and findings through hysteresis.

Hysteresis: a condition first seen at T opens a finding only once it has held until T + the rule's duration,
and an open finding resolves only after its condition stayed clear for the rule's clear-hold period. The
state lives in `HealthCondition` rows so it survives across cycles and workers. A rule that cannot tell
(missing data, silent node, NVML down) leaves the state as it is.

Overlapping cycles: PostgreSQL takes a transaction-level advisory lock (the periodic cycle skips when another
cycle holds it, an urgent node cycle waits); SQLite's IMMEDIATE transactions serialise writers. A partial unique
constraint on open findings backs both up.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, timedelta

from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from fleet.inventory.choices import NodeState
from fleet.inventory.models import Node, Provider
from fleet.inventory.selectors import boundary_matrices

from ..choices import FindingState
from ..exceptions import EvaluationConflict
from ..models import Finding, HealthCondition, Rule, RuleOverride, XidPolicy
from ..routing import route
from ..rules.base import Observation, RuleDefinition
from ..rules.catalog import RULES, RULES_BY_SLUG, sync_rule_rows
from ..rules.facts import EvalContext, NodeFacts
from ..xid_seed import seed_xid_policies
from .facts import FactWindows, facts_load

logger = logging.getLogger(__name__)

# pg_advisory lock key: "fleet.health.evaluate" folded into a signed 64-bit integer.
ADVISORY_LOCK_KEY = 0x6865616C74680001
NODE_CYCLE_LOCK_TIMEOUT = "30s"
EVENT_WINDOW_PARAMS = {"xid": "window_s", "gpu_lost": "window_s", "sxid_fatal": "window_s",
                       "preemption_notice": "window_s", "silent_spot_node": "notice_lookback_s"}
HISTORY_WINDOW_PARAMS = {"xid_escalation": ("recurrence_window_s", "fatal_window_s")}


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


@dataclass(frozen=True, slots=True)
class RuleConfig:
    """A rule's effective settings for one pool: fleet-wide values with the pool's override on top."""

    enabled: bool
    params: dict
    duration_s: int
    clear_hold_s: int
    severity: str
    overridden: bool = False


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
    with connection.execute_wrapper(counter):
        try:
            with transaction.atomic():
                if not _cycle_lock(wait=node_ids is not None):
                    result = EvaluationResult(skipped=True)
                else:
                    result = _Cycle(node_ids=node_ids, now=now).run()
        except IntegrityError as exc:
            raise EvaluationConflict(str(exc)) from exc
    result.queries = counter.count
    result.duration_ms = round((time.perf_counter() - started) * 1000, 1)
    level = logging.INFO if result.opened or result.resolved else logging.DEBUG
    logger.log(level, "health evaluation: %s", result.as_dict() | {"opened_ids": len(result.opened_ids)})
    return result


def _cycle_lock(*, wait: bool) -> bool:
    if connection.vendor != "postgresql":
        return True  # SQLite: the IMMEDIATE transaction already holds the database's write lock
    with connection.cursor() as cursor:
        if wait:
            cursor.execute(f"SET LOCAL lock_timeout = '{NODE_CYCLE_LOCK_TIMEOUT}'")
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [ADVISORY_LOCK_KEY])
            return True
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [ADVISORY_LOCK_KEY])
        return bool(cursor.fetchone()[0])


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


_CONTENT_FIELDS = ["gpu_id", "layer", "severity", "summary", "evidence", "xid_policy_version", "responsible_party",
                   "responsibility_source", "action_kind", "recommended_action"]


def _content(finding: Finding) -> tuple:
    return tuple(getattr(finding, name) for name in _CONTENT_FIELDS)


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    return value


class _Cycle:
    def __init__(self, *, node_ids: list[int] | None, now: datetime):
        self.node_ids = node_ids
        self.now = now
        self.result = EvaluationResult()
        self.conditions_new: list[HealthCondition] = []
        self.conditions_changed: list[HealthCondition] = []
        self.conditions_gone: list[int] = []
        self.findings_new: list[tuple[Finding, Observation, RuleDefinition]] = []
        self.findings_changed: dict[int, Finding] = {}
        self.findings_before: dict[int, tuple] = {}
        self.to_route: list[tuple[Finding, Observation | None, RuleDefinition]] = []

    # --- loading ------------------------------------------------------------------------------------------
    def _load_catalog(self) -> None:
        rows = list(Rule.objects.all())
        if set(RULES_BY_SLUG) - {r.slug for r in rows}:
            sync_rule_rows(Rule)
            rows = list(Rule.objects.all())
        self.rows = {row.slug: row for row in rows}
        self.rows_by_id = {row.pk: row for row in rows}
        self.configs = rule_configs(rows, list(RuleOverride.objects.all()))
        policy_fields = ["code", "meaning", "severity", "action", "layer", "escalation", "changed_in_version"]
        policies = list(XidPolicy.objects.values(*policy_fields))
        if not policies:  # an emptied table (a flushed test database, a botched restore) falls back to the seed
            seed_xid_policies(XidPolicy)
            policies = list(XidPolicy.objects.values(*policy_fields))
        self.ctx = EvalContext(now=self.now, xid_policies={p["code"]: p for p in policies},
                               xid_version=max((p["changed_in_version"] for p in policies), default=None))

    def config(self, slug: str, pool_id: int | None) -> RuleConfig | None:
        return self.configs.get((slug, pool_id)) or self.configs.get((slug, None))

    def _windows_and_filter(self) -> tuple[FactWindows, Q | None, dict]:
        enabled = [(slug, c) for (slug, _pool), c in self.configs.items() if c.enabled]
        events_s = max([c.params[EVENT_WINDOW_PARAMS[s]] for s, c in enabled if s in EVENT_WINDOW_PARAMS]
                       or [0])
        history_s = max([c.params[p] for s, c in enabled if s in HISTORY_WINDOW_PARAMS
                         for p in HISTORY_WINDOW_PARAMS[s]] or [0])
        gpu_filter, annotations = None, {}
        for slug, config in enabled:
            definition = RULES_BY_SLUG[slug]
            if definition.gpu_candidates is None:
                continue
            q = definition.gpu_candidates(config.params)
            gpu_filter = q if gpu_filter is None else gpu_filter | q
            annotations.update(definition.gpu_annotations)
        return FactWindows(events_s=events_s, history_s=max(history_s, events_s)), gpu_filter, annotations

    def _needs_gpu_summary(self):
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

    def _load_state(self) -> None:
        conditions = HealthCondition.objects.order_by()
        findings = Finding.objects.filter(state=FindingState.OPEN).order_by()
        if self.node_ids is not None:
            conditions = conditions.filter(node_id__in=self.node_ids)
            findings = findings.filter(node_id__in=self.node_ids)
        self.conditions: dict[tuple[int, int], dict[str, HealthCondition]] = {}
        for condition in conditions:
            self.conditions.setdefault((condition.rule_id, condition.node_id), {})[condition.subject] = condition
        self.open_findings: dict[tuple[int, int], dict[str, Finding]] = {}
        for finding in findings:
            self.open_findings.setdefault((finding.rule_id, finding.node_id), {})[finding.subject] = finding

    # --- the cycle ----------------------------------------------------------------------------------------
    def run(self) -> EvaluationResult:
        self._load_catalog()
        windows, gpu_filter, annotations = self._windows_and_filter()
        facts = facts_load(node_ids=self.node_ids, now=self.now, windows=windows, gpu_filter=gpu_filter,
                           gpu_annotations=annotations, needs_gpu_summary=self._needs_gpu_summary())
        self._load_state()
        active = set(self.conditions) | set(self.open_findings)
        plans: dict[int | None, list] = {}
        evaluated = 0
        for node in facts.values():
            if node.state == NodeState.RETIRED:
                continue
            evaluated += 1
            plan = plans.get(node.pool_id)
            if plan is None:
                plan = plans[node.pool_id] = self._plan(node.pool_id)
            silent, nvml_ok, has_candidates = node.silent, node.nvml_ok, bool(node.candidate_gpus)
            for definition, rule_id, row, config in plan:
                if (definition.needs_report and silent) or (definition.needs_nvml and not nvml_ok):
                    continue
                key = (rule_id, node.id)
                if definition.candidates_only and not has_candidates and key not in active:
                    continue  # a GPU rule with no candidate GPU on this node and nothing to clear
                try:
                    observations = definition.check(node, config.params, self.ctx)
                except Exception:
                    logger.exception("rule %s failed on node %s; treated as unknown", definition.slug, node.id)
                    continue
                if observations is None:
                    continue
                if observations or key in active:
                    self._transition(key, node, definition, row, config, observations)
                    active.discard(key)
        self._force_clear(active, facts)
        self.result.nodes = evaluated
        self._route(facts)
        self._write()
        return self.result

    def _plan(self, pool_id: int | None) -> list:
        plan = []
        for definition in RULES:
            row, config = self.rows.get(definition.slug), self.config(definition.slug, pool_id)
            if row is not None and config is not None and config.enabled:
                plan.append((definition, row.pk, row, config))
        return plan

    def _transition(self, key, node: NodeFacts, definition: RuleDefinition, row: Rule, config: RuleConfig,
                    observations: list[Observation]) -> None:
        now = self.now
        conditions = self.conditions.get(key, {})
        findings = self.open_findings.get(key, {})
        true_subjects = set()
        for observation in observations:
            subject = observation.subject
            if subject in true_subjects:
                continue
            true_subjects.add(subject)
            condition = conditions.get(subject)
            if condition is None:
                condition = HealthCondition(rule_id=row.pk, node_id=node.id, gpu_id=observation.gpu_id,
                                            subject=subject, first_true_at=now,
                                            summary=observation.summary[:500])
                self.conditions_new.append(condition)
            elif condition.first_false_at is not None:
                condition.first_false_at = None
                self.conditions_changed.append(condition)
            finding = findings.get(subject)
            if finding is not None:
                self._refresh(finding, observation, definition, config)
                self.result.updated += 1
                continue
            started = min(condition.first_true_at, observation.since) if observation.since else \
                condition.first_true_at
            if now - started >= timedelta(seconds=config.duration_s):
                self._open(node, observation, definition, row, config, started)
            else:
                self.result.pending += 1
        for subject in (set(conditions) | set(findings)) - true_subjects:
            self._clear(conditions.get(subject), findings.get(subject), row, node.id, config.clear_hold_s)

    def _clear(self, condition: HealthCondition | None, finding: Finding | None, row: Rule, node_id: int,
               clear_hold_s: int) -> None:
        now = self.now
        if finding is None:
            if condition is not None and condition.pk:
                self.conditions_gone.append(condition.pk)  # pending that never matured: start over next time
            return
        if condition is None:
            condition = HealthCondition(rule_id=row.pk, node_id=node_id, gpu_id=finding.gpu_id,
                                        subject=finding.subject, first_true_at=finding.first_seen,
                                        first_false_at=now, summary=finding.summary)
            self.conditions_new.append(condition)
        elif condition.first_false_at is None:
            condition.first_false_at = now
            self.conditions_changed.append(condition)
        if now - condition.first_false_at >= timedelta(seconds=clear_hold_s):
            held = int((now - condition.first_false_at).total_seconds())
            self._resolve(finding, f"condition clear for {held} s (clear-hold {clear_hold_s} s)")
            if condition.pk:
                self.conditions_gone.append(condition.pk)
            elif condition in self.conditions_new:
                self.conditions_new.remove(condition)

    def _force_clear(self, keys: set, facts: dict[int, NodeFacts]) -> None:
        """State left for rules that are disabled (for the node's pool or fleet-wide), gone from the catalog, or
        for retired nodes: resolve at once, whatever the clear-hold."""
        for rule_id, node_id in keys:
            node, row = facts.get(node_id), self.rows_by_id.get(rule_id)
            if node is not None and node.state == NodeState.RETIRED:
                reason = "node retired"
            elif row is None or row.slug not in RULES_BY_SLUG:
                reason = "rule removed from the catalog"
            elif node is None:
                continue
            else:
                config = self.config(row.slug, node.pool_id)
                if config is not None and config.enabled:
                    continue  # the rule could not tell this cycle: keep the state
                reason = "rule disabled" + (" for this pool" if config is not None and config.overridden else "")
            for condition in self.conditions.get((rule_id, node_id), {}).values():
                self.conditions_gone.append(condition.pk)
            for finding in self.open_findings.get((rule_id, node_id), {}).values():
                self._resolve(finding, reason)

    def _open(self, node: NodeFacts, observation: Observation, definition: RuleDefinition, row: Rule,
              config: RuleConfig, started: datetime) -> None:
        finding = Finding(rule_id=row.pk, node_id=node.id, gpu_id=observation.gpu_id, subject=observation.subject,
                          state=FindingState.OPEN, step=definition.step, first_seen=started, opened_at=self.now,
                          last_seen=self.now)
        self._fill(finding, observation, definition, config)
        self.findings_new.append((finding, observation, definition))
        self.to_route.append((finding, observation, definition))

    def _refresh(self, finding: Finding, observation: Observation, definition: RuleDefinition,
                 config: RuleConfig) -> None:
        self.findings_before.setdefault(finding.pk, _content(finding))
        finding.last_seen = self.now
        if observation.gpu_id is not None:
            finding.gpu_id = observation.gpu_id
        self._fill(finding, observation, definition, config)
        self.findings_changed[finding.pk] = finding
        self.to_route.append((finding, observation, definition))

    def _fill(self, finding: Finding, observation: Observation, definition: RuleDefinition,
              config: RuleConfig) -> None:
        finding.layer = observation.layer or definition.layer
        finding.severity = observation.severity or config.severity
        finding.summary = observation.summary[:500]
        finding.xid_policy_version = observation.xid_policy_version
        finding.evidence = _jsonable({
            "summary": observation.summary, "since": observation.since,
            "values": observation.values, "log_lines": observation.log_lines,
            "rule": {"slug": definition.slug, "title": definition.title, "params": config.params,
                     "duration_s": config.duration_s, "clear_hold_s": config.clear_hold_s,
                     "pool_override": config.overridden},
            "remedy": observation.remedy or definition.remedy,
            "xid_policy_version": observation.xid_policy_version,
        })

    def _resolve(self, finding: Finding, reason: str) -> None:
        finding.state = FindingState.RESOLVED
        finding.resolved_at = self.now
        finding.resolution = reason[:200]
        self.findings_changed[finding.pk] = finding
        self.result.resolved += 1

    # --- routing and writes -------------------------------------------------------------------------------
    def _route(self, facts: dict[int, NodeFacts]) -> None:
        if not self.to_route:
            return
        node_ids = {finding.node_id for finding, _, _ in self.to_route}
        nodes = [Node(pk=n, provider_id=facts[n].provider_id, delivery_form=facts[n].delivery_form) for n in node_ids]
        matrices = boundary_matrices(nodes=nodes)
        providers = dict(Provider.objects.filter(pk__in={n.provider_id for n in nodes}).values_list("pk", "name"))
        for finding, _observation, definition in self.to_route:
            node = facts[finding.node_id]
            routing = route(layer=finding.layer, cells=matrices[node.id], delivery_form=node.delivery_form,
                            provider_name=providers.get(node.provider_id, ""),
                            remedy=finding.evidence.get("remedy") or definition.remedy,
                            provider_initiated=definition.provider_initiated)
            finding.responsible_party = routing.party
            finding.responsibility_source = routing.source
            finding.action_kind = routing.action_kind
            finding.recommended_action = routing.action
            finding.evidence["routing"] = routing.as_dict()

    def _write(self) -> None:
        if self.conditions_gone:
            HealthCondition.objects.filter(pk__in=self.conditions_gone).delete()
        if self.conditions_new:
            HealthCondition.objects.bulk_create(self.conditions_new)
        changed_conditions = [c for c in {id(c): c for c in self.conditions_changed}.values()
                              if c.pk and c.pk not in set(self.conditions_gone)]
        if changed_conditions:
            HealthCondition.objects.bulk_update(changed_conditions, ["first_true_at", "first_false_at"])
        # A finding that is still true and says the same as before only moves its last_seen (one cheap UPDATE);
        # the expensive per-row rewrite is for findings whose content changed or that resolved.
        rewrite, seen_again = [], []
        for finding in self.findings_changed.values():
            if finding.state == FindingState.OPEN and self.findings_before.get(finding.pk) == _content(finding):
                seen_again.append(finding.pk)
            else:
                rewrite.append(finding)
        if seen_again:
            Finding.objects.filter(pk__in=seen_again).update(last_seen=self.now)
        if rewrite:
            Finding.objects.bulk_update(rewrite, [
                "state", "resolved_at", "resolution", "last_seen", "gpu", "layer", "severity", "summary",
                "evidence", "xid_policy_version", "responsible_party", "responsibility_source", "action_kind",
                "recommended_action"])
        if self.findings_new:
            created = Finding.objects.bulk_create([finding for finding, _, _ in self.findings_new])
            self.result.opened = len(created)
            self.result.opened_ids = [f.pk for f in created if f.pk is not None]

