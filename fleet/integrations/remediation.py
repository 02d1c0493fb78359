"""The two seams with the remediation engine (`fleet.remediation`, which never imports this app):

1. `incident_event` (sent inside the incident's transaction) → outbox rows, routed like findings: an incident
   opened opens a ticket (one per incident and integration, under `fleet-incident-<incident key>`), its step
   changes and "waiting for approval" are updates, closing it resolves the ticket (not held: closing is
   deliberate), a tripped circuit breaker is a notification.
2. The `ticket` executor, for the `open_ticket` and `await_external` step kinds. `start` of `open_ticket` writes
   the ticket's opening message to every integration routed `ticket.requested` (dedup key = the step's idempotency
   key, so a repeated start writes nothing new) and waits until the ticket exists outside; `await_external` waits
   until an inbound update says the outside party resolved it. Pools use it by listing `ticket` in their
   remediation executors.

Inbound updates on an incident's ticket are added to the incident's timeline (`ticket_updated`).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db import transaction
from django.dispatch import receiver
from django.utils import timezone

from fleet.core.i18n import in_server_language
from fleet.health.models import Finding
from fleet.health.selectors.evidence import node_evidence
from fleet.health.selectors.evidence_text import evidence_text
from fleet.remediation.choices import IncidentEventKind, StepKind, TimelineKind, WaitingOn
from fleet.remediation.models import Incident, StepRun
from fleet.remediation.signals import IncidentEvent, incident_event
from fleet.remediation.steps import StepContext, StepOutcome

from .choices import TICKET_ACTIVE_STATES, EventKind, MessageState, SubjectKind, TicketAction, TicketState, UpdateSource
from .connectors.base import DeliveryError
from .content import _jsonable, console_url, finding_content
from .models import Integration, OutboxMessage, Ticket
from .routing import EventFacts, Router
from .services.outbox import kick_after_commit, message_write, ticket_key
from .signals import ticket_updated

logger = logging.getLogger(__name__)

TICKET_EXECUTOR = "ticket"
OPEN_POLL = timedelta(seconds=15)
AWAIT_POLL = timedelta(seconds=30)
_EVENTS = {
    IncidentEventKind.OPENED: (EventKind.INCIDENT_OPENED, TicketAction.OPEN),
    IncidentEventKind.STEP_CHANGED: (EventKind.INCIDENT_STEP_CHANGED, TicketAction.UPDATE),
    IncidentEventKind.AWAITING_APPROVAL: (EventKind.INCIDENT_APPROVAL_NEEDED, TicketAction.UPDATE),
    IncidentEventKind.CLOSED: (EventKind.INCIDENT_CLOSED, TicketAction.RESOLVE),
    IncidentEventKind.BREAKER_TRIPPED: (EventKind.CIRCUIT_BREAKER_TRIPPED, TicketAction.NOTIFY),
}


def subject_ref(incident: Incident) -> str:
    return f"incident:{incident.key}"


def _trigger_finding(incident: Incident) -> Finding | None:
    link = incident.finding_links.filter(trigger=True).select_related("finding__rule").first()
    return link.finding if link is not None else None


def incident_facts(incident: Incident, event_kind: str) -> EventFacts:
    finding = _trigger_finding(incident)
    rule = finding.rule.slug if finding is not None else incident.cause.split(":", 1)[0]
    severity = finding.severity if finding is not None else "critical"
    return EventFacts(event_kind=event_kind, responsible_party=incident.responsible_party, severity=severity,
                      provider_id=incident.provider_id, pool_id=incident.pool_id, site_id=incident.site_id,
                      delivery_form=incident.delivery_form, rule=rule)


def _event_payload(event: IncidentEvent, kind: str) -> dict:
    return _jsonable({"kind": kind, "subject": SubjectKind.INCIDENT, "incident_id": event.incident_id,
                      "incident_key": event.incident_key, "state": event.state, "node_id": event.node_id,
                      "step_index": event.step_index, "step_kind": event.step_kind,
                      "step_status": event.step_status, "at": event.at, "detail": event.detail})


def _active_ticket(integration: Integration, incident: Incident) -> Ticket | None:
    return (Ticket.objects.select_for_update()
            .filter(integration=integration, subject_ref=subject_ref(incident), state__in=TICKET_ACTIVE_STATES)
            .order_by("-id").first())


def _ticket_for(integration: Integration, incident: Incident, now: datetime) -> tuple[Ticket, bool]:
    """The incident's ticket with this integration, created when there is none (never a second one)."""
    ticket, created = Ticket.objects.get_or_create(
        integration=integration, key=ticket_key(kind="incident", ref=incident.key),
        defaults={"subject_kind": SubjectKind.INCIDENT, "subject_ref": subject_ref(incident),
                  "incident_id": incident.pk, "node_id": incident.node_id, "opened_at": now,
                  "title": incident.title[:300]})
    if created:
        finding = _trigger_finding(incident)
        if finding is not None:
            ticket.findings.add(finding)
    return ticket, created


def incident_outbox_write(*, event: IncidentEvent) -> list[OutboxMessage]:
    """Messages for one incident event, to every integration routed for it (inside the caller's transaction)."""
    mapped = _EVENTS.get(event.kind)
    router = Router()
    if mapped is None or not router:
        return []
    kind, action = mapped
    incident = Incident.objects.get(pk=event.incident_id)
    payload = _event_payload(event, kind)
    stamp = int(event.at.timestamp() * 1000)
    base_key = ticket_key(kind="incident", ref=incident.key)
    written = []
    for integration in router.integrations_for(incident_facts(incident, kind)):
        if action == TicketAction.NOTIFY:
            written.append(message_write(integration=integration, event_kind=kind, action=action, event=payload,
                                         dedup_key=f"{base_key}:{kind}:{stamp}", now=event.at))
        elif action == TicketAction.OPEN:
            ticket, created = _ticket_for(integration, incident, event.at)
            if created:
                written.append(message_write(integration=integration, ticket=ticket, event_kind=kind, action=action,
                                             dedup_key=f"{ticket.key}:open", event=payload, now=event.at))
        else:
            ticket = _active_ticket(integration, incident)
            if ticket is None:
                continue  # no ticket was opened for it with this integration: nothing to update or close
            suffix = "resolve" if action == TicketAction.RESOLVE else f"{event.kind}:{event.step_index}:{stamp}"
            written.append(message_write(integration=integration, ticket=ticket, event_kind=kind, action=action,
                                         dedup_key=f"{ticket.key}:{suffix}", event=payload, now=event.at))
    kick_after_commit(written, event.at)
    return written


@receiver(incident_event, dispatch_uid="integrations-incident-outbox")
def on_incident_event(sender, event: IncidentEvent, **kwargs):
    # A savepoint: a fault here loses these notifications (logged) but never rolls back the incident's change.
    try:
        with transaction.atomic():
            incident_outbox_write(event=event)
    except Exception:
        logger.exception("integrations: outbox rows for incident event %s could not be written", event)


@receiver(ticket_updated, dispatch_uid="integrations-incident-timeline")
def on_ticket_updated(sender, ticket: Ticket, update, now, **kwargs):
    """An inbound update on an incident's ticket goes on the incident's timeline."""
    if ticket.incident_id is None:
        return
    from fleet.remediation.services.incidents import timeline_add

    incident = Incident.objects.filter(pk=ticket.incident_id).first()
    if incident is None:
        return
    said = update.get_state_display().lower() if update.state else "comment"
    text = (f"{ticket.integration.name} ticket {ticket.external_id or ticket.key}: {said}"
            + (f" ({update.author})" if update.author else "") + (f" — {update.comment}" if update.comment else ""))
    timeline_add(incident, TimelineKind.NOTE, text, at=now, actor=None,
                 output={"ticket": ticket.key, "external_id": ticket.external_id, "state": update.state,
                         "integration": ticket.integration.name, "source": "inbound"})


# --- Content of incident messages (registered with the delivery service's renderers) -----------------------------

def _step_line(incident: Incident, step_index: int | None) -> str:
    if step_index is None:
        return ""
    run = StepRun.objects.filter(incident=incident, step_index=step_index).order_by("-attempt").first()
    if run is None:
        return f"step {step_index + 1}"
    label = run.title or run.kind
    text = f"step {step_index + 1} ({label}) {run.get_status_display().lower()}"
    return text + (f": {run.message}" if run.message else "")


@in_server_language
def incident_content(message: OutboxMessage, now: datetime) -> dict:
    from fleet.remediation.services.incidents import step_facts

    event = message.event
    incident = Incident.objects.select_related("node", "pool", "provider").filter(pk=event.get("incident_id")).first()
    if incident is None:
        raise DeliveryError("the incident was deleted before the message could be rendered", retryable=False)
    finding = _trigger_finding(incident)
    facts = {k: v for k, v in step_facts(incident).items() if k not in ("labels", "baseline")}
    facts.update(incident_key=incident.key, incident_state=incident.state, workflow=incident.workflow.slug)
    links = {name: link for name, link in (("incident", console_url(f"/incidents/{incident.pk}")),
                                           ("node", console_url(f"/nodes/{incident.node_id}")
                                            if incident.node_id else "")) if link}
    severity = finding.severity if finding is not None else "critical"
    title = f"[{incident.key}] {incident.title}"
    header = (f"Incident {incident.key} ({incident.get_state_display().lower()}): {incident.title}\n"
              f"Workflow: {incident.workflow.name}. Cause: {incident.cause}.\n")
    kind, action = message.event_kind, message.action
    content = {"title": title, "summary": incident.title, "severity": severity, "facts": facts, "links": links,
               "evidence": None, "evidence_text": "", "attachment_name": ""}
    if action == TicketAction.OPEN:
        if finding is not None:
            base = finding_content(finding=finding, event_kind=EventKind.FINDING_OPENED, action=TicketAction.OPEN,
                                   now=now)
            ask = (message.event.get("params") or {}).get("ask")
            body = header + (f"We ask for: {ask}.\n" if ask else "") + "\n" + base["body"]
            content.update(body=body, evidence=base["evidence"], evidence_text=base["evidence_text"],
                           attachment_name=base["attachment_name"], facts={**base["facts"], **facts})
        elif incident.node_id is not None:
            bundle = node_evidence(node=incident.node, now=now)
            content.update(body=header, evidence=_jsonable(bundle), evidence_text=evidence_text(bundle),
                           attachment_name=f"evidence-{incident.node.hostname}-{incident.key}")
        else:
            content["body"] = header
    elif kind == EventKind.CIRCUIT_BREAKER_TRIPPED:
        detail = event.get("detail") or {}
        content.update(title=f"Circuit breaker tripped: {incident.title}",
                       summary=f"Circuit breaker tripped ({detail.get('scope', 'pool')}): automation paused. "
                               f"{incident.title}", body=header)
    elif action == TicketAction.RESOLVE:
        resolution = incident.resolution or incident.get_state_display().lower()
        content.update(title=f"Closed: {title}", summary=f"Incident {incident.key} closed: {resolution}",
                       body=f"{header}Closed {incident.closed_at or now:%Y-%m-%d %H:%M:%S} UTC: {resolution}.\n")
    else:
        line = _step_line(incident, event.get("step_index"))
        if kind == EventKind.INCIDENT_APPROVAL_NEEDED:
            line = f"waiting for an operator's approval: {line}"
        content.update(summary=f"{incident.key}: {line}", body=f"{header}{line}\n")
    return _jsonable(content)


# --- The `ticket` executor --------------------------------------------------------------------------------------

def _described(tickets: list[Ticket]) -> list[dict]:
    return [{"integration": t.integration.name, "key": t.key, "external_id": t.external_id, "url": t.external_url,
             "state": t.state} for t in tickets]


class TicketExecutor:
    """`open_ticket`: the incident's ticket with every integration routed `ticket.requested`, done once each exists
    outside; `await_external`: waits until an inbound update says one of the incident's tickets is resolved."""

    name = TICKET_EXECUTOR
    kinds = frozenset({StepKind.OPEN_TICKET, StepKind.AWAIT_EXTERNAL})

    def start(self, ctx: StepContext) -> StepOutcome:
        if ctx.kind == StepKind.OPEN_TICKET:
            return self._open(ctx, write=True)
        return self._await(ctx)

    def poll(self, ctx: StepContext) -> StepOutcome:
        if ctx.kind == StepKind.OPEN_TICKET:
            return self._open(ctx, write=False)
        return self._await(ctx)

    def _open(self, ctx: StepContext, *, write: bool) -> StepOutcome:
        incident = Incident.objects.get(pk=ctx.incident_id)
        integrations = Router().integrations_for(incident_facts(incident, EventKind.TICKET_REQUESTED))
        if not integrations:
            return StepOutcome.failed("No integration is routed ticket.requested for this incident: add a routing "
                                      "rule (docs/integrations.md), or open the ticket by hand and complete the "
                                      "step.")
        if ctx.dry_run:
            names = ", ".join(i.name for i in integrations)
            return StepOutcome.done(f"dry run: would open a ticket with {names}",
                                    integrations=[i.name for i in integrations])
        if write:
            now = timezone.now()
            with transaction.atomic():
                written = []
                for integration in integrations:
                    ticket, _ = _ticket_for(integration, incident, now)
                    if not ticket.messages.filter(action=TicketAction.OPEN).exists():
                        written.append(message_write(
                            integration=integration, ticket=ticket, event_kind=EventKind.TICKET_REQUESTED,
                            action=TicketAction.OPEN, dedup_key=ctx.idempotency_key, now=now,
                            event={"kind": EventKind.TICKET_REQUESTED, "subject": SubjectKind.INCIDENT,
                                   "incident_id": incident.pk, "incident_key": incident.key,
                                   "step_index": ctx.step_index, "params": ctx.params}))
                kick_after_commit(written, now)
        return self._opened(incident, integrations)

    def _opened(self, incident: Incident, integrations: list[Integration]) -> StepOutcome:
        tickets = list(Ticket.objects.filter(subject_ref=subject_ref(incident), integration__in=integrations)
                       .select_related("integration").order_by("id"))
        dead = (OutboxMessage.objects.filter(ticket__in=tickets, action=TicketAction.OPEN, state=MessageState.DEAD)
                .select_related("integration").first())
        if dead is not None:
            return StepOutcome.failed(f"{dead.integration.name}: the ticket could not be opened ({dead.last_error}); "
                                      f"fix the integration, retry the message in the delivery log, then retry "
                                      f"this step.", tickets=_described(tickets))
        pending = [t.integration.name for t in tickets if t.state == TicketState.OPENING]
        if pending:
            return StepOutcome.waiting(f"opening the ticket with {', '.join(pending)}", retry_after=OPEN_POLL,
                                       waiting_on=WaitingOn.EXECUTOR, tickets=_described(tickets))
        names = ", ".join(f"{t.integration.name} {t.external_id or t.key}" for t in tickets)
        return StepOutcome.done(f"ticket opened: {names}", tickets=_described(tickets))

    def _await(self, ctx: StepContext) -> StepOutcome:
        tickets = list(Ticket.objects.filter(incident_id=ctx.incident_id).select_related("integration")
                       .order_by("id"))
        if not tickets:
            return StepOutcome.failed("This incident has no external ticket to wait for: open one first (an "
                                      "open_ticket step), or complete this step by hand when the outside party is "
                                      "done.")
        names = ", ".join(t.external_id or t.key for t in tickets)
        if ctx.dry_run:
            return StepOutcome.done(f"dry run: would wait for {names}")
        for ticket in tickets:
            answer = (ticket.updates.filter(source=UpdateSource.INBOUND, state=TicketState.RESOLVED)
                      .order_by("-at", "-id").first())
            if answer is not None and ticket.state == TicketState.RESOLVED:
                said = f" — {answer.comment}" if answer.comment else ""
                return StepOutcome.done(f"{ticket.integration.name} ticket {ticket.external_id or ticket.key} "
                                        f"resolved{said}", tickets=_described(tickets))
        # The message stays the same while we wait, so the timeline (and the ticket) hear of it once.
        return StepOutcome.waiting(f"waiting for the outside party to resolve {names}", retry_after=AWAIT_POLL,
                                   waiting_on=WaitingOn.PROVIDER, tickets=_described(tickets))
