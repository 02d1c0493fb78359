"""Writes to the Xid policy table: every change bumps the table version and lands in the audit log."""

from django.db import transaction
from django.db.models import Max

from fleet.core.models import AuditEntry
from fleet.core.services import audit_record

from ..models import XidPolicy

POLICY_FIELDS = ["code", "meaning", "severity", "action", "layer", "escalation"]


def xid_policy_table_version() -> int:
    return XidPolicy.objects.aggregate(v=Max("changed_in_version"))["v"] or 0


def _snapshot(policy: XidPolicy) -> dict:
    return {name: getattr(policy, name) for name in [*POLICY_FIELDS, "changed_in_version"]}


def xid_policy_save(*, data: dict, actor, policy: XidPolicy | None = None, note: str = "") -> XidPolicy:
    """Create (`policy` None) or change one policy row from validated `data`; returns the saved row.

    The whole table is locked while the new version is taken, so two concurrent edits get two versions.
    """
    with transaction.atomic():
        list(XidPolicy.objects.select_for_update().values_list("pk", flat=True))
        version = xid_policy_table_version() + 1
        before = _snapshot(policy) if policy is not None else None
        if policy is None:
            policy = XidPolicy(**{k: v for k, v in data.items() if k in POLICY_FIELDS})
        else:
            for name, value in data.items():
                if name in POLICY_FIELDS:
                    setattr(policy, name, value)
        policy.changed_in_version = version
        policy.save()
        audit_record(actor=actor, action=AuditEntry.Action.UPDATE if before else AuditEntry.Action.CREATE,
                     instance=policy, before=before, after=_snapshot(policy),
                     note=note or f"Xid policy table v{version}")
    return policy
