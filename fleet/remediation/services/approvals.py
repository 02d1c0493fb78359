"""The two-person rule: a destructive or irreversible step (terminate, retire, RMA, and any step kind a pool
adds) is approved by someone other than whoever asked for it — the operator who opened the incident, who
requested this attempt of the step, or who last changed the workflow. Each pool has it on unless its settings
turn it off explicitly (`two_person_approval`); docs/remediation.md, "Approvals"."""

from __future__ import annotations

from fleet.core.models import AuditEntry

from ..choices import DESTRUCTIVE_KINDS, TimelineKind
from ..models import Incident, PoolRemediationSettings, StepRun
from .incidents import ENGINE


def two_person_kinds(settings_row: PoolRemediationSettings | None) -> frozenset[str]:
    if settings_row is not None and not settings_row.two_person_approval:
        return frozenset()
    extra = settings_row.two_person_kinds if settings_row is not None else []
    return frozenset(DESTRUCTIVE_KINDS) | frozenset(extra or [])


def _workflow_changed_by(incident: Incident) -> str:
    if incident.workflow_id is None:
        return ""
    entry = (AuditEntry.objects.filter(object_type="remediation.workflow", object_id=str(incident.workflow_id),
                                       action__in=[AuditEntry.Action.CREATE, AuditEntry.Action.UPDATE])
             .order_by("-at", "-id").only("actor_label").first())
    return entry.actor_label if entry is not None else ""


def approval_excluded(incident: Incident, run: StepRun, settings_row: PoolRemediationSettings | None
                      ) -> dict[str, str]:
    """Who may not approve `run` under the two-person rule: {username: why}. Empty when the rule does not apply."""
    if run.kind not in two_person_kinds(settings_row):
        return {}
    excluded: dict[str, str] = {}
    if incident.opened_by and incident.opened_by not in (ENGINE, "policy"):
        excluded.setdefault(incident.opened_by, "opened the incident")
    requesters = incident.timeline.filter(kind=TimelineKind.STEP_RETRY, step_index=run.step_index,
                                          attempt=run.attempt).values_list("actor_label", flat=True)
    for label in requesters:
        excluded.setdefault(label, "requested this attempt of the step")
    changed_by = _workflow_changed_by(incident)
    if changed_by:
        excluded.setdefault(changed_by, f"last changed the workflow {incident.workflow.slug}")
    return excluded
