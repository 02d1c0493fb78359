import django_filters

from fleet.inventory.choices import Owner

from .choices import OPEN_STATES, CauseKind, IncidentState, WaitingOn
from .models import Incident


class IncidentFilterSet(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(choices=IncidentState.choices)
    open = django_filters.BooleanFilter(method="filter_open", label="open (true) or closed (false)")
    node = django_filters.NumberFilter(field_name="node_id")
    pool = django_filters.NumberFilter(field_name="pool_id")
    site = django_filters.NumberFilter(field_name="site_id")
    provider = django_filters.NumberFilter(field_name="provider_id")
    party = django_filters.MultipleChoiceFilter(field_name="responsible_party", choices=Owner.choices)
    cause = django_filters.MultipleChoiceFilter(field_name="cause_kind", choices=CauseKind.choices)
    workflow = django_filters.CharFilter(field_name="workflow__slug")
    waiting_on = django_filters.MultipleChoiceFilter(choices=[c for c in WaitingOn.choices if c[0]])
    opened_after = django_filters.IsoDateTimeFilter(field_name="opened_at", lookup_expr="gte")
    opened_before = django_filters.IsoDateTimeFilter(field_name="opened_at", lookup_expr="lt")

    class Meta:
        model = Incident
        fields = ["state", "open", "node", "pool", "site", "provider", "party", "cause", "workflow", "waiting_on",
                  "dry_run"]

    def filter_open(self, queryset, name, value):
        if value is None:
            return queryset
        states = sorted(OPEN_STATES)
        return queryset.filter(state__in=states) if value else queryset.exclude(state__in=states)
