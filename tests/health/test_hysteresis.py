"""The pending → open → resolved state machine on its own, without a database: what it decides to write."""

from datetime import timedelta

from fleet.health.models import Finding, HealthCondition, Rule
from fleet.health.rules.base import Observation
from fleet.health.rules.catalog import RULES_BY_SLUG
from fleet.health.rules.facts import NodeFacts
from fleet.health.services.finding_content import finding_content
from fleet.health.services.hysteresis import Hysteresis
from fleet.health.services.rule_config import RuleConfig

from .factories import T0

RULE = Rule(pk=3, slug="tcp_retransmits")
DEFINITION = RULES_BY_SLUG["tcp_retransmits"]
CONFIG = RuleConfig(enabled=True, params={"threshold_pct": 1.0}, duration_s=60, clear_hold_s=120, severity="warning")
NODE = NodeFacts(id=11, hostname="gpu-11", provider_id=1, delivery_form="cloud_dedicated")
KEY = (RULE.pk, NODE.id)
TRUE = [Observation(summary="TCP retransmits 5.00 %", values={"tcp_retrans_pct": 5.0})]


def _observe(now, observations, *, conditions=(), findings=()) -> Hysteresis:
    machine = Hysteresis(now=now, conditions=list(conditions), open_findings=list(findings))
    machine.observe(KEY, NODE, DEFINITION, RULE, CONFIG, observations)
    return machine


def _condition(**fields) -> HealthCondition:
    return HealthCondition(pk=21, rule_id=RULE.pk, node_id=NODE.id, subject="node", **fields)


def _open_finding() -> Finding:
    return Finding(pk=31, rule_id=RULE.pk, node_id=NODE.id, subject="node", state="open", first_seen=T0,
                   opened_at=T0 + timedelta(seconds=60), last_seen=T0 + timedelta(seconds=60),
                   summary="TCP retransmits 5.00 %")


def test_a_new_condition_is_pending_and_written_once():
    machine = _observe(T0, TRUE + TRUE)
    assert machine.pending == 1
    (condition,) = machine.changes.conditions_new
    assert (condition.subject, condition.first_true_at, condition.first_false_at) == ("node", T0, None)
    assert not machine.changes.findings_new


def test_a_condition_held_for_the_duration_opens_a_finding_to_route():
    machine = _observe(T0 + timedelta(seconds=60), TRUE, conditions=[_condition(first_true_at=T0)])
    (finding,) = machine.changes.findings_new
    assert (finding.first_seen, finding.opened_at, finding.state) == (T0, T0 + timedelta(seconds=60), "open")
    assert (finding.layer, finding.severity, finding.step) == (DEFINITION.layer, "warning", DEFINITION.step)
    assert finding.evidence["rule"]["duration_s"] == 60
    assert machine.changes.to_route == [(finding, DEFINITION)]
    assert machine.pending == 0


def test_the_evidence_start_counts_when_it_is_earlier():
    since = T0 - timedelta(seconds=90)
    machine = _observe(T0, [Observation(summary="Xid 79", since=since)])
    (finding,) = machine.changes.findings_new
    assert finding.first_seen == since


def test_an_open_finding_resolves_only_after_the_clear_hold():
    first_clear = T0 + timedelta(seconds=200)
    machine = _observe(first_clear, [], conditions=[_condition(first_true_at=T0)], findings=[_open_finding()])
    (condition,) = machine.changes.conditions_changed
    assert condition.first_false_at == first_clear
    assert machine.resolved == 0 and not machine.changes.findings_changed

    later = first_clear + timedelta(seconds=120)
    machine = _observe(later, [], conditions=[_condition(first_true_at=T0, first_false_at=first_clear)],
                       findings=[_open_finding()])
    finding = machine.changes.findings_changed[31]
    assert (finding.state, finding.resolved_at) == ("resolved", later)
    assert finding.resolution == "condition clear for 120 s (clear-hold 120 s)"
    assert machine.changes.conditions_gone == [21]


def test_a_seen_again_finding_keeps_its_content_before_the_cycle():
    finding = _open_finding()
    machine = _observe(T0 + timedelta(seconds=300), TRUE, conditions=[_condition(first_true_at=T0)],
                       findings=[finding])
    assert machine.updated == 1
    assert machine.changes.findings_changed == {31: finding}
    assert finding.last_seen == T0 + timedelta(seconds=300)
    assert machine.changes.findings_before[31] == finding_content(_open_finding())
    assert finding_content(finding) != finding_content(_open_finding())  # the evidence was filled in


def test_resolve_now_drops_the_state_whatever_the_clear_hold():
    machine = Hysteresis(now=T0, conditions=[_condition(first_true_at=T0)], open_findings=[_open_finding()])
    machine.resolve_now(KEY, "rule disabled")
    assert machine.changes.conditions_gone == [21]
    assert machine.changes.findings_changed[31].resolution == "rule disabled"
    assert machine.resolved == 1
