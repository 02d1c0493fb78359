import re

import django_filters
from django.db.models import Q
from rest_framework.exceptions import ValidationError

from .choices import BillingMode, DeliveryForm, NodeState
from .models import GPU, Node
from .selectors import node_has_open_findings

_LABEL_KEY = re.compile(r"^[A-Za-z0-9_.\-/]{1,63}$")


class NodeFilterSet(django_filters.FilterSet):
    provider = django_filters.NumberFilter(field_name="provider_id")
    provider_slug = django_filters.CharFilter(field_name="provider__slug")
    site = django_filters.NumberFilter(field_name="site_id")
    pool = django_filters.NumberFilter(field_name="pool_id")
    delivery_form = django_filters.MultipleChoiceFilter(choices=DeliveryForm.choices)
    billing_mode = django_filters.MultipleChoiceFilter(choices=BillingMode.choices)
    state = django_filters.MultipleChoiceFilter(choices=NodeState.choices)
    hostname = django_filters.CharFilter(lookup_expr="icontains")
    silent = django_filters.BooleanFilter(field_name="status__silent",
                                          help_text="Nodes that stopped reporting (true) or are reporting (false)")
    has_findings = django_filters.BooleanFilter(method="filter_has_findings",
                                                help_text="Nodes with (true) or without (false) open findings")
    label = django_filters.CharFilter(method="filter_label",
                                      help_text="`key` (has the label) or `key=value`; repeat to AND several.")

    class Meta:
        model = Node
        fields = ["provider", "site", "pool", "delivery_form", "billing_mode", "state", "public_endpoint",
                  "machine_id", "instance_type"]

    def filter_has_findings(self, queryset, name, value):
        return node_has_open_findings(queryset, value)

    def filter_label(self, queryset, name, value):
        for term in self.request.query_params.getlist("label") if self.request else [value]:
            key, sep, label_value = term.partition("=")
            if not _LABEL_KEY.match(key):
                raise ValidationError({"label": [f"Invalid label key {key!r}: use letters, digits, . _ - /"]})
            queryset = queryset.filter(Q(**{f"labels__{key}": label_value}) if sep else Q(labels__has_key=key))
        return queryset


class GPUFilterSet(django_filters.FilterSet):
    node = django_filters.NumberFilter(field_name="node_id")
    model = django_filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = GPU
        fields = ["node", "model", "present", "uuid", "serial", "pci_bus_id"]
