"""The connector interface: one small class per external system, behind one registry.

A connector turns one outbox message (an `Envelope`) into the calls its system expects and says what came back
(`SendResult`), or raises `DeliveryError` saying whether a retry can help. It never touches the outbox itself;
the delivery service keeps the books (attempts, back-off, dead letters, the ticket record).

A delivery that needs several calls (Jira: create, then attach) records each finished step through
`Envelope.checkpoint`, which commits it at once, so a retry after a crash goes on from there; and before
creating anything on a retry it looks for what an interrupted try may already have created (by our ticket key).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from rest_framework import serializers

from fleet.core import outbound

from ..choices import TicketAction


class DeliveryError(Exception):
    """A delivery failed. `retryable`: a later try can succeed (timeouts, 5xx, 429); otherwise the message is
    dead-lettered at once (the request itself is wrong: 400, 401, 404, …) until an operator retries it."""

    def __init__(self, message: str, *, retryable: bool, status_code: int | None = None,
                 retry_after: float | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.status_code = status_code
        self.retry_after = retry_after


@dataclass(frozen=True)
class TicketRef:
    key: str
    external_id: str = ""
    external_url: str = ""
    data: dict = field(default_factory=dict)


@dataclass
class Envelope:
    """One message as a connector sees it: what to send, where, and what is already done."""

    integration_name: str
    config: dict
    secrets: dict
    dedup_key: str
    event_kind: str
    action: str
    attempt: int
    content: dict  # fleet.integrations.content: title, summary, body, severity, facts, links, evidence …
    ticket: TicketRef | None
    created_at: datetime
    progress: dict = field(default_factory=dict)
    checkpoint: Callable[[dict], None] = field(default=lambda progress: None, repr=False)

    def step_done(self, name: str, **values) -> None:
        """Record a finished step (with what it produced) and commit it before the next call."""
        self.progress[name] = values or True
        self.checkpoint(dict(self.progress))

    @property
    def retrying(self) -> bool:
        """Another try already ran (and may have got through before dying): look before creating."""
        return self.attempt > 1


@dataclass
class SendResult:
    external_id: str = ""
    external_url: str = ""
    ticket_data: dict = field(default_factory=dict)  # merged into Ticket.data (thread ids, incident ids)
    note: str = ""


@dataclass(frozen=True)
class InboundUpdate:
    """One change the external system told us about, located by our ticket key or by its own id."""

    event_id: str
    ticket_key: str = ""
    external_id: str = ""
    state: str = ""  # a TicketState value, or "" for a comment only
    comment: str = ""
    author: str = ""
    external_url: str = ""
    at: datetime | None = None


class InboundRejected(Exception):
    """A signed and authenticated request whose body we cannot read (a 400, stores nothing)."""


class Connector:
    kind: str = ""
    # False: a notification channel (chat, plain webhook receivers may still keep a ticket); no ticket is kept.
    keeps_tickets: bool = True
    # Secrets this connector reads, name → required.
    secret_fields: dict[str, bool] = {}
    # The name of the secret the external system signs inbound webhooks with, if it can sign.
    inbound_secret: str = ""
    config_serializer: type[serializers.Serializer] = serializers.Serializer

    def validate_config(self, config: dict) -> dict:
        serializer = self.config_serializer(data=config)
        serializer.is_valid(raise_exception=True)
        unknown = sorted(set(config) - set(serializer.fields))
        if unknown:
            raise serializers.ValidationError({name: ["Unknown setting for this connector."] for name in unknown})
        data = dict(serializer.validated_data)
        self.check_destinations(data)
        return data

    def check_destinations(self, config: dict) -> None:
        """A 400 naming the field when an address the connector will send to is outside the outbound policy
        (fleet.core.outbound); the send checks again, on the address it connects to."""
        problems = {}
        for name, field_ in self.config_serializer().fields.items():
            if isinstance(field_, serializers.URLField) and config.get(name):
                try:
                    outbound.validate_url(config[name])
                except outbound.OutboundRefused as exc:
                    problems[name] = [f"Not allowed: {exc}."]
        if problems:
            raise serializers.ValidationError(problems)

    def send(self, envelope: Envelope, http) -> SendResult:
        raise NotImplementedError

    def verify_signature(self, *, headers: dict[str, str], body: bytes, secret: str, now: datetime) -> bool:
        """True when the request carries a valid signature made with `secret` (connectors that can sign)."""
        return False

    def parse_inbound(self, *, headers: dict[str, str], payload: dict) -> list[InboundUpdate]:
        """The updates in a native inbound payload of this system (authenticated already)."""
        raise InboundRejected(f"{self.kind} sends no webhooks of its own; use the generic inbound format")


def hmac_sha256_hex(secret: str, message: bytes) -> str:
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signature_matches(expected: str, candidates: list[str]) -> bool:
    return any(hmac.compare_digest(expected, candidate.strip()) for candidate in candidates if candidate)


TICKET_ACTIONS = {TicketAction.OPEN, TicketAction.UPDATE, TicketAction.ACKNOWLEDGE, TicketAction.RESOLVE}


def clip(text: str, limit: int) -> str:
    text = text or ""
    return text if len(text) <= limit else text[: limit - 1] + "…"
