"""Writes to the Xid policy table: every change bumps the table version and lands in the audit log."""

from django.db import transaction
from django.db.models import Max

from fleet.core.audit import audit_context

from ..models import XidPolicy

POLICY_FIELDS = ["code", "meaning", "severity", "action", "layer", "escalation"]


def xid_policy_table_version() -> int:
    return XidPolicy.objects.aggregate(v=Max("changed_in_version"))["v"] or 0


def xid_policy_save(*, data: dict, actor, policy: XidPolicy | None = None, note: str = "") -> XidPolicy:
    """Create (`policy` None) or change one policy row from validated `data`; returns the saved row.

    The whole table is locked while the new version is taken, so two concurrent edits get two versions.
    """
    with transaction.atomic():
        list(XidPolicy.objects.select_for_update().values_list("pk", flat=True))
        version = xid_policy_table_version() + 1
        if policy is None:
            policy = XidPolicy(**{k: v for k, v in data.items() if k in POLICY_FIELDS})
        else:
            for name, value in data.items():
                if name in POLICY_FIELDS:
                    setattr(policy, name, value)
        policy.changed_in_version = version
        with audit_context(actor=actor, note=note or f"Xid policy table v{version}"):
            policy.save()
    return policy
