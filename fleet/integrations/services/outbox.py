"""Writing the outbox: messages created in the transaction of the change that caused them.

Nothing here talks to the network; the delivery worker (`services.delivery`) sends what this writes. Callers are
signal receivers running inside the health cycle's or the incident's transaction, so a rolled-back change leaves
no message, and a committed one always has its messages.

Ticket semantics (docs/integrations.md): one external ticket per occurrence and integration, keyed by our ticket
key. A finding that resolves keeps its ticket open for the integration's `resolve_hold_s`: if it comes back
inside that window (a flap), the held resolve is cancelled and the same ticket gets an update; once the resolve
went out, a new occurrence opens a new ticket under a new key.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import partial

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from fleet.health.models import Finding

from ..choices import (
    TICKET_ACTIVE_STATES,
    EventKind,
    MessageState,
    SubjectKind,
    TicketAction,
    TicketState,
)
from ..models import Integration, OutboxMessage, Ticket
from ..routing import EventFacts, Router


def _kick(message_ids: list[int]) -> None:
    from ..tasks import deliver

    for message_id in message_ids:
        deliver.delay(message_id)


def kick_after_commit(messages: list[OutboxMessage], now: datetime) -> None:
    """Hand messages due now to a worker once the transaction commits; the periodic sweep catches anything this
    misses (a broker hiccup), so it is best effort."""
    due = [m.pk for m in messages if m.next_attempt_at <= now]
    if due:
        transaction.on_commit(partial(_kick, due), robust=True)


def message_write(*, integration: Integration, event_kind: str, action: str, dedup_key: str, event: dict,
                  now: datetime, ticket: Ticket | None = None, not_before: datetime | None = None) -> OutboxMessage:
    """One outbox row; writing the same dedup key twice returns the first row (idempotent callers)."""
    existing = OutboxMessage.objects.filter(integration=integration, dedup_key=dedup_key).first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            return OutboxMessage.objects.create(
                integration=integration, ticket=ticket, event_kind=event_kind, action=action, dedup_key=dedup_key,
                event=event, created_at=now, next_attempt_at=not_before or now, state=MessageState.PENDING)
    except IntegrityError:  # a concurrent writer of the same key won
        return OutboxMessage.objects.get(integration=integration, dedup_key=dedup_key)


def ticket_key(*, kind: str, ref: str) -> str:
    return f"{settings.INTEGRATIONS_KEY_PREFIX}-{kind}-{ref}"


def finding_subject_ref(finding: Finding) -> str:
    return f"finding:{finding.rule.slug}:{finding.node_id}:{finding.subject}"


def finding_facts(finding: Finding, event_kind: str) -> EventFacts:
    node = finding.node
    return EventFacts(event_kind=event_kind, responsible_party=finding.responsible_party, severity=finding.severity,
                      provider_id=node.provider_id, pool_id=node.pool_id, site_id=node.site_id,
                      delivery_form=node.delivery_form, rule=finding.rule.slug)


def _active_ticket(integration: Integration, subject_ref: str) -> Ticket | None:
    return (Ticket.objects.select_for_update().filter(integration=integration, subject_ref=subject_ref,
                                                      state__in=TICKET_ACTIVE_STATES).order_by("-id").first())


def _finding_event(finding: Finding, event_kind: str) -> dict:
    return {"kind": event_kind, "subject": SubjectKind.FINDING, "finding_id": finding.pk, "node_id": finding.node_id,
            "rule": finding.rule.slug, "severity": finding.severity, "summary": finding.summary}


def _cancel_held_resolve(ticket: Ticket) -> bool:
    """Cancel a resolve that has not gone out yet; False when one is already on its way or delivered."""
    held = ticket.messages.filter(action=TicketAction.RESOLVE).exclude(state=MessageState.CANCELLED)
    if held.exclude(state__in=[MessageState.PENDING, MessageState.RETRYING]).exists():
        return False
    held.update(state=MessageState.CANCELLED, last_error="cancelled: the condition came back inside the hold")
    return True


def _finding_opened(integration: Integration, finding: Finding, now: datetime) -> OutboxMessage:
    ref = finding_subject_ref(finding)
    event = _finding_event(finding, EventKind.FINDING_OPENED)
    ticket = _active_ticket(integration, ref)
    if ticket is not None and (ticket.resolve_after is None or _cancel_held_resolve(ticket)):
        # The same occurrence goes on (a flap inside the hold window): no second ticket, an update on this one.
        ticket.resolve_after = None
        ticket.save(update_fields=["resolve_after"])
        ticket.findings.add(finding)
        return message_write(integration=integration, ticket=ticket, event_kind=EventKind.FINDING_OPENED,
                             action=TicketAction.UPDATE, dedup_key=f"{ticket.key}:update:finding-{finding.pk}",
                             event=event | {"reopened": True}, now=now)
    ticket, _ = Ticket.objects.get_or_create(
        integration=integration, key=ticket_key(kind="finding", ref=str(finding.pk)),
        defaults={"subject_kind": SubjectKind.FINDING, "subject_ref": ref, "node_id": finding.node_id,
                  "opened_at": now, "title": finding.summary[:300]})
    ticket.findings.add(finding)
    return message_write(integration=integration, ticket=ticket, event_kind=EventKind.FINDING_OPENED,
                         action=TicketAction.OPEN, dedup_key=f"{ticket.key}:open", event=event, now=now)


def _finding_resolved(integration: Integration, finding: Finding, now: datetime) -> OutboxMessage | None:
    ticket = (Ticket.objects.select_for_update().filter(integration=integration, findings=finding,
                                                        state__in=TICKET_ACTIVE_STATES).order_by("-id").first())
    if ticket is None:
        return None  # this integration never had a ticket for it (routing changed since): nothing to close
    ticket.resolve_after = now + timedelta(seconds=integration.resolve_hold_s)
    ticket.save(update_fields=["resolve_after"])
    return message_write(integration=integration, ticket=ticket, event_kind=EventKind.FINDING_RESOLVED,
                         action=TicketAction.RESOLVE, dedup_key=f"{ticket.key}:resolve:finding-{finding.pk}",
                         event=_finding_event(finding, EventKind.FINDING_RESOLVED), now=now,
                         not_before=ticket.resolve_after)


def findings_outbox_write(*, opened: list[int], resolved: list[int], now: datetime | None = None
                          ) -> list[OutboxMessage]:
    """Messages for findings opened and resolved in the caller's transaction, to every integration routed."""
    router = Router()
    if not router or not (opened or resolved):
        return []
    now = now or timezone.now()
    findings = {f.pk: f for f in Finding.objects.filter(pk__in=[*opened, *resolved])
                .select_related("rule", "node")}
    written = []
    for kind, ids in ((EventKind.FINDING_RESOLVED, resolved), (EventKind.FINDING_OPENED, opened)):
        for finding_id in ids:
            finding = findings.get(finding_id)
            if finding is None:
                continue
            for integration in router.integrations_for(finding_facts(finding, kind)):
                if kind == EventKind.FINDING_OPENED:
                    written.append(_finding_opened(integration, finding, now))
                else:
                    message = _finding_resolved(integration, finding, now)
                    if message is not None:
                        written.append(message)
    kick_after_commit(written, now)
    return written


def integration_test_message_write(*, integration: Integration, actor, now: datetime | None = None) -> OutboxMessage:
    now = now or timezone.now()
    stamp = now.strftime("%Y%m%dT%H%M%S.%fZ")
    with transaction.atomic():
        message = message_write(integration=integration, event_kind=EventKind.TEST, action=TicketAction.NOTIFY,
                                dedup_key=f"{settings.INTEGRATIONS_KEY_PREFIX}-test-{integration.pk}-{stamp}",
                                event={"kind": EventKind.TEST, "requested_by": getattr(actor, "username", "")},
                                now=now)
        kick_after_commit([message], now)
    return message


def ticket_state_set(*, ticket: Ticket, state: str, now: datetime) -> None:
    fields = ["state", "last_update_at"]
    ticket.state, ticket.last_update_at = state, now
    if state == TicketState.RESOLVED and ticket.resolved_at is None:
        ticket.resolved_at = now
        fields.append("resolved_at")
    ticket.save(update_fields=fields)



def ticket_acknowledge(*, ticket: Ticket, actor, note: str = "", now: datetime | None = None) -> OutboxMessage:
    """An operator acknowledges the external alert or ticket: PagerDuty and Opsgenie acknowledge it (escalation
    stops paging people), ticketing systems get a note. Audited."""
    from fleet.core.api.errors import DomainError
    from fleet.core.models import AuditEntry
    from fleet.core.services import audit_record

    now = now or timezone.now()
    if ticket.state not in TICKET_ACTIVE_STATES:
        raise DomainError(f"Ticket {ticket.key} is {ticket.state}; only an open ticket can be acknowledged.",
                          code="ticket_closed", fields={"state": [ticket.state]})
    who = getattr(actor, "username", "") or "an operator"
    with transaction.atomic():
        message = message_write(integration=ticket.integration, ticket=ticket, event_kind=EventKind.TICKET_ACKNOWLEDGED,
                                action=TicketAction.ACKNOWLEDGE,
                                dedup_key=f"{ticket.key}:acknowledge:{now.strftime('%Y%m%dT%H%M%S.%fZ')}",
                                event={"kind": EventKind.TICKET_ACKNOWLEDGED, "ticket": ticket.key,
                                       "acknowledged_by": who, "note": note[:500]}, now=now)
        audit_record(actor=actor, action=AuditEntry.Action.ACTION, instance=ticket, note=f"acknowledge: {note}"[:200],
                     after={"message": message.pk})
        kick_after_commit([message], now)
    return message
