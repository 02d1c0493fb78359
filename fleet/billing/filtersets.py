import django_filters
from django.db.models import Q

from fleet.inventory.choices import BillingMode, DeliveryForm, NodeState
from fleet.inventory.models import Node

from .choices import ComplianceFlag, PlanScope, PreemptionSource
from .models import BillingPlan, CheckpointPolicy, CostProfile, PreemptionRecord, PriceListEntry
from .selectors import compliance_filter


class NodeBillingFilterSet(django_filters.FilterSet):
    """Filters for the fleet billing list and the cost report. Retired nodes are left out unless asked for."""

    provider = django_filters.NumberFilter(field_name="provider_id")
    provider_slug = django_filters.CharFilter(field_name="provider__slug")
    site = django_filters.NumberFilter(method="filter_site", help_text="The node's site, else its pool's")
    pool = django_filters.NumberFilter(field_name="pool_id")
    delivery_form = django_filters.MultipleChoiceFilter(choices=DeliveryForm.choices)
    billing_mode = django_filters.MultipleChoiceFilter(choices=BillingMode.choices)
    state = django_filters.MultipleChoiceFilter(choices=NodeState.choices)
    instance_type = django_filters.CharFilter(method="filter_instance_type",
                                              help_text="The node's instance type, else its pool's")
    hostname = django_filters.CharFilter(lookup_expr="icontains")
    compliance = django_filters.ChoiceFilter(choices=ComplianceFlag.choices, method="filter_compliance",
                                             help_text="Only nodes carrying this compliance flag")
    has_plan = django_filters.BooleanFilter(method="filter_has_plan",
                                            help_text="Priced by a billing plan of their own or their pool's")

    class Meta:
        model = Node
        fields = ["provider", "site", "pool", "delivery_form", "billing_mode", "state", "public_endpoint"]

    def filter_queryset(self, queryset):
        if not self.form.cleaned_data.get("state"):
            queryset = queryset.exclude(state=NodeState.RETIRED)
        return super().filter_queryset(queryset)

    def filter_site(self, queryset, name, value):
        return queryset.filter(Q(site_id=value) | Q(site__isnull=True, pool__site_id=value))

    def filter_instance_type(self, queryset, name, value):
        return queryset.filter(Q(instance_type=value) | Q(instance_type="", pool__instance_type=value))

    def filter_compliance(self, queryset, name, value):
        return queryset.filter(compliance_filter(value))

    def filter_has_plan(self, queryset, name, value):
        planned = Q(billing_plan__isnull=False) | Q(pool__billing_plan__isnull=False)
        return queryset.filter(planned) if value else queryset.exclude(planned)


class BillingPlanFilterSet(django_filters.FilterSet):
    scope = django_filters.ChoiceFilter(choices=PlanScope.choices, method="filter_scope")
    term_end_before = django_filters.DateFilter(field_name="term_end", lookup_expr="lte")
    term_end_after = django_filters.DateFilter(field_name="term_end", lookup_expr="gte")
    billing_mode = django_filters.MultipleChoiceFilter(choices=BillingMode.choices)

    class Meta:
        model = BillingPlan
        fields = ["pool", "node", "billing_mode", "currency", "auto_renew"]

    def filter_scope(self, queryset, name, value):
        return queryset.filter(node__isnull=value == PlanScope.POOL)


class PriceListEntryFilterSet(django_filters.FilterSet):
    instance_type = django_filters.CharFilter(lookup_expr="iexact")
    billing_mode = django_filters.MultipleChoiceFilter(choices=BillingMode.choices)

    class Meta:
        model = PriceListEntry
        fields = ["provider", "instance_type", "billing_mode", "term_months", "currency"]


class CostProfileFilterSet(django_filters.FilterSet):
    class Meta:
        model = CostProfile
        fields = ["provider", "site", "currency"]


class CheckpointPolicyFilterSet(django_filters.FilterSet):
    class Meta:
        model = CheckpointPolicy
        fields = ["pool", "applies_to_all_billing_modes"]


class PreemptionRecordFilterSet(django_filters.FilterSet):
    at = django_filters.IsoDateTimeFromToRangeFilter(help_text="`at_after` / `at_before`, ISO 8601")
    source = django_filters.MultipleChoiceFilter(choices=PreemptionSource.choices)
    billing_mode = django_filters.MultipleChoiceFilter(choices=BillingMode.choices)
    confirmed = django_filters.BooleanFilter(field_name="confirmed_at", lookup_expr="isnull", exclude=True)

    class Meta:
        model = PreemptionRecord
        fields = ["node", "pool", "site", "instance_type", "source", "billing_mode", "checkpoint_fresh"]
