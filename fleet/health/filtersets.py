import django_filters
from django.db.models import Q

from fleet.inventory.choices import Layer, Owner

from .choices import ActionKind, FindingState, Severity, TriageStep
from .models import Finding


class FindingFilterSet(django_filters.FilterSet):
    node = django_filters.NumberFilter(field_name="node_id")
    pool = django_filters.NumberFilter(field_name="node__pool_id")
    provider = django_filters.NumberFilter(field_name="node__provider_id")
    provider_slug = django_filters.CharFilter(field_name="node__provider__slug")
    gpu = django_filters.NumberFilter(field_name="gpu_id")
    rule = django_filters.CharFilter(field_name="rule__slug")
    severity = django_filters.MultipleChoiceFilter(choices=Severity.choices)
    step = django_filters.MultipleChoiceFilter(choices=TriageStep.choices)
    layer = django_filters.MultipleChoiceFilter(choices=Layer.choices)
    responsible_party = django_filters.MultipleChoiceFilter(choices=Owner.choices)
    action_kind = django_filters.MultipleChoiceFilter(choices=ActionKind.choices)
    state = django_filters.MultipleChoiceFilter(choices=FindingState.choices)
    opened_after = django_filters.IsoDateTimeFilter(field_name="opened_at", lookup_expr="gte")
    opened_before = django_filters.IsoDateTimeFilter(field_name="opened_at", lookup_expr="lt")
    updated_after = django_filters.IsoDateTimeFilter(
        method="filter_updated_after",
        help_text="Incremental sync: findings opened, seen again, changed or resolved at or after this time "
                  "(`last_seen` or `resolved_at` ≥ it). Open findings are seen again on every evaluation cycle.")
    resolved_after = django_filters.IsoDateTimeFilter(field_name="resolved_at", lookup_expr="gte",
                                                      help_text="Findings resolved at or after this time")

    def filter_updated_after(self, queryset, name, value):
        return queryset.filter(Q(last_seen__gte=value) | Q(resolved_at__gte=value))

    class Meta:
        model = Finding
        fields = ["node", "pool", "provider", "gpu", "rule", "severity", "step", "layer", "responsible_party",
                  "action_kind", "state"]
