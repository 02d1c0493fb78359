import django_filters

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
        field_name="updated_at", lookup_expr="gt",
        help_text="Incremental sync: findings opened, changed or resolved strictly after this time (`updated_at` > "
                  "it). A finding merely seen again by the evaluation cycle does not count. Pass the largest "
                  "`updated_at` of the previous poll (with `ordering=updated_at` to page through).")
    resolved_after = django_filters.IsoDateTimeFilter(
        field_name="resolved_at", lookup_expr="gt",
        help_text="Findings resolved strictly after this time (`resolved_at` > it)")

    class Meta:
        model = Finding
        fields = ["node", "pool", "provider", "gpu", "rule", "severity", "step", "layer", "responsible_party",
                  "action_kind", "state"]
