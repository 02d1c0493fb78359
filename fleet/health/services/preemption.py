"""A reclaimed spot node closes its own preemption-notice finding: once the preemption is recorded (billing's
`nodes_preempted`), "deadline passed N s ago" says nothing new, and the preemption record is what stays."""

from datetime import datetime

from django.db import transaction

from ..choices import FindingState
from ..models import Finding, HealthCondition
from ..signals import findings_changed

PREEMPTION_NOTICE_RULE = "preemption_notice"


def findings_close_for_preempted(*, node_ids: list[int], record_ids: list[int], now: datetime) -> list[int]:
    """Resolve the nodes' open preemption-notice findings; returns their ids."""
    open_notices = Finding.objects.filter(node_id__in=node_ids, state=FindingState.OPEN,
                                          rule__slug=PREEMPTION_NOTICE_RULE)
    if not open_notices.exists():  # the common case costs one query
        return []
    with transaction.atomic():
        findings = list(open_notices.select_for_update())
        if not findings:
            return []
        records = ", ".join(f"#{pk}" for pk in record_ids)
        resolved = [f.pk for f in findings]
        # Every one is closed the same way: one plain UPDATE (which skips auto_now, hence updated_at).
        Finding.objects.filter(pk__in=resolved).update(
            state=FindingState.RESOLVED, resolved_at=now, updated_at=now,
            resolution=f"instance reclaimed: preemption recorded ({records})"[:200])
        HealthCondition.objects.filter(node_id__in=node_ids, rule__slug=PREEMPTION_NOTICE_RULE).delete()
        findings_changed.send(sender=Finding, opened=[], resolved=resolved, now=now)
    return resolved
