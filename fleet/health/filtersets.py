import django_filters

from fleet.inventory.choices import Layer, Owner

from .choices import ActionKind, FindingState, Severity, TriageStep
from .models import Finding


class FindingFilterSet(django_filters.FilterSet):
    node = django_filters.NumberFilter(field_name="node_id")
    pool = django_filters.NumberFilter(field_name="node__pool_id")
    provider = django_filters.NumberFilter(field_name="node__provider_id")
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

    class Meta:
        model = Finding
        fields = ["node", "pool", "provider", "gpu", "rule", "severity", "step", "layer", "responsible_party",
                  "action_kind", "state"]
