"""Applying a cycle's `ChangeSet`: a handful of bulk statements, whatever the number of rows."""

from __future__ import annotations

from datetime import datetime

from fleet.core.db import rows_update

from ..choices import FindingState
from ..models import Finding, HealthCondition
from ..signals import findings_changed
from .finding_content import finding_content
from .hysteresis import ChangeSet

_REWRITE_FIELDS = ["state", "resolved_at", "resolution", "last_seen", "gpu", "layer", "severity", "summary",
                   "summary_msg", "evidence", "xid_policy_version", "responsible_party", "responsibility_source",
                   "action_kind", "recommended_action", "action_msg", "updated_at"]


def cycle_changes_write(*, changes: ChangeSet, now: datetime) -> list[Finding]:
    """Delete, create and update condition rows and findings; returns the findings created."""
    if changes.conditions_gone:
        HealthCondition.objects.filter(pk__in=changes.conditions_gone).delete()
    if changes.conditions_new:
        HealthCondition.objects.bulk_create(changes.conditions_new)
    changed_conditions = [c for c in {id(c): c for c in changes.conditions_changed}.values()
                          if c.pk and c.pk not in set(changes.conditions_gone)]
    if changed_conditions:
        rows_update(HealthCondition, changed_conditions, ["first_true_at", "first_false_at"])
    # A finding that is still true and says the same as before only moves its last_seen (one cheap UPDATE, and
    # not its updated_at: incremental sync asks for what changed); the expensive per-row rewrite is for findings
    # whose content changed or that resolved, and it stamps updated_at (a bulk write skips auto_now).
    rewrite, seen_again = [], []
    for finding in changes.findings_changed.values():
        if finding.state == FindingState.OPEN and changes.findings_before.get(finding.pk) == finding_content(finding):
            seen_again.append(finding.pk)
        else:
            finding.updated_at = now
            rewrite.append(finding)
    if seen_again:
        Finding.objects.filter(pk__in=seen_again).update(last_seen=now)
    if rewrite:
        rows_update(Finding, rewrite, _REWRITE_FIELDS)
    created = Finding.objects.bulk_create(changes.findings_new) if changes.findings_new else []
    if created:
        # auto_now stamped the insert with the wall clock; the cycle's own time keeps one cycle's writes together.
        Finding.objects.filter(pk__in=[f.pk for f in created]).update(updated_at=now)
        for finding in created:
            finding.updated_at = now
    resolved = [f.pk for f in rewrite if f.state == FindingState.RESOLVED]
    opened = [f.pk for f in created if f.pk is not None]
    if opened or resolved:
        findings_changed.send(sender=Finding, opened=opened, resolved=resolved, now=now)
    return created
