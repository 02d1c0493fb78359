import django_filters

from ..choices import EventKind, EventSeverity
from ..models import Event


class EventFilterSet(django_filters.FilterSet):
    node = django_filters.NumberFilter(field_name="node_id")
    gpu = django_filters.NumberFilter(field_name="gpu_id")
    pool = django_filters.NumberFilter(field_name="node__pool_id")
    kind = django_filters.MultipleChoiceFilter(choices=EventKind.choices)
    severity = django_filters.MultipleChoiceFilter(choices=EventSeverity.choices)
    code = django_filters.NumberFilter()
    since = django_filters.IsoDateTimeFilter(field_name="at", lookup_expr="gte")
    until = django_filters.IsoDateTimeFilter(field_name="at", lookup_expr="lt")

    class Meta:
        model = Event
        fields = ["node", "gpu", "pool", "kind", "severity", "code"]
