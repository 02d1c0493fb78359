"""The delivery worker: claim a due message, send it through its connector, record what happened.

Exactly once from the receiver's point of view (docs/integrations.md):

* A message is claimed with a conditional UPDATE (state → sending, attempts + 1, a lease) and sent outside any
  transaction; the outcome is committed afterwards. A worker that dies between sending and committing leaves the
  row in `sending`; once the lease runs out the sweep sends it again under the same dedup key, and the receiver's
  dedup (PagerDuty dedup_key, Opsgenie alias, CloudEvents id, our correlation-id look-up) absorbs the copy.
* Messages of one ticket go out in order: a message waits while an earlier one of its ticket is unfinished
  (including dead-lettered: a comment cannot reach a ticket that was never created).
* Failures back off exponentially with jitter (`INTEGRATIONS_BACKOFF_BASE_S` doubling up to
  `INTEGRATIONS_BACKOFF_MAX_S`); a 429 or 503 with Retry-After waits as long as it says; 4xx other than
  408/409/425/429 dead-letters at once (the request is wrong and will stay wrong); after `max_attempts` tries the
  message is dead-lettered. An operator can retry a dead message (`message_retry`).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from fleet.core.api.errors import DomainError
from fleet.core.crypto import decrypt_json
from fleet.core.models import AuditEntry
from fleet.core.services import audit_record
from fleet.health.models import Finding

from ..choices import (
    BLOCKING_STATES,
    DUE_STATES,
    AttemptOutcome,
    EventKind,
    MessageState,
    TicketAction,
    TicketState,
    UpdateSource,
)
from ..connectors import connector_for
from ..connectors.base import DeliveryError, Envelope, SendResult, TicketRef
from ..connectors.http import Http
from ..content import acknowledgement_content, finding_content, test_content
from ..models import DeliveryAttempt, DeliveryCounter, OutboxMessage, Ticket, TicketUpdate
from .outbox import ticket_state_set

logger = logging.getLogger(__name__)

SWEEP_BATCH = 200
# Registered renderers for event kinds other apps add (incidents, workflow steps): kind prefix → callable.
RENDERERS: dict[str, Callable[[OutboxMessage, datetime], dict]] = {}


def backoff_delay(attempt: int, *, retry_after: float | None = None) -> float:
    """Seconds before try `attempt + 1`: Retry-After when the receiver gave one, else exponential with jitter."""
    if retry_after is not None:
        return retry_after + random.uniform(0, 1)
    ceiling = min(settings.INTEGRATIONS_BACKOFF_MAX_S, settings.INTEGRATIONS_BACKOFF_BASE_S * 2 ** (attempt - 1))
    return random.uniform(ceiling / 2, ceiling)


def max_attempts_for(message: OutboxMessage) -> int:
    return message.integration.max_attempts or settings.INTEGRATIONS_MAX_ATTEMPTS


def _exhausted(message: OutboxMessage) -> bool:
    """Tries since the message was created or an operator last retried it have reached the limit."""
    return message.attempts - message.attempts_base >= max_attempts_for(message)


def _lease() -> timedelta:
    return timedelta(seconds=settings.INTEGRATIONS_LEASE_S)


def _blocked(message: OutboxMessage) -> OutboxMessage | None:
    """The earlier unfinished message of the same ticket this one waits for, if any."""
    if message.ticket_id is None:
        return None
    return (OutboxMessage.objects.filter(ticket_id=message.ticket_id, id__lt=message.pk, state__in=BLOCKING_STATES)
            .order_by("id").first())


def message_claim(*, message_id: int, now: datetime) -> OutboxMessage | None:
    """Take a due message for sending; None when it is not due, is someone else's, or waits for an earlier one."""
    message = OutboxMessage.objects.filter(pk=message_id).first()
    if message is None or _blocked(message) is not None:
        return None
    # A disabled integration's messages wait (they go out when it is enabled again).
    claimed = (OutboxMessage.objects
               .filter(pk=message_id, state__in=[*DUE_STATES, MessageState.QUEUED], next_attempt_at__lte=now,
                       integration__enabled=True)
               .update(state=MessageState.SENDING, lease_until=now + _lease(), attempts=F("attempts") + 1))
    if not claimed:
        return None
    return OutboxMessage.objects.select_related("integration", "ticket").get(pk=message_id)


def message_render(message: OutboxMessage, now: datetime) -> dict:
    kind = message.event_kind
    if kind == EventKind.TEST:
        return test_content(integration_name=message.integration.name, now=now)
    if kind == EventKind.TICKET_ACKNOWLEDGED:
        return acknowledgement_content(ticket=message.ticket, event=message.event, now=now)
    if kind in (EventKind.FINDING_OPENED, EventKind.FINDING_RESOLVED):
        finding = Finding.objects.filter(pk=message.event.get("finding_id")).first()
        if finding is None:
            raise DeliveryError("the finding was deleted before the message could be rendered", retryable=False)
        return finding_content(finding=finding, event_kind=kind, action=message.action, now=now)
    for prefix, renderer in RENDERERS.items():
        if kind.startswith(prefix):
            return renderer(message, now)
    raise DeliveryError(f"no renderer for event kind {kind!r}", retryable=False)


def _envelope(message: OutboxMessage, secrets: dict, now: datetime) -> Envelope:
    ticket = message.ticket
    ref = TicketRef(key=ticket.key, external_id=ticket.external_id, external_url=ticket.external_url,
                    data=dict(ticket.data)) if ticket is not None else None

    def checkpoint(progress: dict) -> None:
        OutboxMessage.objects.filter(pk=message.pk).update(progress=progress)

    return Envelope(integration_name=message.integration.name, config=dict(message.integration.config),
                    secrets=secrets, dedup_key=message.dedup_key, event_kind=message.event_kind,
                    action=message.action, attempt=message.attempts, content=message.payload or {}, ticket=ref,
                    created_at=message.created_at, progress=dict(message.progress), checkpoint=checkpoint)


def message_deliver(*, message_id: int, now: datetime | None = None) -> str:
    """Claim and send one message; returns the attempt's outcome, or "skipped" when it was not ours to send."""
    now = now or timezone.now()
    message = message_claim(message_id=message_id, now=now)
    if message is None:
        return "skipped"
    integration = message.integration
    http = None
    try:
        connector = connector_for(integration.kind)
        secrets = decrypt_json(integration.secrets_encrypted)
        if message.payload is None:
            message.payload = message_render(message, now)
            OutboxMessage.objects.filter(pk=message.pk).update(payload=message.payload)
        http = Http(timeout=settings.INTEGRATIONS_HTTP_TIMEOUT_S, secrets=list(secrets.values()),
                    ca_bundle=integration.config.get("ca_bundle", ""), client_cert=secrets.get("client_cert", ""),
                    client_key=secrets.get("client_key", ""))
        result = connector.send(_envelope(message, secrets, now), http)
    except DeliveryError as exc:
        return _record_failure(message, now, exc, http)
    except DomainError as exc:  # secrets unreadable: nothing a retry fixes until someone acts
        return _record_failure(message, now, DeliveryError(str(exc.detail), retryable=False), http)
    except Exception as exc:
        logger.exception("delivery of outbox message %s failed unexpectedly", message.pk)
        return _record_failure(message, now, DeliveryError(f"internal error: {type(exc).__name__}: {exc}",
                                                           retryable=True), http)
    return _record_success(message, now, result, http)


def _attempt_log(message: OutboxMessage, now: datetime, outcome: str, http: Http | None, *, error: str = "",
                 status: int | None = None, retry_after: float | None = None) -> None:
    DeliveryAttempt.objects.create(
        message=message, number=message.attempts, started_at=now, finished_at=timezone.now(), outcome=outcome,
        status_code=status, error=error[:500], exchanges=http.exchanges if http else [],
        retry_after_s=round(retry_after) if retry_after is not None else None)


def _count(message: OutboxMessage, **increments) -> None:
    counter, _ = DeliveryCounter.objects.get_or_create(integration_id=message.integration_id)
    DeliveryCounter.objects.filter(pk=counter.pk).update(**{k: F(k) + v for k, v in increments.items()})


def _still_ours(message: OutboxMessage) -> bool:
    return OutboxMessage.objects.filter(pk=message.pk, state=MessageState.SENDING,
                                        attempts=message.attempts).exists()


def _record_success(message: OutboxMessage, now: datetime, result: SendResult, http: Http | None) -> str:
    status = http.last_status if http else None
    with transaction.atomic():
        if not _still_ours(message):
            logger.warning("outbox message %s was taken over after its lease ran out; outcome dropped", message.pk)
            return "skipped"
        response = {k: v for k, v in {"external_id": result.external_id, "external_url": result.external_url,
                                      "note": result.note}.items() if v}
        OutboxMessage.objects.filter(pk=message.pk).update(
            state=MessageState.DELIVERED, delivered_at=now, lease_until=None, last_status_code=status,
            last_error="", response=response)
        _attempt_log(message, now, AttemptOutcome.DELIVERED, http, status=status)
        _count(message, sent=1)
        if message.ticket_id:
            _ticket_after_delivery(message, result, now)
    if message.ticket_id:
        _kick_next(message.ticket_id, now)
    return AttemptOutcome.DELIVERED


_ACTION_STATE = {TicketAction.OPEN: TicketState.OPEN, TicketAction.ACKNOWLEDGE: TicketState.ACKNOWLEDGED,
                 TicketAction.RESOLVE: TicketState.RESOLVED}


def _ticket_after_delivery(message: OutboxMessage, result: SendResult, now: datetime) -> None:
    ticket = Ticket.objects.select_for_update().get(pk=message.ticket_id)
    fields = []
    if result.external_id and not ticket.external_id:
        ticket.external_id = result.external_id[:200]
        fields.append("external_id")
    if result.external_url and not ticket.external_url:
        ticket.external_url = result.external_url[:500]
        fields.append("external_url")
    if result.ticket_data:
        ticket.data = {**ticket.data, **result.ticket_data}
        fields.append("data")
    if fields:
        ticket.save(update_fields=fields)
    state = _ACTION_STATE.get(message.action)
    if state == TicketState.OPEN and ticket.state != TicketState.OPENING:
        state = None  # an inbound update got there first (acknowledged): keep it
    if state:
        ticket_state_set(ticket=ticket, state=state, now=now)
    TicketUpdate.objects.create(ticket=ticket, integration_id=message.integration_id, at=now,
                                source=UpdateSource.OUTBOUND, state=state or "",
                                comment=f"{message.get_action_display()} sent ({message.get_event_kind_display()})")


def _record_failure(message: OutboxMessage, now: datetime, exc: DeliveryError, http: Http | None) -> str:
    dead = not exc.retryable or _exhausted(message)
    error = str(exc)
    if dead and exc.retryable:
        error = f"{error} (gave up after {message.attempts} tries)"
    with transaction.atomic():
        if not _still_ours(message):
            return "skipped"
        if dead:
            OutboxMessage.objects.filter(pk=message.pk).update(
                state=MessageState.DEAD, dead_at=now, lease_until=None, last_status_code=exc.status_code,
                last_error=error[:500])
        else:
            delay = backoff_delay(message.attempts, retry_after=exc.retry_after)
            OutboxMessage.objects.filter(pk=message.pk).update(
                state=MessageState.RETRYING, next_attempt_at=now + timedelta(seconds=delay), lease_until=None,
                last_status_code=exc.status_code, last_error=error[:500])
        outcome = AttemptOutcome.DEAD if dead else AttemptOutcome.RETRY
        _attempt_log(message, now, outcome, http, error=error, status=exc.status_code, retry_after=exc.retry_after)
        _count(message, failed=1, **({"dead_lettered": 1} if dead else {}))
    level = logging.WARNING if dead else logging.INFO
    logger.log(level, "outbox message %s to %s: %s", message.pk, message.integration.name, error)
    return outcome


def _kick_next(ticket_id: int, now: datetime) -> None:
    following = (OutboxMessage.objects.filter(ticket_id=ticket_id, state__in=DUE_STATES, next_attempt_at__lte=now)
                 .order_by("id").values_list("pk", flat=True).first())
    if following is not None:
        from .outbox import _kick

        transaction.on_commit(partial(_kick, [following]), robust=True)


def _reclaim_expired(now: datetime) -> int:
    """Messages whose worker died: `sending` past the lease is sent again (same dedup key); `queued` past the lease
    (the task was lost) becomes due again."""
    OutboxMessage.objects.filter(state=MessageState.QUEUED, lease_until__lte=now).update(
        state=MessageState.RETRYING, lease_until=None)
    reclaimed = 0
    for message in OutboxMessage.objects.filter(state=MessageState.SENDING, lease_until__lte=now).select_related(
            "integration"):
        with transaction.atomic():
            dead = _exhausted(message)
            taken = OutboxMessage.objects.filter(pk=message.pk, state=MessageState.SENDING,
                                                 attempts=message.attempts).update(
                state=MessageState.DEAD if dead else MessageState.RETRYING, lease_until=None, next_attempt_at=now,
                dead_at=now if dead else None,
                last_error="interrupted: the worker stopped before recording the outcome" + (
                    f" (gave up after {message.attempts} tries)" if dead else ""))
            if taken:
                reclaimed += 1
                _attempt_log(message, now, AttemptOutcome.INTERRUPTED, None,
                             error="the worker stopped before recording the outcome; sent again under the same "
                                   "dedup key")
                _count(message, failed=1, **({"dead_lettered": 1} if dead else {}))
    return reclaimed


def due_message_ids(*, now: datetime, limit: int = SWEEP_BATCH) -> list[int]:
    """Due messages that are at the head of their ticket's queue, oldest first."""
    candidates = list(OutboxMessage.objects.filter(state__in=DUE_STATES, next_attempt_at__lte=now,
                                                   integration__enabled=True)
                      .order_by("next_attempt_at", "id").values_list("pk", "ticket_id")[:limit])
    tickets = {t for _, t in candidates if t is not None}
    heads = {}
    if tickets:
        for pk, ticket_id in (OutboxMessage.objects.filter(ticket_id__in=tickets, state__in=BLOCKING_STATES)
                              .order_by("ticket_id", "id").values_list("pk", "ticket_id")):
            heads.setdefault(ticket_id, pk)
    return [pk for pk, ticket_id in candidates if ticket_id is None or heads.get(ticket_id) == pk]


def outbox_deliver_due(*, now: datetime | None = None, inline: bool = False) -> dict:
    """The periodic sweep: reclaim dead workers' messages, then hand every due message to a worker (or, `inline`,
    send them here, one after the other — tests on a simulated clock and the embedded default's one process)."""
    now = now or timezone.now()
    reclaimed = _reclaim_expired(now)
    ids = due_message_ids(now=now)
    if inline:
        # One message per ticket is due at a time; go round until nothing more is (a worker's kick does this).
        outcomes, seen = [], set()
        while ids:
            outcomes += [message_deliver(message_id=pk, now=now) for pk in ids]
            seen.update(ids)
            ids = [pk for pk in due_message_ids(now=now) if pk not in seen]
        return {"reclaimed": reclaimed, "due": len(seen), "delivered": outcomes.count(AttemptOutcome.DELIVERED)}
    queued = []
    for pk in ids:
        if OutboxMessage.objects.filter(pk=pk, state__in=DUE_STATES, next_attempt_at__lte=now).update(
                state=MessageState.QUEUED, lease_until=now + _lease()):
            queued.append(pk)
    if queued:
        from .outbox import _kick

        _kick(queued)
    return {"reclaimed": reclaimed, "due": len(ids), "queued": len(queued)}


def message_retry(*, message: OutboxMessage, actor, now: datetime | None = None) -> OutboxMessage:
    """An operator sends a dead-lettered (or waiting) message again now, with a fresh allowance of tries."""
    now = now or timezone.now()
    if message.state not in (MessageState.DEAD, MessageState.RETRYING, MessageState.PENDING):
        raise DomainError(f"A {message.get_state_display().lower()} message cannot be retried.",
                          code="not_retryable", fields={"state": [message.state]})
    with transaction.atomic():
        before = {"state": message.state, "attempts": message.attempts}
        OutboxMessage.objects.filter(pk=message.pk).update(state=MessageState.RETRYING, next_attempt_at=now,
                                                           attempts_base=F("attempts"), dead_at=None,
                                                           lease_until=None)
        audit_record(actor=actor, action=AuditEntry.Action.ACTION, instance=message, before=before,
                     after={"state": MessageState.RETRYING}, note="retry")
        transaction.on_commit(partial(_kick_one, message.pk), robust=True)
    message.refresh_from_db()
    return message


def _kick_one(message_id: int) -> None:
    from .outbox import _kick

    _kick([message_id])


def blocking_message(message: OutboxMessage) -> OutboxMessage | None:
    if message.state not in DUE_STATES:
        return None
    return _blocked(message)

