"""Inbound updates: an external system tells us about its ticket (acknowledged, in progress, resolved, a comment
such as "hardware replaced").

Authentication, per integration (its endpoint is /api/v1/inbound/<inbound_id>/):
* the integration token (`Authorization: Bearer fit_…` or `X-Fleet-Token`), for systems that cannot sign; or
* the system's own webhook signature made with the integration's `inbound_secret` (our webhook scheme with a
  replay window, PagerDuty `X-PagerDuty-Signature`, Jira `X-Hub-Signature`).
Anything else is 401 and stores nothing; a disabled integration is 403. An update carries the sender's event id
and is stored once however often it is replayed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework import exceptions

from fleet.core.crypto import decrypt_json

from ..choices import TicketState, UpdateSource
from ..connectors import connector_for
from ..connectors.base import InboundRejected, InboundUpdate
from ..connectors.webhook import generic_update
from ..models import Integration, Ticket, TicketUpdate
from ..signals import ticket_updated
from .integrations import inbound_token_matches
from .outbox import ticket_state_set


class InboundUnauthorized(exceptions.AuthenticationFailed):
    default_detail = "Unknown integration, or a missing or invalid signature or token."
    default_code = "inbound_unauthorized"


@dataclass
class InboundResult:
    stored: int = 0
    duplicates: int = 0
    unknown_ticket: int = 0
    ignored: int = 0

    def as_dict(self) -> dict:
        return {"stored": self.stored, "duplicates": self.duplicates, "unknown_ticket": self.unknown_ticket,
                "ignored": self.ignored}


def _bearer(headers: dict[str, str]) -> str:
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return headers.get("x-fleet-token", "").strip()


def inbound_authenticate(*, inbound_id: str, headers: dict[str, str], body: bytes, now: datetime) -> Integration:
    integration = Integration.objects.filter(inbound_id=inbound_id).first()
    if integration is None:
        raise InboundUnauthorized()
    token = _bearer(headers)
    if token:
        if not inbound_token_matches(integration, token):
            raise InboundUnauthorized()
    else:
        connector = connector_for(integration.kind)
        secret = decrypt_json(integration.secrets_encrypted).get(connector.inbound_secret) \
            if connector.inbound_secret else ""
        if not secret or not connector.verify_signature(headers=headers, body=body, secret=secret, now=now):
            raise InboundUnauthorized()
    if not integration.enabled:
        raise exceptions.PermissionDenied("This integration is disabled.")
    return integration


def _updates(integration: Integration, headers: dict[str, str], payload) -> list[InboundUpdate]:
    if not isinstance(payload, dict):
        raise InboundRejected("the body must be a JSON object")
    if "ticket" in payload or "specversion" in payload:
        return [generic_update(payload)]
    return connector_for(integration.kind).parse_inbound(headers=headers, payload=payload)


def _ticket_for(integration: Integration, update: InboundUpdate) -> Ticket | None:
    tickets = Ticket.objects.select_for_update().filter(integration=integration)
    if update.ticket_key:
        ticket = tickets.filter(key=update.ticket_key).first()
        if ticket is not None:
            return ticket
    if update.external_id:
        return tickets.filter(external_id=update.external_id).order_by("-id").first()
    return None


def inbound_receive(*, integration: Integration, headers: dict[str, str], payload, now: datetime | None = None
                    ) -> InboundResult:
    """Store the updates of one authenticated request on their tickets' timelines."""
    now = now or timezone.now()
    updates = _updates(integration, headers, payload)
    result = InboundResult()
    with transaction.atomic():
        for update in updates:
            if TicketUpdate.objects.filter(integration=integration, external_event_id=update.event_id).exists():
                result.duplicates += 1
                continue
            ticket = _ticket_for(integration, update)
            if ticket is None:
                result.unknown_ticket += 1
                continue
            try:
                with transaction.atomic():
                    stored = TicketUpdate.objects.create(
                        ticket=ticket, integration=integration, at=update.at or now, source=UpdateSource.INBOUND,
                        state=update.state, comment=update.comment, author=update.author,
                        external_event_id=update.event_id)
            except IntegrityError:  # the same event raced in on another request
                result.duplicates += 1
                continue
            _apply(ticket, update, now)
            ticket_updated.send(sender=Ticket, ticket=ticket, update=stored, now=now)
            result.stored += 1
    result.ignored = max(0, len(updates) - result.stored - result.duplicates - result.unknown_ticket)
    return result


def _apply(ticket: Ticket, update: InboundUpdate, now: datetime) -> None:
    fields = []
    if update.external_id and not ticket.external_id:
        ticket.external_id = update.external_id
        fields.append("external_id")
    if update.external_url and not ticket.external_url:
        ticket.external_url = update.external_url
        fields.append("external_url")
    if fields:
        ticket.save(update_fields=fields)
    if update.state and update.state != ticket.state:
        if update.state != TicketState.RESOLVED:
            ticket.resolved_at = None
            ticket.save(update_fields=["resolved_at"])
        ticket_state_set(ticket=ticket, state=update.state, now=now)
    else:
        Ticket.objects.filter(pk=ticket.pk).update(last_update_at=now)
