from django.db import models


class StepKind(models.TextChoices):
    """What one workflow step does. How it physically happens is the executor's business."""

    CORDON = "cordon", "Cordon (no new work)"
    DRAIN = "drain", "Drain running work"
    CHECKPOINT = "checkpoint", "Checkpoint now"
    COLLECT_EVIDENCE = "collect_evidence", "Collect evidence"
    RESET_GPU = "reset_gpu", "Reset the GPU"
    REBOOT = "reboot", "Reboot the machine"
    ROLLBACK_STACK = "rollback_stack", "Roll the stack back to the baseline"
    OPEN_TICKET = "open_ticket", "Open a ticket"
    AWAIT_EXTERNAL = "await_external", "Wait for an outside party"
    REQUEST_REPLACEMENT = "request_replacement", "Request a replacement"
    RECORD_RECLAIM = "record_reclaim", "Record the reclaim"
    RMA = "rma", "RMA with the hardware vendor"
    VERIFY = "verify", "Verify"
    RUN_DIAGNOSTICS = "run_diagnostics", "Run DCGM diagnostics (gate)"
    RETURN_TO_SERVICE = "return_to_service", "Return to service"
    TERMINATE = "terminate", "Terminate the instance"
    RETIRE = "retire", "Retire the node"


# Destructive steps always wait for an operator's or admin's approval, whatever the workflow says.
DESTRUCTIVE_KINDS = frozenset({StepKind.TERMINATE, StepKind.RETIRE, StepKind.RMA})
# Steps that take capacity away or touch running work: held outside a pool's maintenance windows.
DISRUPTIVE_KINDS = frozenset({StepKind.DRAIN, StepKind.RESET_GPU, StepKind.REBOOT, StepKind.ROLLBACK_STACK,
                              StepKind.REQUEST_REPLACEMENT, StepKind.RMA, StepKind.TERMINATE, StepKind.RETIRE})


class IncidentState(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    WAITING = "waiting", "Waiting"
    AWAITING_APPROVAL = "awaiting_approval", "Waiting for approval"
    NEEDS_ATTENTION = "needs_attention", "Needs an operator"
    PAUSED = "paused", "Paused"
    RESOLVED = "resolved", "Resolved"
    CANCELLED = "cancelled", "Cancelled"


CLOSED_STATES = frozenset({IncidentState.RESOLVED, IncidentState.CANCELLED})
OPEN_STATES = frozenset(set(IncidentState) - CLOSED_STATES)
# Started and not closed: these hold one of the pool's remediation slots.
ACTIVE_STATES = frozenset({IncidentState.RUNNING, IncidentState.WAITING, IncidentState.AWAITING_APPROVAL,
                           IncidentState.NEEDS_ATTENTION, IncidentState.PAUSED})


class WaitingOn(models.TextChoices):
    NOTHING = "", "Nothing"
    OPERATOR = "operator", "An operator"
    PROVIDER = "provider", "The provider"
    VENDOR = "vendor", "The hardware vendor"
    PLATFORM_TEAM = "platform_team", "Our platform team"
    REPLACEMENT = "replacement", "A replacement node"
    VERIFICATION = "verification", "Verification checks"
    MAINTENANCE_WINDOW = "maintenance_window", "The maintenance window"
    RETRY = "retry", "A retry"
    EXECUTOR = "executor", "The executor"


class CauseKind(models.TextChoices):
    RULE = "rule", "Health rule"
    XID = "xid", "Xid"
    PREEMPTION = "preemption", "Preemption"
    MANUAL = "manual", "Operator"
    MASS_FAILURE = "mass_failure", "Mass failure"


class StepStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    AWAITING_APPROVAL = "awaiting_approval", "Waiting for approval"
    RUNNING = "running", "Running"
    WAITING = "waiting", "Waiting"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    SKIPPED = "skipped", "Skipped"
    CANCELLED = "cancelled", "Cancelled"


STEP_TERMINAL = frozenset({StepStatus.DONE, StepStatus.FAILED, StepStatus.SKIPPED, StepStatus.CANCELLED})


class OnFailure(models.TextChoices):
    RETRY = "retry", "Retry with back-off"
    ESCALATE = "escalate", "Escalate to another workflow"
    WAIT = "wait", "Wait for an operator"
    CONTINUE = "continue", "Note the failure and go on (best-effort steps)"


class TimelineKind(models.TextChoices):
    OPENED = "opened", "Opened"
    FINDING_ATTACHED = "finding_attached", "Finding attached"
    QUEUED = "queued", "Queued"
    STARTED = "started", "Started"
    PAUSED = "paused", "Paused"
    RESUMED = "resumed", "Resumed"
    APPROVAL_REQUESTED = "approval_requested", "Approval requested"
    APPROVED = "approved", "Approved"
    STEP_STARTED = "step_started", "Step started"
    STEP_WAITING = "step_waiting", "Step waiting"
    STEP_DONE = "step_done", "Step done"
    STEP_FAILED = "step_failed", "Step failed"
    STEP_RETRY = "step_retry", "Retry scheduled"
    STEP_SKIPPED = "step_skipped", "Step skipped"
    STEP_INTERRUPTED = "step_interrupted", "Step interrupted"
    DRY_RUN = "dry_run", "Dry run"
    ESCALATED = "escalated", "Escalated"
    REPLACEMENT_LINKED = "replacement_linked", "Replacement linked"
    BREAKER_TRIPPED = "breaker_tripped", "Circuit breaker tripped"
    BREAKER_RESET = "breaker_reset", "Circuit breaker reset"
    NOTE = "note", "Note"
    RESOLVED = "resolved", "Resolved"
    CANCELLED = "cancelled", "Cancelled"


class IntakeOutcome(models.TextChoices):
    """What remediation did with a finding (one row per finding, so "why no incident?" has an answer)."""

    OPENED = "opened", "Opened an incident"
    ATTACHED = "attached", "Attached to an open incident"
    MASS_FAILURE = "mass_failure", "Attached to a mass-failure incident"
    NO_POLICY = "no_policy", "No policy matched"
    IGNORED = "ignored", "A policy says: no incident"
    SNOOZED = "snoozed", "Snoozed by an operator"
    MARKED_HEALTHY = "marked_healthy", "Marked healthy by an operator"
    RESOLVED_FIRST = "resolved_first", "Resolved before intake"
    NODE_RETIRED = "node_retired", "Node retired"
    PRE_EXISTING = "pre_existing", "Open before remediation was installed"


class OverrideKind(models.TextChoices):
    ACKNOWLEDGE = "acknowledge", "Acknowledge"
    SNOOZE = "snooze", "Snooze until"
    MARK_HEALTHY = "mark_healthy", "Mark healthy until"


class BreakerScope(models.TextChoices):
    POOL = "pool", "Pool"
    SITE = "site", "Site"


class BreakerState(models.TextChoices):
    CLOSED = "closed", "Closed (automation runs)"
    OPEN = "open", "Open (automation paused)"


class IncidentEventKind(models.TextChoices):
    """What other apps (the ticketing outbox) hear about through `fleet.remediation.signals`."""

    OPENED = "opened", "Opened"
    STEP_CHANGED = "step_changed", "Step changed"
    AWAITING_APPROVAL = "awaiting_approval", "Waiting for approval"
    CLOSED = "closed", "Closed"
    BREAKER_TRIPPED = "breaker_tripped", "Circuit breaker tripped"
