"""Rule catalog, Xid policy table, condition state and findings."""

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from fleet.inventory.choices import Layer, Owner
from fleet.inventory.models import GPU, Node, Pool

from .choices import ActionKind, FindingState, Scope, Severity, TriageStep, XidAction

MAX_DURATION_S = 7 * 24 * 3600


class Rule(models.Model):
    """One rule of the catalog. Rows are created from the code definitions (`fleet.health.rules.catalog`);
    operators edit thresholds, durations, severity and the enabled flag."""

    slug = models.SlugField(max_length=64, unique=True)
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    step = models.CharField(max_length=24, choices=TriageStep.choices)
    layer = models.CharField(max_length=16, choices=Layer.choices)
    severity = models.CharField(max_length=16, choices=Severity.choices)
    scope = models.CharField(max_length=8, choices=Scope.choices)
    duration_s = models.PositiveIntegerField(
        validators=[MaxValueValidator(MAX_DURATION_S)],
        help_text="How long the condition must hold before a finding opens.")
    clear_hold_s = models.PositiveIntegerField(
        validators=[MaxValueValidator(MAX_DURATION_S)],
        help_text="How long the condition must stay clear before the finding resolves.")
    params = models.JSONField(default=dict, blank=True, help_text="Thresholds, fleet-wide")
    enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.slug


class RuleOverride(models.Model):
    """A pool's own thresholds for one rule; unset fields inherit the fleet-wide values."""

    rule = models.ForeignKey(Rule, on_delete=models.CASCADE, related_name="overrides")
    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="rule_overrides")
    params = models.JSONField(default=dict, blank=True, help_text="Only the parameters that differ")
    enabled = models.BooleanField(null=True, blank=True, help_text="Blank = as the fleet-wide rule")
    duration_s = models.PositiveIntegerField(null=True, blank=True, validators=[MaxValueValidator(MAX_DURATION_S)])
    clear_hold_s = models.PositiveIntegerField(null=True, blank=True,
                                               validators=[MaxValueValidator(MAX_DURATION_S)])
    note = models.CharField(max_length=200, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["rule_id", "pool_id"]
        constraints = [models.UniqueConstraint(fields=["rule", "pool"], name="rule_override_unique_pool")]

    def __str__(self) -> str:
        return f"{self.rule.slug} @ {self.pool}"


class XidPolicy(models.Model):
    """What an Xid means and what to do first. Seeded from `xid_seed` (the agent's Xid catalog); every edit bumps
    the table version, and each Xid finding records the version that classified it."""

    code = models.PositiveIntegerField(unique=True, validators=[MinValueValidator(1), MaxValueValidator(1000)])
    meaning = models.CharField(max_length=200)
    severity = models.CharField(max_length=16, choices=Severity.choices)
    action = models.CharField(max_length=24, choices=XidAction.choices)
    layer = models.CharField(max_length=16, choices=Layer.choices, default=Layer.HARDWARE,
                             help_text="The layer a finding for this Xid is placed on")
    escalation = models.CharField(max_length=300, blank=True, help_text="What to do when it repeats")
    changed_in_version = models.PositiveIntegerField(
        default=1, help_text="Table version of the last change to this row; the table's version is the highest.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["code"]
        verbose_name = "Xid policy"
        verbose_name_plural = "Xid policies"

    def __str__(self) -> str:
        return f"Xid {self.code}: {self.meaning}"


class HealthCondition(models.Model):
    """Hysteresis state of one (rule, node, subject) across cycles.

    A row exists while the condition is true, pending (true but not yet for the rule's duration), or
    clearing (false, but an open finding waits for the clear-hold period).
    """

    rule = models.ForeignKey(Rule, on_delete=models.CASCADE, related_name="+")
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="+")
    gpu = models.ForeignKey(GPU, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    subject = models.CharField(max_length=64, help_text='"node", "gpu:<id>", "gpu:<id>:xid:<code>", …')
    first_true_at = models.DateTimeField()
    first_false_at = models.DateTimeField(null=True, blank=True)
    summary = models.CharField(max_length=500, blank=True)
    summary_msg = models.JSONField(null=True, blank=True,
                                   help_text='The summary as a message: {"id": template, "params": {...}}')

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["rule", "node", "subject"], name="health_condition_unique_subject"),
        ]
        indexes = [models.Index(fields=["node"])]

    def __str__(self) -> str:
        return f"{self.rule_id}/{self.node_id}/{self.subject}"


class Finding(models.Model):
    """A rule's condition held for its duration on a node (or one GPU): what failed, where, who acts, and why."""

    rule = models.ForeignKey(Rule, on_delete=models.PROTECT, related_name="findings")
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="findings")
    gpu = models.ForeignKey(GPU, on_delete=models.SET_NULL, null=True, blank=True, related_name="findings")
    subject = models.CharField(max_length=64)
    state = models.CharField(max_length=16, choices=FindingState.choices, default=FindingState.OPEN)
    step = models.CharField(max_length=24, choices=TriageStep.choices)
    layer = models.CharField(max_length=16, choices=Layer.choices)
    severity = models.CharField(max_length=16, choices=Severity.choices)
    summary = models.CharField(max_length=500, help_text="In English (search, tickets, integrations)")
    # The same texts as messages ({"id": template, "params": {...}}), rendered in the reader's language by the API.
    summary_msg = models.JSONField(null=True, blank=True)
    responsible_party = models.CharField(max_length=16, choices=Owner.choices)
    responsibility_source = models.CharField(max_length=16, blank=True,
                                             help_text="Where the boundary cell came from: default, provider, node")
    action_kind = models.CharField(max_length=24, choices=ActionKind.choices)
    recommended_action = models.TextField()
    action_msg = models.JSONField(null=True, blank=True)
    evidence = models.JSONField(default=dict, blank=True)
    xid_policy_version = models.PositiveIntegerField(null=True, blank=True)
    first_seen = models.DateTimeField(help_text="When the condition was first observed")
    opened_at = models.DateTimeField(help_text="When it had held for the rule's duration")
    last_seen = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolution = models.CharField(max_length=200, blank=True)
    # When the finding last changed: opened, its content (severity, summary, evidence, routing…) rewritten, or
    # resolved; NOT when it was merely seen again (that moves last_seen only). The health cycle writes findings in
    # bulk (`fleet.core.db.rows_update`, `update()`: both skip auto_now), so it sets this itself
    # (services/finding_writes.py).
    updated_at = models.DateTimeField(auto_now=True, db_index=True,
                                      help_text="When the finding was opened, changed or resolved (not seen again)")

    class Meta:
        ordering = ["-opened_at", "-id"]
        constraints = [
            # Two overlapping evaluation cycles can never open the same finding twice.
            models.UniqueConstraint(fields=["rule", "node", "subject"], condition=Q(state=FindingState.OPEN),
                                    name="finding_unique_open_subject"),
        ]
        indexes = [
            models.Index(fields=["state", "severity"]),
            models.Index(fields=["node", "state"]),
            models.Index(fields=["state", "step"]),
        ]

    def __str__(self) -> str:
        return f"{self.rule.slug} on {self.node_id} ({self.state})"
