import django_filters

from .choices import ConnectorKind, EventKind, MessageState, TicketState
from .models import OutboxMessage, Ticket


class DeliveryFilterSet(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(choices=MessageState.choices)
    event_kind = django_filters.MultipleChoiceFilter(choices=EventKind.choices)
    connector = django_filters.ChoiceFilter(field_name="integration__kind", choices=ConnectorKind.choices)
    created_after = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = OutboxMessage
        fields = ["integration", "ticket", "state", "event_kind", "action", "connector"]


class TicketFilterSet(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(choices=TicketState.choices)
    finding = django_filters.NumberFilter(field_name="findings")
    connector = django_filters.ChoiceFilter(field_name="integration__kind", choices=ConnectorKind.choices)

    class Meta:
        model = Ticket
        fields = ["integration", "state", "node", "incident_id", "subject_kind", "finding", "connector", "key"]
