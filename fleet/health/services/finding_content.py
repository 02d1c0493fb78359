"""What a finding says: its fields and evidence, filled from a rule's observation and the rule's settings."""

from __future__ import annotations

from datetime import date, datetime

from fleet.core.i18n import Msg, as_json, text

from ..models import Finding
from ..rules.base import Observation, RuleDefinition
from .rule_config import RuleConfig

# The fields a cycle may change on a finding that stays open; equal before and after means "seen again".
CONTENT_FIELDS = ["gpu_id", "layer", "severity", "summary", "summary_msg", "evidence", "xid_policy_version",
                  "responsible_party", "responsibility_source", "action_kind", "recommended_action", "action_msg"]


def finding_content(finding: Finding) -> tuple:
    return tuple(getattr(finding, name) for name in CONTENT_FIELDS)


def finding_fill(*, finding: Finding, observation: Observation, definition: RuleDefinition,
                 config: RuleConfig) -> None:
    """Layer, severity, summary and evidence from the observation; routing is added later in the cycle."""
    finding.layer = observation.layer or definition.layer
    finding.severity = observation.severity or config.severity
    finding.summary = text(observation.summary)[:500]
    finding.summary_msg = as_json(observation.summary)
    finding.xid_policy_version = observation.xid_policy_version
    remedy = observation.remedy or (Msg.known(definition.remedy) if definition.remedy else "")
    finding.evidence = _jsonable({
        "summary": text(observation.summary), "summary_msg": finding.summary_msg, "since": observation.since,
        "values": observation.values, "log_lines": observation.log_lines,
        "rule": {"slug": definition.slug, "title": definition.title, "params": config.params,
                 "duration_s": config.duration_s, "clear_hold_s": config.clear_hold_s,
                 "pool_override": config.overridden},
        "remedy": text(remedy), "remedy_msg": as_json(remedy),
        "xid_policy_version": observation.xid_policy_version,
        "explains": [e.as_dict() for e in (observation.explains if observation.explains is not None
                                             else definition.explains)],
        "escalated": observation.escalated,
    })


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime | date):
        return value.isoformat()
    return value
