"""Integrations with ticketing and notification systems: where messages go, the outbox that carries them, the
external tickets they open and the updates those tickets send back."""

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from fleet.health.models import Finding
from fleet.inventory.models import Node

from .choices import (
    AttemptOutcome,
    ConnectorKind,
    EventKind,
    MessageState,
    SubjectKind,
    TicketAction,
    TicketState,
    UpdateSource,
)

MAX_HOLD_S = 7 * 24 * 3600


class Integration(models.Model):
    """One configured connector: a PagerDuty service, a provider's support mailbox, a Jira project, …

    `config` holds what may be shown; `secrets_encrypted` holds credentials (Fernet, `FLEET_ENCRYPTION_KEYS`), of
    which the API only ever says which are set (`secret_names`)."""

    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=16, choices=ConnectorKind.choices)
    enabled = models.BooleanField(default=True)
    description = models.CharField(max_length=300, blank=True)
    config = models.JSONField(default=dict, blank=True)
    secrets_encrypted = models.TextField(blank=True)
    secret_names = models.JSONField(default=list, blank=True)
    max_attempts = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="Tries before a message is dead-lettered; blank = INTEGRATIONS_MAX_ATTEMPTS")
    resolve_hold_s = models.PositiveIntegerField(
        default=600, validators=[MaxValueValidator(MAX_HOLD_S)],
        help_text="How long a resolved finding keeps its ticket open: a flap inside it opens no second ticket")
    # The inbound endpoint: /api/v1/inbound/<inbound_id>/; the token (for systems that cannot sign) is stored hashed.
    inbound_id = models.CharField(max_length=32, unique=True)
    inbound_token_hash = models.CharField(max_length=64, blank=True)
    inbound_token_prefix = models.CharField(max_length=16, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"


class RoutingRule(models.Model):
    """Sends the events that match `match` to one integration. Every matching rule fires; an integration gets one
    message per event however many of its rules match."""

    integration = models.ForeignKey(Integration, on_delete=models.CASCADE, related_name="rules")
    name = models.CharField(max_length=100, blank=True)
    position = models.PositiveIntegerField(default=0)
    enabled = models.BooleanField(default=True)
    match = models.JSONField(default=dict, blank=True,
                             help_text="event_kinds, responsible_parties, severities, providers, pools, sites, "
                                       "rules (lists; empty or absent = any)")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["position", "id"]

    def __str__(self) -> str:
        return self.name or f"rule {self.pk} → {self.integration_id}"


class Ticket(models.Model):
    """One external ticket (or alert) per incident occurrence and integration."""

    integration = models.ForeignKey(Integration, on_delete=models.CASCADE, related_name="tickets")
    key = models.CharField(max_length=120, help_text="Our dedup key for the occurrence (PagerDuty dedup_key, "
                                                      "Opsgenie alias, ServiceNow correlation_id, Jira label)")
    subject_kind = models.CharField(max_length=16, choices=SubjectKind.choices)
    subject_ref = models.CharField(max_length=200, help_text="What the ticket is about across occurrences: a "
                                                             "finding's rule/node/subject, an incident key")
    incident_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    node = models.ForeignKey(Node, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    findings = models.ManyToManyField(Finding, blank=True, related_name="tickets")
    state = models.CharField(max_length=16, choices=TicketState.choices, default=TicketState.OPENING)
    external_id = models.CharField(max_length=200, blank=True)
    external_url = models.URLField(max_length=500, blank=True)
    title = models.CharField(max_length=300, blank=True)
    opened_at = models.DateTimeField()
    resolve_after = models.DateTimeField(null=True, blank=True,
                                         help_text="A resolve is held until then; a flap before it keeps the ticket")
    resolved_at = models.DateTimeField(null=True, blank=True)
    last_update_at = models.DateTimeField(null=True, blank=True)
    data = models.JSONField(default=dict, blank=True, help_text="Connector state (thread ids, transition ids)")

    class Meta:
        ordering = ["-opened_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["integration", "key"], name="ticket_unique_key")]
        indexes = [models.Index(fields=["integration", "subject_ref", "state"]),
                   models.Index(fields=["integration", "external_id"])]

    def __str__(self) -> str:
        return f"{self.key} @ {self.integration_id} ({self.state})"


class TicketUpdate(models.Model):
    """The ticket's timeline: what we sent and what the external system told us."""

    ticket = models.ForeignKey(Ticket, on_delete=models.CASCADE, related_name="updates")
    integration = models.ForeignKey(Integration, on_delete=models.CASCADE, related_name="+")
    at = models.DateTimeField()
    source = models.CharField(max_length=16, choices=UpdateSource.choices)
    state = models.CharField(max_length=16, choices=TicketState.choices, blank=True)
    comment = models.TextField(blank=True)
    author = models.CharField(max_length=200, blank=True)
    external_event_id = models.CharField(max_length=200, blank=True,
                                         help_text="The sender's event id: a replayed update is stored once")
    raw = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["at", "id"]
        constraints = [models.UniqueConstraint(fields=["integration", "external_event_id"],
                                               condition=~Q(external_event_id=""), name="ticket_update_unique_event")]

    def __str__(self) -> str:
        return f"{self.ticket_id} {self.source} {self.state} at {self.at}"


class OutboxMessage(models.Model):
    """A message to one integration, written in the transaction of the change that caused it and sent by the
    delivery worker until it is delivered or dead-lettered."""

    integration = models.ForeignKey(Integration, on_delete=models.CASCADE, related_name="messages")
    ticket = models.ForeignKey(Ticket, on_delete=models.CASCADE, null=True, blank=True, related_name="messages")
    event_kind = models.CharField(max_length=32, choices=EventKind.choices)
    action = models.CharField(max_length=16, choices=TicketAction.choices)
    dedup_key = models.CharField(max_length=200, help_text="Stable per message: receivers drop a second copy")
    event = models.JSONField(default=dict, blank=True, help_text="The facts of the change, as written")
    payload = models.JSONField(null=True, blank=True, help_text="The content, rendered once at the first try")
    progress = models.JSONField(default=dict, blank=True, help_text="Steps of a multi-call delivery already done")
    state = models.CharField(max_length=16, choices=MessageState.choices, default=MessageState.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    attempts_base = models.PositiveSmallIntegerField(default=0, help_text="attempts when an operator last retried "
                                                                          "it; the limit counts tries since")
    created_at = models.DateTimeField()
    next_attempt_at = models.DateTimeField()
    lease_until = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    dead_at = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    response = models.JSONField(default=dict, blank=True, help_text="What the receiver answered (ids, links)")

    class Meta:
        ordering = ["-id"]
        constraints = [models.UniqueConstraint(fields=["integration", "dedup_key"], name="outbox_unique_dedup_key")]
        indexes = [models.Index(fields=["state", "next_attempt_at"]), models.Index(fields=["ticket", "id"]),
                   models.Index(fields=["integration", "-id"])]

    def __str__(self) -> str:
        return f"{self.dedup_key} → {self.integration_id} ({self.state})"


class DeliveryAttempt(models.Model):
    """One try at sending a message: the requests made and what came back."""

    message = models.ForeignKey(OutboxMessage, on_delete=models.CASCADE, related_name="attempt_log")
    number = models.PositiveSmallIntegerField()
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=16, choices=AttemptOutcome.choices)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    retry_after_s = models.PositiveIntegerField(null=True, blank=True)
    exchanges = models.JSONField(default=list, blank=True,
                                 help_text="Each request (credentials redacted, body excerpt) and its response")

    class Meta:
        ordering = ["message_id", "number", "id"]

    def __str__(self) -> str:
        return f"{self.message_id}#{self.number} {self.outcome}"


class DeliveryCounter(models.Model):
    """Monotonic per-integration counters for /metrics, written in the delivery's transaction so every process
    (web, any worker) reports the same numbers."""

    integration = models.OneToOneField(Integration, on_delete=models.CASCADE, related_name="counter")
    sent = models.BigIntegerField(default=0)
    failed = models.BigIntegerField(default=0)
    dead_lettered = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.integration_id}: {self.sent}/{self.failed}/{self.dead_lettered}"
