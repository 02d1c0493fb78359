from django.db import models


class ConnectorKind(models.TextChoices):
    WEBHOOK = "webhook", "Generic webhook (CloudEvents)"
    PAGERDUTY = "pagerduty", "PagerDuty Events API v2"
    OPSGENIE = "opsgenie", "Opsgenie"
    SERVICENOW = "servicenow", "ServiceNow"
    JIRA = "jira", "Jira Cloud"
    EMAIL = "email", "E-mail"
    SLACK = "slack", "Slack incoming webhook"


class EventKind(models.TextChoices):
    """What happened, as routing rules and receivers see it."""

    FINDING_OPENED = "finding.opened", "Finding opened"
    FINDING_RESOLVED = "finding.resolved", "Finding resolved"
    INCIDENT_OPENED = "incident.opened", "Incident opened"
    INCIDENT_STEP_CHANGED = "incident.step_changed", "Incident step changed"
    INCIDENT_APPROVAL_NEEDED = "incident.approval_needed", "Incident waiting for approval"
    INCIDENT_CLOSED = "incident.closed", "Incident closed"
    CIRCUIT_BREAKER_TRIPPED = "circuit_breaker.tripped", "Circuit breaker tripped"
    TICKET_REQUESTED = "ticket.requested", "Ticket requested by a workflow step"
    TICKET_ACKNOWLEDGED = "ticket.acknowledged", "Ticket acknowledged by an operator"
    TEST = "test", "Test message"


class TicketAction(models.TextChoices):
    """What one message does to the external ticket."""

    OPEN = "open", "Open"
    UPDATE = "update", "Update (comment / work note)"
    ACKNOWLEDGE = "acknowledge", "Acknowledge"
    RESOLVE = "resolve", "Resolve / close"
    NOTIFY = "notify", "Notify (no ticket)"


class MessageState(models.TextChoices):
    PENDING = "pending", "Pending"
    QUEUED = "queued", "Queued for a worker"
    SENDING = "sending", "Sending"
    RETRYING = "retrying", "Waiting to retry"
    DELIVERED = "delivered", "Delivered"
    DEAD = "dead", "Dead-lettered"
    CANCELLED = "cancelled", "Cancelled"


# A message in one of these states holds back the later messages of its ticket (they go out in order: a comment
# or a resolve cannot reach a ticket that was never created).
BLOCKING_STATES = [MessageState.PENDING, MessageState.QUEUED, MessageState.SENDING, MessageState.RETRYING,
                   MessageState.DEAD]
DUE_STATES = [MessageState.PENDING, MessageState.RETRYING]


class AttemptOutcome(models.TextChoices):
    DELIVERED = "delivered", "Delivered"
    RETRY = "retry", "Failed, will retry"
    DEAD = "dead", "Failed, dead-lettered"
    INTERRUPTED = "interrupted", "Interrupted (worker lost)"


class TicketState(models.TextChoices):
    """Our record of the external ticket; inbound updates move it."""

    OPENING = "opening", "Opening"
    OPEN = "open", "Open"
    ACKNOWLEDGED = "acknowledged", "Acknowledged"
    IN_PROGRESS = "in_progress", "In progress"
    RESOLVED = "resolved", "Resolved"


TICKET_ACTIVE_STATES = [TicketState.OPENING, TicketState.OPEN, TicketState.ACKNOWLEDGED, TicketState.IN_PROGRESS]


class SubjectKind(models.TextChoices):
    FINDING = "finding", "Finding"
    INCIDENT = "incident", "Incident"


class UpdateSource(models.TextChoices):
    INBOUND = "inbound", "Inbound update from the external system"
    OUTBOUND = "outbound", "Our delivery"
