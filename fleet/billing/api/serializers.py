from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from fleet.inventory.choices import BillingMode

from ..choices import ComplianceFlag, PlanScope, RateScope, RateSource, RateUnit, TermStatus
from ..models import BillingPlan, CheckpointPolicy, CostProfile, PreemptionRecord, PriceListEntry
from ..selectors.pricing import price_from_plan
from ..selectors.terms import term_status, today_at
from ..validation import validate_billing_plan, validate_cost_profile, validate_price_list_entry

MONEY = {"max_digits": 20, "decimal_places": 2}
UNIT_PRICE = {"max_digits": 20, "decimal_places": 4}
RATE = {"max_digits": 20, "decimal_places": 6}


def _currency_field(**kwargs) -> serializers.CharField:
    return serializers.CharField(max_length=3, min_length=3, help_text="ISO 4217 code, e.g. USD, EUR, CNY",
                                 **kwargs)


def _normalise_currency(value: str) -> str:
    return value.strip().upper()


def _merged(serializer: serializers.ModelSerializer, attrs: dict, names: list[str]) -> dict:
    """The instance's values overlaid with the request's, so partial updates are checked whole."""
    return {name: attrs[name] if name in attrs else getattr(serializer.instance, name, None) for name in names}


class BillingPlanSerializer(serializers.ModelSerializer):
    currency = _currency_field()
    scope = serializers.SerializerMethodField()
    term_months = serializers.SerializerMethodField()
    term_status = serializers.SerializerMethodField()
    monthly_compute = serializers.SerializerMethodField()

    class Meta:
        model = BillingPlan
        fields = ["id", "scope", "pool", "node", "billing_mode", "rate", "rate_unit", "currency", "upfront_cost",
                  "term_start", "term_end", "term_months", "term_status", "auto_renew", "monthly_compute",
                  "expiry_noticed_at", "note", "created_at", "updated_at"]
        read_only_fields = ["expiry_noticed_at", "created_at", "updated_at"]

    def validate_currency(self, value: str) -> str:
        return _normalise_currency(value)

    def validate(self, attrs):
        values = _merged(self, attrs, ["pool", "node", "billing_mode", "rate", "rate_unit", "currency",
                                       "upfront_cost", "term_start", "term_end", "auto_renew"])
        values["rate_unit"] = values["rate_unit"] or RateUnit.HOUR
        values["auto_renew"] = bool(values["auto_renew"])
        validate_billing_plan(**values)
        return attrs

    @extend_schema_field(serializers.ChoiceField(choices=PlanScope.choices))
    def get_scope(self, plan: BillingPlan) -> str:
        return PlanScope.NODE if plan.node_id else PlanScope.POOL

    @extend_schema_field(serializers.DecimalField(max_digits=12, decimal_places=4, allow_null=True))
    def get_term_months(self, plan: BillingPlan):
        months = price_from_plan(plan).term_months
        return None if months is None else serializers.DecimalField(12, 4).to_representation(months)

    @extend_schema_field(serializers.ChoiceField(choices=TermStatus.choices, allow_null=True))
    def get_term_status(self, plan: BillingPlan) -> str | None:
        return term_status(plan, today=today_at(self.context.get("now") or timezone.now()))

    @extend_schema_field(serializers.DecimalField(**MONEY, allow_null=True,
                                                  help_text="Compute cost of one node per month"))
    def get_monthly_compute(self, plan: BillingPlan):
        value = price_from_plan(plan).monthly_compute()
        return None if value is None else serializers.DecimalField(**MONEY).to_representation(value)


class PriceListEntrySerializer(serializers.ModelSerializer):
    currency = _currency_field()
    provider_name = serializers.CharField(source="provider.name", read_only=True)

    class Meta:
        model = PriceListEntry
        fields = ["id", "provider", "provider_name", "instance_type", "billing_mode", "term_months", "rate",
                  "rate_unit", "upfront_cost", "currency", "gpu_count", "note", "updated_at"]
        read_only_fields = ["updated_at"]
        validators = []  # the one-offer rule is checked in validate() so the error names a field

    def validate_currency(self, value: str) -> str:
        return _normalise_currency(value)

    def validate(self, attrs):
        values = _merged(self, attrs, ["provider", "instance_type", "billing_mode", "term_months", "rate",
                                       "rate_unit", "upfront_cost", "currency"])
        values["term_months"] = values["term_months"] or 0
        values["rate_unit"] = values["rate_unit"] or RateUnit.HOUR
        offer = {k: values.pop(k) for k in ("provider", "instance_type")}
        validate_price_list_entry(**values)
        clash = PriceListEntry.objects.filter(**offer, billing_mode=values["billing_mode"],
                                              term_months=values["term_months"])
        if self.instance is not None:
            clash = clash.exclude(pk=self.instance.pk)
        if clash.exists():
            raise serializers.ValidationError({"instance_type": [
                "The provider already lists this instance type in this billing mode and term; edit that entry."]})
        return attrs


class CostProfileSerializer(serializers.ModelSerializer):
    currency = _currency_field()

    class Meta:
        model = CostProfile
        fields = ["id", "provider", "site", "currency", "storage_monthly_per_node", "egress_gb_per_node_month",
                  "egress_price_per_gb", "backup_monthly_per_node", "ops_hours_per_node_month", "ops_hourly_rate",
                  "bare_metal_monthly_per_gpu", "note", "updated_at"]
        read_only_fields = ["updated_at"]

    def validate_currency(self, value: str) -> str:
        return _normalise_currency(value)

    def validate(self, attrs):
        validate_cost_profile(**_merged(self, attrs, ["provider", "site", "currency"]))
        return attrs


class CheckpointPolicySerializer(serializers.ModelSerializer):
    pool_name = serializers.CharField(source="pool.name", read_only=True)

    class Meta:
        model = CheckpointPolicy
        fields = ["id", "pool", "pool_name", "max_checkpoint_age_s", "applies_to_all_billing_modes", "note",
                  "updated_at"]
        read_only_fields = ["updated_at"]


class PreemptionRecordSerializer(serializers.ModelSerializer):
    hostname = serializers.CharField(source="node.hostname", read_only=True)
    pool_name = serializers.CharField(source="pool.name", read_only=True, default=None)
    site_name = serializers.CharField(source="site.name", read_only=True, default=None)
    recorded_by = serializers.CharField(source="recorded_by.username", read_only=True, default=None)

    class Meta:
        model = PreemptionRecord
        fields = ["id", "node", "hostname", "pool", "pool_name", "site", "site_name", "instance_type",
                  "billing_mode", "source", "at", "confirmed_at", "notice_event", "notice_kind", "notice_at",
                  "notice_deadline", "notice_lead_time_s", "gpu_count", "checkpoint_age_s", "checkpoint_max_age_s",
                  "checkpoint_fresh", "lost_gpu_hours", "recorded_by", "note", "created_at"]
        read_only_fields = fields


class NodePreemptedSerializer(serializers.Serializer):
    at = serializers.DateTimeField(required=False, help_text="When it happened; default now")
    note = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class ComplianceItemSerializer(serializers.Serializer):
    flag = serializers.ChoiceField(choices=ComplianceFlag.choices)
    label = serializers.CharField()
    reason = serializers.CharField()


class NodeCostSerializer(serializers.Serializer):
    node_id = serializers.IntegerField()
    hostname = serializers.CharField()
    provider = serializers.CharField()
    site = serializers.CharField(allow_null=True)
    pool = serializers.CharField(allow_null=True)
    instance_type = serializers.CharField()
    billing_mode = serializers.ChoiceField(choices=BillingMode.choices)
    rate_source = serializers.ChoiceField(choices=RateSource.choices)
    currency = serializers.CharField(allow_null=True)
    gpu_count = serializers.IntegerField()
    compute = serializers.DecimalField(**MONEY, allow_null=True)
    storage = serializers.DecimalField(**MONEY, allow_null=True)
    egress = serializers.DecimalField(**MONEY, allow_null=True)
    backup = serializers.DecimalField(**MONEY, allow_null=True)
    ops = serializers.DecimalField(**MONEY, allow_null=True)
    total = serializers.DecimalField(**MONEY, allow_null=True, help_text="Per month")
    gpu_hours = serializers.DecimalField(**MONEY, help_text="GPU-hours in a month (730 h × GPUs)")
    tco_per_gpu_hour = serializers.DecimalField(**UNIT_PRICE, allow_null=True)
    utilisation_pct = serializers.DecimalField(max_digits=6, decimal_places=2, allow_null=True,
                                               help_text="Measured mean GPU utilisation; null without samples")
    tco_per_utilised_gpu_hour = serializers.DecimalField(**UNIT_PRICE, allow_null=True)
    warnings = serializers.ListField(child=serializers.CharField())


class CostTotalSerializer(serializers.Serializer):
    currency = serializers.CharField()
    nodes = serializers.IntegerField()
    gpu_count = serializers.IntegerField()
    compute = serializers.DecimalField(**MONEY)
    storage = serializers.DecimalField(**MONEY)
    egress = serializers.DecimalField(**MONEY)
    backup = serializers.DecimalField(**MONEY)
    ops = serializers.DecimalField(**MONEY)
    total = serializers.DecimalField(**MONEY)
    gpu_hours = serializers.DecimalField(**MONEY)
    tco_per_gpu_hour = serializers.DecimalField(**UNIT_PRICE, allow_null=True)


class CostReportSerializer(serializers.Serializer):
    generated_at = serializers.DateTimeField()
    period_days = serializers.IntegerField()
    hours_per_month = serializers.DecimalField(max_digits=6, decimal_places=0)
    rows = NodeCostSerializer(many=True)
    totals = CostTotalSerializer(many=True)
    unpriced_nodes = serializers.IntegerField()


class CostQuerySerializer(serializers.Serializer):
    period_days = serializers.IntegerField(min_value=1, max_value=366, default=30,
                                           help_text="Days of measured utilisation behind the per-utilised figure")


class NodeBillingInfoSerializer(serializers.Serializer):
    billing_mode = serializers.ChoiceField(choices=BillingMode.choices)
    rate_source = serializers.ChoiceField(choices=RateSource.choices)
    plan = BillingPlanSerializer(allow_null=True)
    price_list_entry = PriceListEntrySerializer(allow_null=True)
    checkpoint_max_age_s = serializers.IntegerField(allow_null=True)


class NodeBillingSerializer(serializers.Serializer):
    node_id = serializers.IntegerField()
    hostname = serializers.CharField()
    billing = NodeBillingInfoSerializer()
    cost = NodeCostSerializer()
    preemptions = PreemptionRecordSerializer(many=True)
    compliance_flags = ComplianceItemSerializer(many=True)


class NodeBillingRowSerializer(serializers.Serializer):
    node_id = serializers.IntegerField()
    hostname = serializers.CharField()
    cost = NodeCostSerializer()
    preemptions_30d = serializers.IntegerField()
    term_end = serializers.DateField(allow_null=True)
    term_status = serializers.ChoiceField(choices=TermStatus.choices, allow_null=True)
    compliance_flags = ComplianceItemSerializer(many=True)


class RateWindowSerializer(serializers.Serializer):
    days = serializers.IntegerField()
    preemptions = serializers.IntegerField()
    node_days = serializers.DecimalField(max_digits=20, decimal_places=4)
    rate_per_node_day = serializers.DecimalField(max_digits=20, decimal_places=6, allow_null=True)
    lost_gpu_hours = serializers.DecimalField(max_digits=20, decimal_places=4)


class PreemptionRateSerializer(serializers.Serializer):
    group_by = serializers.ChoiceField(source="scope", choices=RateScope.choices)
    key = serializers.CharField(help_text="Pool or site id, or the instance type")
    name = serializers.CharField()
    last_7d = RateWindowSerializer()
    last_30d = RateWindowSerializer()


class PreemptionRateQuerySerializer(serializers.Serializer):
    group_by = serializers.ChoiceField(choices=RateScope.choices, default=RateScope.POOL)
    billing_mode = serializers.ChoiceField(choices=BillingMode.choices, required=False)


class PreemptionDailyQuerySerializer(serializers.Serializer):
    days = serializers.IntegerField(min_value=1, max_value=90, default=30,
                                    help_text="Days back from today (UTC), today included; 1-90, default 30")


class PoolPreemptionDaysSerializer(serializers.Serializer):
    pool_id = serializers.IntegerField()
    name = serializers.CharField()
    preemptions = serializers.ListField(child=serializers.IntegerField(), help_text="One count per day of `days`")
    node_hours = serializers.ListField(
        child=serializers.DecimalField(max_digits=20, decimal_places=2),
        help_text="Hours the pool's spot nodes ran, per day of `days`")
    rate_per_node_day = serializers.ListField(
        child=serializers.DecimalField(max_digits=20, decimal_places=6, allow_null=True),
        help_text="Preemptions per node-day (preemptions × 24 ÷ node-hours) per day; null where no node ran")


class PreemptionDailySerializer(serializers.Serializer):
    days = serializers.ListField(child=serializers.DateField(), help_text="UTC days, oldest first")
    pools = PoolPreemptionDaysSerializer(many=True)


class ExpiringTermSerializer(serializers.Serializer):
    plan_id = serializers.IntegerField()
    scope = serializers.ChoiceField(choices=PlanScope.choices)
    pool_id = serializers.IntegerField(allow_null=True)
    pool_name = serializers.CharField(allow_null=True)
    node_id = serializers.IntegerField(allow_null=True)
    hostname = serializers.CharField(allow_null=True)
    term_start = serializers.DateField()
    term_end = serializers.DateField()
    days_left = serializers.IntegerField()
    auto_renew = serializers.BooleanField()
    currency = serializers.CharField()
    expiry_noticed_at = serializers.DateTimeField(allow_null=True)
    node_ids = serializers.ListField(child=serializers.IntegerField())


class ExpiringTermQuerySerializer(serializers.Serializer):
    within_days = serializers.IntegerField(min_value=1, max_value=366, default=30)
    include_auto_renew = serializers.BooleanField(default=False)


class ScenarioSerializer(serializers.Serializer):
    scenario = serializers.CharField()
    label = serializers.CharField()
    available = serializers.BooleanField()
    source = serializers.CharField()
    currency = serializers.CharField(allow_null=True)
    term_months = serializers.DecimalField(max_digits=12, decimal_places=4, allow_null=True)
    compute_per_node = serializers.DecimalField(**MONEY, allow_null=True)
    overhead_per_node = serializers.DecimalField(**MONEY, allow_null=True)
    preemption_loss_per_node = serializers.DecimalField(**MONEY, allow_null=True)
    total_per_node = serializers.DecimalField(**MONEY, allow_null=True)
    total_monthly = serializers.DecimalField(**MONEY, allow_null=True)
    tco_per_gpu_hour = serializers.DecimalField(**UNIT_PRICE, allow_null=True)
    difference_vs_current = serializers.DecimalField(**MONEY, allow_null=True)
    notes = serializers.ListField(child=serializers.CharField())


class PoolWhatIfSerializer(serializers.Serializer):
    pool_id = serializers.IntegerField()
    pool_name = serializers.CharField()
    generated_at = serializers.DateTimeField()
    node_count = serializers.IntegerField()
    gpus_per_node = serializers.IntegerField()
    instance_type = serializers.CharField()
    preemptions_per_node_day = serializers.DecimalField(max_digits=20, decimal_places=6, allow_null=True)
    preemption_rate_basis = serializers.CharField()
    lost_gpu_hours_per_preemption = serializers.DecimalField(max_digits=20, decimal_places=4, allow_null=True)
    lost_work_basis = serializers.CharField()
    scenarios = ScenarioSerializer(many=True)


class PoolWhatIfQuerySerializer(serializers.Serializer):
    spot_preemption_rate = serializers.DecimalField(
        max_digits=12, decimal_places=6, min_value=0, required=False,
        help_text="Assumed preemptions per node-day for the spot scenario (default: measured)")
    bare_metal_price = serializers.PrimaryKeyRelatedField(
        queryset=PriceListEntry.objects.all(), required=False,
        help_text="Price-list entry to price the bare-metal scenario (default: the cost profile)")

