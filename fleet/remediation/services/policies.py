"""Remediation policies: which finding opens which workflow. Writes bump the table version and are audited,
like the Xid policy table; matching is first-match in priority order."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.db.models import Max

from fleet.core.models import AuditEntry
from fleet.core.services import audit_record

from ..models import RemediationPolicy

MATCH_LIST_FIELDS = ["rules", "xid_codes", "xid_actions", "severities", "layers", "parties", "delivery_forms",
                     "billing_modes"]
POLICY_FIELDS = ["name", "priority", "enabled", *MATCH_LIST_FIELDS, "provider", "pool", "min_recent_remediations",
                 "workflow", "note"]


@dataclass(frozen=True)
class MatchFacts:
    """What a policy can match on, taken from a finding and its node."""

    rule: str
    xid_codes: frozenset[int]
    xid_action: str
    severity: str
    layer: str
    party: str
    delivery_form: str
    billing_mode: str
    provider_id: int | None
    pool_id: int | None
    recent_remediations: int

    def as_dict(self) -> dict:
        return {"rule": self.rule, "xid_codes": sorted(self.xid_codes), "xid_action": self.xid_action,
                "severity": self.severity, "layer": self.layer, "party": self.party,
                "delivery_form": self.delivery_form, "billing_mode": self.billing_mode,
                "provider": self.provider_id, "pool": self.pool_id, "recent_remediations": self.recent_remediations}


def finding_xid_codes(finding) -> frozenset[int]:
    values = (finding.evidence or {}).get("values") or {}
    codes = set()
    if isinstance(values.get("code"), int):
        codes.add(values["code"])
    for item in values.get("recurring") or []:
        if isinstance(item, dict) and isinstance(item.get("code"), int):
            codes.add(item["code"])
    codes.update(c for c in values.get("fatal_codes") or [] if isinstance(c, int))
    return frozenset(codes)


def policy_matches(policy: RemediationPolicy, facts: MatchFacts) -> bool:
    single = {"rules": facts.rule, "xid_actions": facts.xid_action, "severities": facts.severity,
              "layers": facts.layer, "parties": facts.party, "delivery_forms": facts.delivery_form,
              "billing_modes": facts.billing_mode}
    for name, value in single.items():
        allowed = getattr(policy, name)
        if allowed and value not in allowed:
            return False
    if policy.xid_codes and not (set(policy.xid_codes) & facts.xid_codes):
        return False
    if policy.provider_id is not None and policy.provider_id != facts.provider_id:
        return False
    if policy.pool_id is not None and policy.pool_id != facts.pool_id:
        return False
    return policy.min_recent_remediations is None or facts.recent_remediations >= policy.min_recent_remediations


def policy_match(facts: MatchFacts) -> RemediationPolicy | None:
    """The first enabled policy (lowest priority number, then oldest) whose every set field matches."""
    for policy in RemediationPolicy.objects.filter(enabled=True).select_related("workflow").order_by("priority", "id"):
        if policy_matches(policy, facts):
            return policy
    return None


def policy_table_version() -> int:
    return RemediationPolicy.objects.aggregate(v=Max("changed_in_version"))["v"] or 0


def policy_snapshot(policy: RemediationPolicy) -> dict:
    data = {name: getattr(policy, name) for name in POLICY_FIELDS if name not in ("provider", "pool", "workflow")}
    data.update(id=policy.pk, provider=policy.provider_id, pool=policy.pool_id,
                workflow=policy.workflow.slug if policy.workflow_id else None,
                changed_in_version=policy.changed_in_version)
    return data


def policy_save(*, data: dict, actor, policy: RemediationPolicy | None = None) -> RemediationPolicy:
    """Create (`policy` None) or change one policy from validated `data`. The table is locked while the new
    version is taken, so two concurrent edits get two versions."""
    with transaction.atomic():
        list(RemediationPolicy.objects.select_for_update().values_list("pk", flat=True))
        version = policy_table_version() + 1
        before = policy_snapshot(policy) if policy is not None else None
        if policy is None:
            policy = RemediationPolicy(**{k: v for k, v in data.items() if k in POLICY_FIELDS})
        else:
            for name, value in data.items():
                if name in POLICY_FIELDS:
                    setattr(policy, name, value)
        policy.changed_in_version = version
        policy.save()
        audit_record(actor=actor, action=AuditEntry.Action.UPDATE if before else AuditEntry.Action.CREATE,
                     instance=policy, before=before, after=policy_snapshot(policy),
                     note=f"remediation policy table v{version}")
    return policy
