"""The pending → open → resolved state machine of one cycle.

A condition first seen at T opens a finding only once it has held until T + the rule's duration, and an open
finding resolves only after its condition stayed clear for the rule's clear-hold period. The state lives in
`HealthCondition` rows so it survives across cycles and workers. A rule that cannot tell (missing data, silent
node, NVML down) is never shown to the machine, so its state stays as it is.

The machine only reads (the conditions and open findings of the nodes in the cycle); every change it decides
goes into a `ChangeSet` that `finding_writes.cycle_changes_write` applies in bulk.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from fleet.core.i18n import as_json, text

from ..choices import FindingState
from ..models import Finding, HealthCondition, Rule
from ..rules.base import Observation, RuleDefinition
from ..rules.facts import NodeFacts
from .finding_content import finding_content, finding_fill
from .rule_config import RuleConfig

# (rule id, node id): the unit a rule is evaluated on; its subjects are the node itself, its GPUs, its Xids, …
StateKey = tuple[int, int]


@dataclass
class ChangeSet:
    """Everything a cycle decided to write, collected so the writes can be a few bulk statements."""

    conditions_new: list[HealthCondition] = field(default_factory=list)
    conditions_changed: list[HealthCondition] = field(default_factory=list)
    conditions_gone: list[int] = field(default_factory=list)
    findings_new: list[Finding] = field(default_factory=list)
    findings_changed: dict[int, Finding] = field(default_factory=dict)
    # Content of each changed open finding before this cycle touched it (`finding_content`).
    findings_before: dict[int, tuple] = field(default_factory=dict)
    # Findings that are open after this cycle (new or still true), with their rule: they get routed.
    to_route: list[tuple[Finding, RuleDefinition]] = field(default_factory=list)


class Hysteresis:
    def __init__(self, *, now: datetime, conditions: list[HealthCondition], open_findings: list[Finding]):
        self.now = now
        self.changes = ChangeSet()
        self.updated = self.pending = self.resolved = 0
        self.conditions: dict[StateKey, dict[str, HealthCondition]] = {}
        for condition in conditions:
            self.conditions.setdefault((condition.rule_id, condition.node_id), {})[condition.subject] = condition
        self.open_findings: dict[StateKey, dict[str, Finding]] = {}
        for finding in open_findings:
            self.open_findings.setdefault((finding.rule_id, finding.node_id), {})[finding.subject] = finding

    @classmethod
    def load(cls, *, node_ids: list[int] | None, now: datetime) -> Hysteresis:
        """The condition rows and open findings of the given nodes (the whole fleet when None): two queries."""
        conditions = HealthCondition.objects.order_by()
        findings = Finding.objects.filter(state=FindingState.OPEN).order_by()
        if node_ids is not None:
            conditions = conditions.filter(node_id__in=node_ids)
            findings = findings.filter(node_id__in=node_ids)
        return cls(now=now, conditions=list(conditions), open_findings=list(findings))

    def active_keys(self) -> set[StateKey]:
        """Keys with state to carry: a rule that reports nothing for them must still be shown them, to clear."""
        return set(self.conditions) | set(self.open_findings)

    def observe(self, key: StateKey, node: NodeFacts, definition: RuleDefinition, row: Rule, config: RuleConfig,
                observations: list[Observation]) -> None:
        """The rule could tell: `observations` are the subjects true now, every other subject of `key` is clear."""
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
                                            summary=text(observation.summary)[:500],
                                            summary_msg=as_json(observation.summary))
                self.changes.conditions_new.append(condition)
            elif condition.first_false_at is not None:
                condition.first_false_at = None
                self.changes.conditions_changed.append(condition)
            finding = findings.get(subject)
            if finding is not None:
                self._refresh(finding, observation, definition, config)
                self.updated += 1
                continue
            started = min(condition.first_true_at, observation.since) if observation.since else \
                condition.first_true_at
            if now - started >= timedelta(seconds=config.duration_s):
                self._open(node, observation, definition, row, config, started)
            else:
                self.pending += 1
        for subject in (set(conditions) | set(findings)) - true_subjects:
            self._clear(conditions.get(subject), findings.get(subject), row, node.id, config.clear_hold_s)

    def resolve_now(self, key: StateKey, reason: str) -> None:
        """Drop the state of `key` and resolve its open findings at once, whatever the clear-hold."""
        for condition in self.conditions.get(key, {}).values():
            self.changes.conditions_gone.append(condition.pk)
        for finding in self.open_findings.get(key, {}).values():
            self._resolve(finding, reason)

    def _clear(self, condition: HealthCondition | None, finding: Finding | None, row: Rule, node_id: int,
               clear_hold_s: int) -> None:
        now, changes = self.now, self.changes
        if finding is None:
            if condition is not None and condition.pk:
                changes.conditions_gone.append(condition.pk)  # pending that never matured: start over next time
            return
        if condition is None:
            condition = HealthCondition(rule_id=row.pk, node_id=node_id, gpu_id=finding.gpu_id,
                                        subject=finding.subject, first_true_at=finding.first_seen,
                                        first_false_at=now, summary=finding.summary,
                                        summary_msg=finding.summary_msg)
            changes.conditions_new.append(condition)
        elif condition.first_false_at is None:
            condition.first_false_at = now
            changes.conditions_changed.append(condition)
        if now - condition.first_false_at >= timedelta(seconds=clear_hold_s):
            held = int((now - condition.first_false_at).total_seconds())
            self._resolve(finding, f"condition clear for {held} s (clear-hold {clear_hold_s} s)")
            if condition.pk:
                changes.conditions_gone.append(condition.pk)
            elif condition in changes.conditions_new:
                changes.conditions_new.remove(condition)

    def _open(self, node: NodeFacts, observation: Observation, definition: RuleDefinition, row: Rule,
              config: RuleConfig, started: datetime) -> None:
        finding = Finding(rule_id=row.pk, node_id=node.id, gpu_id=observation.gpu_id, subject=observation.subject,
                          state=FindingState.OPEN, step=definition.step, first_seen=started, opened_at=self.now,
                          last_seen=self.now)
        finding_fill(finding=finding, observation=observation, definition=definition, config=config)
        self.changes.findings_new.append(finding)
        self.changes.to_route.append((finding, definition))

    def _refresh(self, finding: Finding, observation: Observation, definition: RuleDefinition,
                 config: RuleConfig) -> None:
        self.changes.findings_before.setdefault(finding.pk, finding_content(finding))
        finding.last_seen = self.now
        if observation.gpu_id is not None:
            finding.gpu_id = observation.gpu_id
        finding_fill(finding=finding, observation=observation, definition=definition, config=config)
        self.changes.findings_changed[finding.pk] = finding
        self.changes.to_route.append((finding, definition))

    def _resolve(self, finding: Finding, reason: str) -> None:
        finding.state = FindingState.RESOLVED
        finding.resolved_at = self.now
        finding.resolution = reason[:200]
        self.changes.findings_changed[finding.pk] = finding
        self.resolved += 1
