"""Incidents, workflows as data, remediation policies, guardrail settings, operator overrides."""

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from fleet.health.models import Finding
from fleet.inventory.choices import DeliveryForm, Layer, Owner
from fleet.inventory.models import GPU, Node, Pool, Provider, Site

from .choices import (
    OPEN_STATES,
    BreakerScope,
    BreakerState,
    CauseKind,
    IncidentState,
    IntakeOutcome,
    OverrideKind,
    StepStatus,
    TimelineKind,
    WaitingOn,
)

MAX_TIMEOUT_S = 30 * 86400


class Workflow(models.Model):
    """A named list of steps. `steps` is data (validated by `services.workflows.workflow_steps_clean`):
    [{"kind", "title", "params", "timeout_s", "requires_approval", "on_failure": {"action", ...}}, …]."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    steps = models.JSONField(default=list)
    urgent = models.BooleanField(
        default=False, help_text="Not held by the pool's concurrency limit or maintenance windows: the capacity is "
                                 "going away anyway (spot reclaim).")
    enabled = models.BooleanField(default=True)
    built_in = models.BooleanField(default=False, help_text="Shipped with the product (seeded by a migration)")
    version = models.PositiveIntegerField(default=1, help_text="Bumped by every change to the steps")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class RemediationPolicy(models.Model):
    """Which finding opens which workflow. Policies are tried in `priority` order (lowest first); the first
    enabled one whose every non-empty match field matches wins. Every edit bumps the table version."""

    name = models.CharField(max_length=200)
    priority = models.PositiveIntegerField(help_text="Lower is tried first")
    enabled = models.BooleanField(default=True)
    rules = models.JSONField(default=list, blank=True, help_text="Rule slugs (empty = any)")
    xid_codes = models.JSONField(default=list, blank=True, help_text="Xid codes (empty = any)")
    xid_actions = models.JSONField(default=list, blank=True,
                                   help_text="The Xid policy table's first action (empty = any)")
    severities = models.JSONField(default=list, blank=True)
    layers = models.JSONField(default=list, blank=True)
    parties = models.JSONField(default=list, blank=True, help_text="Responsible parties (empty = any)")
    delivery_forms = models.JSONField(default=list, blank=True)
    billing_modes = models.JSONField(default=list, blank=True)
    provider = models.ForeignKey(Provider, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    min_recent_remediations = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="Match only when the node had at least this many remediations in the last 7 days")
    workflow = models.ForeignKey(Workflow, on_delete=models.PROTECT, null=True, blank=True, related_name="policies",
                                 help_text="Blank: a matching finding opens no incident")
    note = models.CharField(max_length=300, blank=True)
    changed_in_version = models.PositiveIntegerField(default=1)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["priority", "id"]
        verbose_name_plural = "remediation policies"

    def __str__(self) -> str:
        return f"#{self.priority} {self.name}"


class PoolRemediationSettings(models.Model):
    """Per-pool remediation settings (created with the pool). The concurrency limit itself is
    `Pool.max_concurrent_replacements`."""

    pool = models.OneToOneField(Pool, on_delete=models.CASCADE, primary_key=True, related_name="remediation")
    executors = models.JSONField(default=list, blank=True,
                                 help_text='Executor names to try in order, e.g. ["agent", "ssh"]; "manual" '
                                           "is always the last resort")
    dry_run = models.BooleanField(default=False, help_text="Walk workflows without side effects")
    maintenance_windows = models.JSONField(
        default=list, blank=True,
        help_text='[{"days": ["sat", "sun"], "start": "02:00", "duration_minutes": 240, "timezone": "UTC"}]; '
                  "empty = disruptive steps may run at any time")
    verify_quiet_period_s = models.PositiveIntegerField(
        default=300, validators=[MaxValueValidator(7 * 86400)],
        help_text="No critical finding may have been open on the node for this long before it returns")
    two_person_approval = models.BooleanField(
        default=True, help_text="A destructive step (terminate, retire, RMA, and two_person_kinds) is approved by "
                                "someone other than who opened the incident, requested the step or last changed "
                                "the workflow. Off only when set off here.")
    two_person_kinds = models.JSONField(
        default=list, blank=True, help_text='More step kinds that need a second person, e.g. ["reboot"]')
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "pool remediation settings"

    def __str__(self) -> str:
        return f"remediation settings of {self.pool}"


class NodeRemediationSettings(models.Model):
    node = models.OneToOneField(Node, on_delete=models.CASCADE, primary_key=True, related_name="remediation")
    executors = models.JSONField(default=list, blank=True, help_text="Overrides the pool's list when not empty")
    note = models.CharField(max_length=300, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "node remediation settings"


class CircuitBreaker(models.Model):
    """Pauses automation for a pool or a site when too many of its nodes turn unhealthy at once. Only an
    operator closes it again."""

    scope = models.CharField(max_length=8, choices=BreakerScope.choices)
    pool = models.OneToOneField(Pool, on_delete=models.CASCADE, null=True, blank=True, related_name="breaker")
    site = models.OneToOneField(Site, on_delete=models.CASCADE, null=True, blank=True, related_name="breaker")
    threshold_pct = models.PositiveSmallIntegerField(
        default=50, validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="Trips when MORE than this share of the nodes turned unhealthy within the window")
    window_s = models.PositiveIntegerField(default=300, validators=[MinValueValidator(30), MaxValueValidator(86400)])
    min_nodes = models.PositiveSmallIntegerField(
        default=3, validators=[MinValueValidator(1), MaxValueValidator(10000)],
        help_text="And at least this many nodes (a 2-node pool losing one is not a mass failure)")
    state = models.CharField(max_length=8, choices=BreakerState.choices, default=BreakerState.CLOSED)
    tripped_at = models.DateTimeField(null=True, blank=True)
    tripped_reason = models.CharField(max_length=300, blank=True)
    unhealthy_nodes = models.JSONField(default=list, blank=True)
    total_nodes = models.PositiveIntegerField(default=0)
    incident = models.ForeignKey("Incident", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    reset_at = models.DateTimeField(null=True, blank=True)
    reset_by = models.CharField(max_length=150, blank=True)
    reset_note = models.CharField(max_length=300, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["scope", "id"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(scope=BreakerScope.POOL) & Q(pool__isnull=False) & Q(site__isnull=True))
                | (Q(scope=BreakerScope.SITE) & Q(pool__isnull=True) & Q(site__isnull=False)),
                name="breaker_scope_matches_target"),
        ]

    def __str__(self) -> str:
        return f"{self.scope} breaker of {self.pool or self.site} ({self.state})"


class Incident(models.Model):
    """One remediation case: a node (or, for a mass failure, a pool or site), its cause, the boundary row and
    policy that chose its workflow, and where the workflow stands."""

    key = models.CharField(max_length=32, unique=True, help_text="Stable id for idempotency and external tickets")
    node = models.ForeignKey(Node, on_delete=models.CASCADE, null=True, blank=True, related_name="incidents")
    pool = models.ForeignKey(Pool, on_delete=models.SET_NULL, null=True, blank=True, related_name="incidents")
    site = models.ForeignKey(Site, on_delete=models.SET_NULL, null=True, blank=True, related_name="incidents")
    provider = models.ForeignKey(Provider, on_delete=models.SET_NULL, null=True, blank=True, related_name="incidents")
    cause_kind = models.CharField(max_length=16, choices=CauseKind.choices)
    cause = models.CharField(max_length=100, help_text='"xid:79", "rule:ecc_uncorrectable", "preemption", …')
    title = models.CharField(max_length=500)
    state = models.CharField(max_length=20, choices=IncidentState.choices, default=IncidentState.QUEUED)
    waiting_on = models.CharField(max_length=20, choices=WaitingOn.choices, blank=True)
    state_reason = models.CharField(max_length=500, blank=True, help_text="Why it is queued, paused, waiting")
    # The boundary row that chose the workflow, as it was when the incident opened.
    delivery_form = models.CharField(max_length=24, choices=DeliveryForm.choices, blank=True)
    layer = models.CharField(max_length=16, choices=Layer.choices, blank=True)
    responsible_party = models.CharField(max_length=16, choices=Owner.choices, blank=True)
    responsibility_source = models.CharField(max_length=16, blank=True)
    policy = models.ForeignKey(RemediationPolicy, on_delete=models.SET_NULL, null=True, blank=True,
                               related_name="incidents")
    policy_version = models.PositiveIntegerField(null=True, blank=True)
    policy_snapshot = models.JSONField(default=dict, blank=True)
    workflow = models.ForeignKey(Workflow, on_delete=models.PROTECT, related_name="incidents")
    plan = models.JSONField(default=list, help_text="The steps this incident runs (a copy, extended on escalation)")
    current_step = models.PositiveIntegerField(default=0)
    dry_run = models.BooleanField(default=False)
    replacement_node = models.ForeignKey(Node, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    replacement_requested_at = models.DateTimeField(null=True, blank=True)
    breaker = models.ForeignKey(CircuitBreaker, on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
                                help_text="Mass-failure incidents: the breaker that opened it")
    opened_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    opened_by = models.CharField(max_length=150, help_text='"policy", or the operator who opened it')
    resolution = models.CharField(max_length=300, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-opened_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["node", "cause"], condition=Q(state__in=sorted(OPEN_STATES)),
                                    name="incident_one_open_per_node_cause"),
        ]
        indexes = [
            models.Index(fields=["state", "opened_at"]),
            models.Index(fields=["pool", "state"]),
            models.Index(fields=["node", "state"]),
        ]

    def __str__(self) -> str:
        return f"{self.key} {self.cause} ({self.state})"

    @property
    def is_open(self) -> bool:
        return self.state in OPEN_STATES


class IncidentFinding(models.Model):
    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="finding_links")
    finding = models.ForeignKey(Finding, on_delete=models.CASCADE, related_name="incident_links")
    trigger = models.BooleanField(default=False, help_text="The finding that opened the incident")
    attached_at = models.DateTimeField()

    class Meta:
        ordering = ["attached_at", "id"]
        constraints = [models.UniqueConstraint(fields=["incident", "finding"], name="incident_finding_unique")]


class StepRun(models.Model):
    """One attempt of one step. Its state is committed before the executor is called and again after, so a
    worker that dies in between leaves a row the engine resumes with the same idempotency key."""

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="step_runs")
    step_index = models.PositiveIntegerField()
    attempt = models.PositiveIntegerField(default=1)
    kind = models.CharField(max_length=24)
    title = models.CharField(max_length=200, blank=True)
    params = models.JSONField(default=dict, blank=True)
    executor = models.CharField(max_length=32)
    idempotency_key = models.CharField(max_length=80, unique=True)
    status = models.CharField(max_length=20, choices=StepStatus.choices, default=StepStatus.PENDING)
    waiting_on = models.CharField(max_length=20, choices=WaitingOn.choices, blank=True)
    message = models.CharField(max_length=1000, blank=True)
    output = models.JSONField(default=dict, blank=True)
    requires_approval = models.BooleanField(default=False)
    approved_by = models.CharField(max_length=150, blank=True)
    approved_at = models.DateTimeField(null=True, blank=True)
    not_before = models.DateTimeField(null=True, blank=True, help_text="Retry back-off: not started before this")
    phase = models.CharField(max_length=8, blank=True, help_text="What the holder does: start, poll or check")
    claim = models.CharField(max_length=32, blank=True, help_text="Token of the worker holding the step")
    lease_until = models.DateTimeField(null=True, blank=True)
    executor_calls = models.PositiveIntegerField(default=0, help_text="start() calls, resumed ones included")
    started_at = models.DateTimeField(null=True, blank=True)
    executor_done = models.BooleanField(default=False, help_text="The executor answered done; engine checks remain")
    next_poll_at = models.DateTimeField(null=True, blank=True)
    deadline_at = models.DateTimeField(null=True, blank=True, help_text="The step's timeout (SLA)")
    enqueued_at = models.DateTimeField(null=True, blank=True, help_text="Last handed to a worker")
    finished_at = models.DateTimeField(null=True, blank=True)
    finished_by = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["incident_id", "step_index", "attempt"]
        constraints = [models.UniqueConstraint(fields=["incident", "step_index", "attempt"],
                                               name="step_run_unique_attempt")]
        indexes = [models.Index(fields=["status", "next_poll_at"]), models.Index(fields=["status", "deadline_at"])]

    def __str__(self) -> str:
        return f"{self.idempotency_key} {self.kind} ({self.status})"


class TimelineEntry(models.Model):
    """Append-only: what happened to an incident, who or what did it, with the step's output."""

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="timeline")
    at = models.DateTimeField()
    kind = models.CharField(max_length=24, choices=TimelineKind.choices)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                              related_name="+")
    actor_label = models.CharField(max_length=150, help_text='"engine", an executor name, or a username')
    step_index = models.PositiveIntegerField(null=True, blank=True)
    attempt = models.PositiveIntegerField(null=True, blank=True)
    step_kind = models.CharField(max_length=24, blank=True)
    message = models.CharField(max_length=1000)
    output = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["at", "id"]
        indexes = [models.Index(fields=["incident", "at"])]
        verbose_name_plural = "timeline entries"

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.kind}: {self.message[:60]}"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise ValueError("timeline entries are append-only")
        super().save(*args, **kwargs)


class EvidenceBundle(models.Model):
    """An evidence bundle captured for an incident (the control plane's view; executors may add their own)."""

    incident = models.ForeignKey(Incident, on_delete=models.CASCADE, related_name="evidence")
    collected_at = models.DateTimeField()
    source = models.CharField(max_length=32, help_text='"control_plane" or an executor name')
    step_index = models.PositiveIntegerField(null=True, blank=True)
    bundle = models.JSONField(default=dict)

    class Meta:
        ordering = ["-collected_at", "-id"]


class FindingIntake(models.Model):
    """What remediation decided for one finding, and when to look again (snoozes)."""

    finding = models.OneToOneField(Finding, on_delete=models.CASCADE, primary_key=True, related_name="intake")
    decided_at = models.DateTimeField()
    outcome = models.CharField(max_length=20, choices=IntakeOutcome.choices)
    incident = models.ForeignKey(Incident, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    policy = models.ForeignKey(RemediationPolicy, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    policy_version = models.PositiveIntegerField(null=True, blank=True)
    retry_at = models.DateTimeField(null=True, blank=True, db_index=True,
                                    help_text="Decide again then (a snooze or mark-healthy ends)")
    message = models.CharField(max_length=500, blank=True)


class Override(models.Model):
    """An operator's word on a finding or a GPU: acknowledged, snoozed until, or healthy until."""

    kind = models.CharField(max_length=16, choices=OverrideKind.choices)
    finding = models.ForeignKey(Finding, on_delete=models.CASCADE, null=True, blank=True, related_name="overrides")
    gpu = models.ForeignKey(GPU, on_delete=models.CASCADE, null=True, blank=True, related_name="overrides")
    until = models.DateTimeField(null=True, blank=True)
    reason = models.CharField(max_length=500)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    created_by_label = models.CharField(max_length=150)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=(Q(finding__isnull=False) & Q(gpu__isnull=True))
                                   | (Q(finding__isnull=True) & Q(gpu__isnull=False)),
                                   name="override_finding_xor_gpu"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.finding_id or self.gpu_id} until {self.until}"

