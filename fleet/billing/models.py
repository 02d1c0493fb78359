"""Billing plans, the provider price list, cost profiles, checkpoint policies and preemption records.

How a node's price is found (docs/billing.md): its own BillingPlan → its pool's BillingPlan (when the
plan's billing mode is the node's) → the price list entry for its provider × instance type × mode.
"""

from decimal import Decimal

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q

from fleet.inventory.choices import BillingMode
from fleet.inventory.models import Node, Pool, Provider, Site

from .choices import PreemptionSource, RateUnit
from .validation import validate_billing_plan, validate_cost_profile, validate_price_list_entry

ZERO = Decimal("0")


def _money(**kwargs) -> models.DecimalField:
    return models.DecimalField(max_digits=16, decimal_places=4, validators=[MinValueValidator(ZERO)], **kwargs)


def _rate(**kwargs) -> models.DecimalField:
    # Six places: spot prices and per-GB egress are quoted to fractions of a cent.
    return models.DecimalField(max_digits=16, decimal_places=6, validators=[MinValueValidator(ZERO)], **kwargs)


class BillingPlan(models.Model):
    """What a pool's nodes (or one node) cost: mode, rate, currency and, for reserved capacity, its term."""

    pool = models.OneToOneField(Pool, on_delete=models.CASCADE, null=True, blank=True, related_name="billing_plan")
    node = models.OneToOneField(Node, on_delete=models.CASCADE, null=True, blank=True, related_name="billing_plan")
    billing_mode = models.CharField(max_length=16, choices=BillingMode.choices)
    rate = _rate(null=True, blank=True, help_text="Recurring price per node, per `rate_unit`")
    rate_unit = models.CharField(max_length=8, choices=RateUnit.choices, default=RateUnit.HOUR)
    currency = models.CharField(max_length=3, help_text="ISO 4217, e.g. USD, EUR, CNY")
    upfront_cost = _money(default=ZERO, help_text="Reserved only: paid once for the whole term, per node")
    term_start = models.DateField(null=True, blank=True, help_text="Reserved only: first day of the term")
    term_end = models.DateField(null=True, blank=True,
                                help_text="Reserved only: the day the term ends (exclusive, as clouds report it)")
    auto_renew = models.BooleanField(default=False, help_text="Reserved only: the term renews for the same length")
    expiry_noticed_at = models.DateTimeField(null=True, blank=True, editable=False,
                                             help_text="When the term check first saw the term expiring")
    note = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(pool__isnull=False) & Q(node__isnull=True))
                | (Q(pool__isnull=True) & Q(node__isnull=False)),
                name="billing_plan_pool_xor_node",
            ),
        ]

    def __str__(self) -> str:
        scope = f"node {self.node}" if self.node_id else f"pool {self.pool}"
        return f"{scope}: {self.billing_mode} {self.rate or 0} {self.currency}/{self.rate_unit}"

    def clean(self) -> None:
        validate_billing_plan(pool=self.pool, node=self.node, billing_mode=self.billing_mode, rate=self.rate,
                              rate_unit=self.rate_unit, currency=self.currency, upfront_cost=self.upfront_cost,
                              term_start=self.term_start, term_end=self.term_end, auto_renew=self.auto_renew)


class PriceListEntry(models.Model):
    """The provider's list price for one instance type or server model in one billing mode (and term)."""

    provider = models.ForeignKey(Provider, on_delete=models.CASCADE, related_name="price_list")
    instance_type = models.CharField(max_length=64, help_text="Cloud instance type or bare-metal server model")
    billing_mode = models.CharField(max_length=16, choices=BillingMode.choices)
    term_months = models.PositiveSmallIntegerField(default=0, help_text="Reserved only: 12, 36 …; 0 otherwise")
    rate = _rate(default=ZERO, help_text="Recurring price per node, per `rate_unit`")
    rate_unit = models.CharField(max_length=8, choices=RateUnit.choices, default=RateUnit.HOUR)
    upfront_cost = _money(default=ZERO, help_text="Reserved only: paid once for the whole term")
    currency = models.CharField(max_length=3)
    gpu_count = models.PositiveSmallIntegerField(null=True, blank=True, help_text="GPUs in one node of this type")
    note = models.CharField(max_length=200, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["provider_id", "instance_type", "billing_mode", "term_months"]
        verbose_name_plural = "price list entries"
        constraints = [
            models.UniqueConstraint(fields=["provider", "instance_type", "billing_mode", "term_months"],
                                    name="price_list_unique_offer"),
        ]

    def __str__(self) -> str:
        term = f" {self.term_months}m" if self.term_months else ""
        return f"{self.provider} {self.instance_type} {self.billing_mode}{term}"

    def clean(self) -> None:
        validate_price_list_entry(billing_mode=self.billing_mode, term_months=self.term_months, rate=self.rate,
                                  rate_unit=self.rate_unit, upfront_cost=self.upfront_cost, currency=self.currency)


class CostProfile(models.Model):
    """Running costs beside compute, for a provider or one site. Blank site fields fall back to the provider's."""

    provider = models.OneToOneField(Provider, on_delete=models.CASCADE, null=True, blank=True,
                                    related_name="cost_profile")
    site = models.OneToOneField(Site, on_delete=models.CASCADE, null=True, blank=True, related_name="cost_profile")
    currency = models.CharField(max_length=3)
    storage_monthly_per_node = _money(null=True, blank=True)
    egress_gb_per_node_month = models.DecimalField(max_digits=14, decimal_places=3, null=True, blank=True,
                                                   validators=[MinValueValidator(ZERO)])
    egress_price_per_gb = _rate(null=True, blank=True)
    backup_monthly_per_node = _money(null=True, blank=True)
    ops_hours_per_node_month = models.DecimalField(max_digits=8, decimal_places=2, null=True, blank=True,
                                                   validators=[MinValueValidator(ZERO)])
    ops_hourly_rate = _money(null=True, blank=True)
    bare_metal_monthly_per_gpu = _money(
        null=True, blank=True,
        help_text="What-if: an equivalent bare-metal GPU per month (hosting + amortised hardware)")
    note = models.CharField(max_length=200, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    COST_FIELDS = ("storage_monthly_per_node", "egress_gb_per_node_month", "egress_price_per_gb",
                   "backup_monthly_per_node", "ops_hours_per_node_month", "ops_hourly_rate",
                   "bare_metal_monthly_per_gpu")

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(provider__isnull=False) & Q(site__isnull=True))
                | (Q(provider__isnull=True) & Q(site__isnull=False)),
                name="cost_profile_provider_xor_site",
            ),
        ]

    def __str__(self) -> str:
        return f"cost profile of {self.site or self.provider}"

    def clean(self) -> None:
        validate_cost_profile(provider=self.provider, site=self.site, currency=self.currency)


class CheckpointPolicy(models.Model):
    """How old the newest checkpoint may be on a pool's nodes before work at risk is too much."""

    pool = models.OneToOneField(Pool, on_delete=models.CASCADE, related_name="checkpoint_policy")
    max_checkpoint_age_s = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    applies_to_all_billing_modes = models.BooleanField(
        default=False, help_text="Off: spot nodes only (they can vanish at any time). On: every node of the pool.")
    note = models.CharField(max_length=200, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["pool_id"]
        verbose_name_plural = "checkpoint policies"

    def __str__(self) -> str:
        return f"{self.pool}: checkpoints ≤ {self.max_checkpoint_age_s}s"


class PreemptionRecord(models.Model):
    """One time a node was taken away by its cloud (or an operator said so), and the work it cost."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="preemptions")
    # Where the node was when it happened, so rates per pool, region and type keep their history.
    pool = models.ForeignKey(Pool, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    site = models.ForeignKey(Site, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    instance_type = models.CharField(max_length=64, blank=True)
    billing_mode = models.CharField(max_length=16, choices=BillingMode.choices)
    # One record per preemption: "event:<id>" for a notice event, "notice:<deadline>" for a notice seen only
    # in the latest status, "operator:<time>" for an operator's mark.
    episode_key = models.CharField(max_length=80)
    source = models.CharField(max_length=16, choices=PreemptionSource.choices)
    # A soft link: telemetry prunes old events in bulk, and the record keeps the notice's facts itself, so the
    # id may outlive its event (no constraint, nothing for the event delete to cascade to).
    notice_event = models.ForeignKey("telemetry.Event", on_delete=models.DO_NOTHING, db_constraint=False, null=True,
                                     blank=True, related_name="+")
    notice_kind = models.CharField(max_length=24, blank=True)
    notice_at = models.DateTimeField(null=True, blank=True, help_text="When the notice was first seen")
    notice_deadline = models.DateTimeField(null=True, blank=True)
    notice_lead_time_s = models.FloatField(null=True, blank=True, help_text="Deadline minus notice time")
    at = models.DateTimeField(db_index=True, help_text="When the node was (or will be) taken away")
    confirmed_at = models.DateTimeField(null=True, blank=True,
                                        help_text="When the reclaim was confirmed (node silent, or an operator)")
    gpu_count = models.PositiveSmallIntegerField(default=0)
    checkpoint_age_s = models.FloatField(null=True, blank=True, help_text="Age of the newest checkpoint at `at`")
    checkpoint_max_age_s = models.PositiveIntegerField(null=True, blank=True, help_text="The policy at the time")
    checkpoint_fresh = models.BooleanField(null=True, blank=True)
    lost_gpu_hours = models.DecimalField(max_digits=12, decimal_places=4, null=True, blank=True,
                                         help_text="Checkpoint age × GPUs; null when the age is unknown")
    recorded_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                    related_name="+")
    note = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["node", "episode_key"], name="preemption_one_per_episode"),
        ]
        indexes = [
            models.Index(fields=["node", "at"]),
            models.Index(fields=["pool", "at"]),
            models.Index(fields=["site", "at"]),
        ]

    def __str__(self) -> str:
        return f"{self.node} preempted at {self.at:%Y-%m-%d %H:%M}"


class CostDay(models.Model):
    """One UTC day whose cost has been recorded (`DailyCostSnapshot`s): written once, by the daily close (at the
    prices of the time) or by the backfill command (at the prices of when it ran: `estimated`)."""

    day = models.DateField(unique=True)
    estimated = models.BooleanField(
        default=False, help_text="Backfilled at the prices in force when it ran, not recorded at the day's end")
    closed_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-day"]

    def __str__(self) -> str:
        return f"{self.day}{' (estimated)' if self.estimated else ''}"


class DailyCostSnapshot(models.Model):
    """What one day cost, per pool and currency: each node's monthly cost then × the hours it ran that day ÷ 730,
    with the GPU-hours and the measured utilisation behind the cost per utilised GPU-hour."""

    cost_day = models.ForeignKey(CostDay, on_delete=models.CASCADE, related_name="snapshots")
    pool = models.ForeignKey(Pool, on_delete=models.SET_NULL, null=True, blank=True, related_name="+",
                             help_text="Null: nodes without a pool (or a pool deleted since)")
    pool_name = models.CharField(max_length=100, blank=True, help_text="The pool's name on the day")
    currency = models.CharField(max_length=3)
    nodes = models.PositiveIntegerField(default=0)
    gpu_count = models.PositiveIntegerField(default=0)
    total = models.DecimalField(max_digits=20, decimal_places=4)
    gpu_hours = models.DecimalField(max_digits=20, decimal_places=4, default=ZERO)
    # The part of the cost, and of the GPU-hours, of nodes whose utilisation was measured that day, and their
    # utilised GPU-hours: cost per utilised GPU-hour = measured_total / utilised_gpu_hours.
    measured_total = models.DecimalField(max_digits=20, decimal_places=4, default=ZERO)
    measured_gpu_hours = models.DecimalField(max_digits=20, decimal_places=4, default=ZERO)
    utilised_gpu_hours = models.DecimalField(max_digits=20, decimal_places=4, default=ZERO)

    class Meta:
        ordering = ["cost_day_id", "pool_id", "currency"]
        indexes = [models.Index(fields=["cost_day", "currency"])]

    def __str__(self) -> str:
        return f"{self.cost_day.day} {self.pool_name or '—'}: {self.total} {self.currency}"
