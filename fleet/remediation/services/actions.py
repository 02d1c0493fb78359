"""What operators do to incidents: open one by hand, approve, complete or fail a (manual) step, retry, skip,
escalate, cancel, add a note. Each checks that the request fits the incident's current state and step, changes
nothing otherwise (a 4xx naming the problem), and lands in the timeline and the audit log."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from fleet.core.api.errors import DomainError
from fleet.core.models import AuditEntry
from fleet.core.services import audit_record
from fleet.inventory.choices import NodeState
from fleet.inventory.models import Node

from ..choices import OPEN_STATES, STEP_TERMINAL, CauseKind, IncidentState, StepStatus, TimelineKind
from ..models import Incident, StepRun, Workflow
from .approvals import approval_excluded
from .engine import (
    current_run,
    executor_done,
    incident_advance,
    incident_close,
    incident_lock,
    operator_incident_start,
    pool_settings,
    run_create,
    run_fail,
    workflow_escalate,
)
from .incidents import actor_label, incident_create, incident_set_state, timeline_add


def _conflict(message: str, code: str, field: str | None = None) -> DomainError:
    return DomainError(message, code=code, fields={field: [message]} if field else None)


def _locked(incident_id: int) -> Incident:
    incident = incident_lock(incident_id)
    if incident is None:
        raise DomainError("No such incident.", code="not_found", status_code=404)
    if incident.state not in OPEN_STATES:
        raise _conflict(f"Incident {incident.key} is {incident.state}; it cannot change any more.", "incident_closed")
    return incident


def _step(incident: Incident, step_index) -> StepRun:
    """The current step's latest attempt, after checking the caller named the current step."""
    if step_index is None:
        raise DomainError("Name the step: step_index is required.", code="required", status_code=400,
                          fields={"step_index": [f"Required: the index of the current step "
                                                 f"({incident.current_step})."]})
    if step_index != incident.current_step:
        where = "finished" if step_index < incident.current_step else "not reached yet"
        raise _conflict(f"Step {step_index} is {where}; the incident is at step {incident.current_step}"
                        + (f" ({incident.plan[incident.current_step]['kind']})"
                           if incident.current_step < len(incident.plan) else "") + ".",
                        "step_out_of_order", "step_index")
    run = current_run(incident)
    if run is None:
        raise _conflict(f"Incident {incident.key} has not started yet ({incident.state}: {incident.state_reason}).",
                        "not_started", "step_index")
    return run


def _audit(actor, incident: Incident, action: str, note: str, **after) -> None:
    audit_record(actor=actor, action=AuditEntry.Action.ACTION, instance=incident,
                 after={"action": action, "state": incident.state, "current_step": incident.current_step, **after},
                 note=f"{action}: {note}"[:200] if note else action)


def incident_open_manual(*, node: Node, workflow: Workflow, actor, note: str = "",
                         now: datetime | None = None) -> Incident:
    """An operator opens an incident with a chosen workflow (the node page's cordon / drain / reboot / replace)."""
    now = now or timezone.now()
    if not workflow.enabled:
        raise DomainError(f"Workflow {workflow.slug} is disabled.", code="invalid", status_code=400,
                          fields={"workflow": [f"Workflow {workflow.slug} is disabled."]})
    if node.state == NodeState.RETIRED:
        raise _conflict(f"{node.hostname} is retired.", "node_retired", "node")
    cause = f"manual:{workflow.slug}"
    with transaction.atomic():
        Node.objects.select_for_update().filter(pk=node.pk).values_list("pk", flat=True).first()
        existing = Incident.objects.filter(node=node, cause=cause, state__in=sorted(OPEN_STATES)).first()
        if existing is not None:
            raise _conflict(f"{node.hostname} already has an open {workflow.slug} incident ({existing.key}).",
                            "incident_exists", "workflow")
        settings_row = pool_settings(node.pool_id)
        label = actor_label(actor)
        incident = incident_create(
            node=node, cause_kind=CauseKind.MANUAL, cause=cause, title=f"{node.hostname}: {workflow.name}",
            workflow=workflow, at=now, opened_by=label, dry_run=bool(settings_row and settings_row.dry_run),
            boundary={"delivery_form": node.delivery_form}, actor=actor,
            message=f"opened by {label} with workflow {workflow.slug}" + (f": {note}" if note else ""))
        _audit(actor, incident, "open", note, workflow=workflow.slug, node=node.pk)
        operator_incident_start(incident, now=now, actor=actor)
        incident.save()
    return incident


def incident_approve(*, incident_id: int, step_index, actor, note: str = "", now: datetime | None = None) -> Incident:
    """Approve the current step. Under the two-person rule (services/approvals.py) whoever asked for a destructive
    step may not approve it: refused with a 403 that says why, and the refusal is audited."""
    now = now or timezone.now()
    label = actor_label(actor)
    with transaction.atomic():
        incident = _locked(incident_id)
        run = _step(incident, step_index)
        if run.status != StepStatus.AWAITING_APPROVAL:
            raise _conflict(f"Step {step_index} ({run.kind}) is {run.status}, not waiting for approval.",
                            "not_awaiting_approval", "step_index")
        excluded = approval_excluded(incident, run, pool_settings(incident.pool_id))
        if label not in excluded:
            run.status, run.approved_by, run.approved_at = StepStatus.PENDING, label, now
            run.save(update_fields=["status", "approved_by", "approved_at"])
            rule = " (a second person, as the two-person rule asks)" if excluded else ""
            timeline_add(incident, TimelineKind.APPROVED, f"step {step_index + 1} ({run.kind}) approved by {label}"
                         + rule + (f": {note}" if note else ""), at=now, actor=actor, run=run)
            incident_set_state(incident, IncidentState.RUNNING)
            incident_advance(incident, now=now)
            _audit(actor, incident, "approve", note, step_index=step_index, step_kind=run.kind,
                   two_person_rule=bool(excluded))
            return incident
    why = excluded[label]
    _audit(actor, incident, "approve refused", f"two-person rule: {label} {why}", step_index=step_index,
           step_kind=run.kind)
    raise DomainError(f"Two-person rule: you {why}, so someone else must approve step {step_index + 1} "
                      f"({run.kind}) of {incident.key}.", code="two_person_rule", status_code=403,
                      fields={"step_index": [f"{label} {why}."]})


def incident_step_complete(*, incident_id: int, step_index, actor, note: str = "", output: dict | None = None,
                           now: datetime | None = None) -> Incident:
    """Mark the current (waiting) step done: the runbook step was carried out. The engine's own checks still
    apply (a verify step waits for the gates)."""
    now = now or timezone.now()
    with transaction.atomic():
        incident = _locked(incident_id)
        run = _step(incident, step_index)
        if run.status != StepStatus.WAITING:
            raise _conflict(f"Step {step_index} ({run.kind}) is {run.status}; only a waiting step can be marked done.",
                            "step_not_waiting", "step_index")
        if run.executor_done:
            raise _conflict(f"Step {step_index} ({run.kind}) is already done on the executor's side; it waits for "
                            f"the control plane's checks: {run.message}", "step_checks_pending", "step_index")
        label = actor_label(actor)
        run.output = {**run.output, "completed_by": label, "note": note, **(output or {})}
        run.finished_by = label
        timeline_add(incident, TimelineKind.NOTE, f"step {step_index + 1} ({run.kind}) marked done by {label}"
                     + (f": {note}" if note else ""), at=now, actor=actor, run=run, output=output or {})
        executor_done(incident, run, now=now, actor=actor, message=f"marked done by {label}")
        _audit(actor, incident, "complete", note, step_index=step_index, step_kind=run.kind)
    return incident


def incident_step_fail(*, incident_id: int, step_index, actor, note: str = "", now: datetime | None = None
                       ) -> Incident:
    now = now or timezone.now()
    with transaction.atomic():
        incident = _locked(incident_id)
        run = _step(incident, step_index)
        if run.status != StepStatus.WAITING:
            raise _conflict(f"Step {step_index} ({run.kind}) is {run.status}; only a waiting step can be marked "
                            "failed.", "step_not_waiting", "step_index")
        label = actor_label(actor)
        run.output = {**run.output, "failed_by": label, "note": note}
        run_fail(incident, run, now=now, message=f"marked failed by {label}" + (f": {note}" if note else ""),
                 actor=actor)
        _audit(actor, incident, "fail", note, step_index=step_index, step_kind=run.kind)
    return incident


def incident_step_retry(*, incident_id: int, step_index, actor, note: str = "", now: datetime | None = None
                        ) -> Incident:
    """A new attempt of the current step, now (a new idempotency key: the operator asks for it to run again)."""
    now = now or timezone.now()
    with transaction.atomic():
        incident = _locked(incident_id)
        run = _step(incident, step_index)
        if run.status not in (StepStatus.FAILED, StepStatus.WAITING, StepStatus.CANCELLED):
            raise _conflict(f"Step {step_index} ({run.kind}) is {run.status}; only a failed or waiting step can be "
                            "retried.", "step_not_retryable", "step_index")
        label = actor_label(actor)
        if run.status == StepStatus.WAITING:
            run.status, run.finished_at, run.message = StepStatus.CANCELLED, now, f"superseded by a retry ({label})"
            run.next_poll_at = None
            run.save()
        retry = run_create(incident, run.step_index, run.attempt + 1, now=now)
        timeline_add(incident, TimelineKind.STEP_RETRY, f"step {step_index + 1} ({run.kind}): attempt "
                     f"{retry.attempt} requested by {label}" + (f": {note}" if note else ""), at=now, actor=actor,
                     run=retry)
        incident_set_state(incident, IncidentState.RUNNING)
        incident_advance(incident, now=now)
        _audit(actor, incident, "retry", note, step_index=step_index, attempt=retry.attempt)
    return incident


def incident_step_skip(*, incident_id: int, step_index, actor, note: str = "", now: datetime | None = None
                       ) -> Incident:
    now = now or timezone.now()
    with transaction.atomic():
        incident = _locked(incident_id)
        run = _step(incident, step_index)
        if run.status == StepStatus.DONE:
            raise _conflict(f"Step {step_index} is done already.", "step_done", "step_index")
        label = actor_label(actor)
        if run.status not in STEP_TERMINAL:
            # A running executor's late answer is ignored (its claim is gone).
            run.status, run.finished_at, run.finished_by = StepStatus.SKIPPED, now, label
            run.message, run.claim, run.lease_until, run.next_poll_at = f"skipped by {label}", "", None, None
            run.save()
        timeline_add(incident, TimelineKind.STEP_SKIPPED, f"step {step_index + 1} ({run.kind}) skipped by {label}"
                     + (f": {note}" if note else ""), at=now, actor=actor, run=run)
        incident.current_step = step_index + 1
        incident_set_state(incident, IncidentState.RUNNING)
        incident_advance(incident, now=now, actor=actor)
        _audit(actor, incident, "skip", note, step_index=step_index, step_kind=run.kind)
    return incident


def incident_escalate(*, incident_id: int, workflow: Workflow, actor, note: str = "",
                      now: datetime | None = None) -> Incident:
    """Switch to another workflow: a queued incident swaps its plan; a started one skips the current step and
    continues with the new workflow's steps."""
    now = now or timezone.now()
    if not workflow.enabled:
        raise DomainError(f"Workflow {workflow.slug} is disabled.", code="invalid", status_code=400,
                          fields={"workflow": [f"Workflow {workflow.slug} is disabled."]})
    with transaction.atomic():
        incident = _locked(incident_id)
        label = actor_label(actor)
        reason = f"by {label}" + (f": {note}" if note else "")
        run = current_run(incident)
        if incident.state == IncidentState.QUEUED or run is None:
            previous = incident.workflow.slug
            incident.workflow, incident.plan, incident.current_step = workflow, list(workflow.steps), 0
            incident.save()
            timeline_add(incident, TimelineKind.ESCALATED, f"workflow changed from {previous} to {workflow.slug} "
                         f"{reason}", at=now, actor=actor, output={"from": previous, "to": workflow.slug})
        else:
            if run.status not in STEP_TERMINAL:
                run.status, run.finished_at, run.finished_by = StepStatus.SKIPPED, now, label
                run.message, run.claim, run.lease_until, run.next_poll_at = f"escalated {reason}", "", None, None
                run.save()
            workflow_escalate(incident, workflow, now=now, actor=actor, reason=reason)
        _audit(actor, incident, "escalate", note, workflow=workflow.slug)
    return incident


def incident_cancel(*, incident_id: int, actor, note: str = "", now: datetime | None = None) -> Incident:
    now = now or timezone.now()
    with transaction.atomic():
        incident = _locked(incident_id)
        label = actor_label(actor)
        incident_close(incident, IncidentState.CANCELLED, f"cancelled by {label}" + (f": {note}" if note else ""),
                       now=now, actor=actor)
        _audit(actor, incident, "cancel", note)
    return incident


def incident_note(*, incident_id: int, actor, note: str, now: datetime | None = None) -> Incident:
    now = now or timezone.now()
    with transaction.atomic():
        incident = incident_lock(incident_id)
        if incident is None:
            raise DomainError("No such incident.", code="not_found", status_code=404)
        timeline_add(incident, TimelineKind.NOTE, note, at=now, actor=actor)
        _audit(actor, incident, "note", note)
    return incident
