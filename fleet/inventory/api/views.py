from django.db.models import Count
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from fleet.core.api.errors import DomainError
from fleet.core.api.mixins import AuditedModelViewSet, StrictQueryParamsMixin
from fleet.core.api.renderers import CSVExportMixin, CSVRenderer
from fleet.core.db import without_jit

from ..filtersets import GPUFilterSet, NodeFilterSet
from ..models import GPU, Baseline, BoundaryOverride, Pool, Provider, Site, SoftwareStack
from ..selectors import baseline_drift, node_boundary, node_drift, node_list
from .serializers import (
    BaselineDriftNodeSerializer,
    BaselineSerializer,
    BoundaryCellSerializer,
    BoundaryOverrideSerializer,
    GPUSerializer,
    NodeDriftSerializer,
    NodeSerializer,
    PoolSerializer,
    ProviderSerializer,
    SiteSerializer,
    SoftwareStackSerializer,
)


class ProviderViewSet(AuditedModelViewSet):
    queryset = Provider.objects.all()
    serializer_class = ProviderSerializer
    filterset_fields = ["kind", "cloud"]
    search_fields = ["name", "slug"]


class SiteViewSet(AuditedModelViewSet):
    queryset = Site.objects.select_related("provider")
    serializer_class = SiteSerializer
    filterset_fields = ["provider", "country", "icp_filing_required"]
    search_fields = ["name", "region_code"]


class PoolViewSet(AuditedModelViewSet):
    queryset = Pool.objects.annotate(node_count=Count("nodes")).order_by("name", "id")  # GROUP BY drops Meta.ordering
    serializer_class = PoolSerializer
    filterset_fields = ["provider", "site", "delivery_form", "billing_mode"]
    search_fields = ["name", "instance_type", "gpu_model"]


class NodesCSVRenderer(CSVRenderer):
    columns = ["id", "hostname", "provider_name", "site_name", "pool_name", "delivery_form", "billing_mode", "state",
               "worst_severity", "open_findings", "open_since", "headline_party", "last_report_at", "silent",
               "gpus_seen", "gpus_expected", "instance_id", "instance_type", "provider_support_contact"]


class NodeViewSet(CSVExportMixin, AuditedModelViewSet):
    """Nodes with their triage columns (worst open severity, open findings, who acts on the headline, last
    report, GPUs seen / expected). Default order: most severe first, then longest open, then hostname."""

    queryset = node_list()
    serializer_class = NodeSerializer
    filterset_class = NodeFilterSet
    search_fields = ["hostname", "instance_id", "machine_id"]
    ordering_fields = ["hostname", "state", "created_at", "updated_at", "delivery_form", "billing_mode",
                       "severity", "open_findings", "open_since", "last_report_at", "id"]
    # `severity` sorts by rank (critical first, nodes with nothing open last), not alphabetically.
    ordering_aliases = {"severity": "severity_rank"}
    ordering = ["severity", "open_since", "hostname", "id"]

    def list(self, request, *args, **kwargs):
        with without_jit():
            return super().list(request, *args, **kwargs)

    @extend_schema(responses={(200, "text/csv"): OpenApiTypes.STR},
                   description="The filtered, ordered nodes list as CSV (up to 10,000 rows; the list's filters, "
                               "search and ordering; cells escaped against spreadsheet formula injection).")
    @action(detail=False, methods=["get"], pagination_class=None, renderer_classes=[NodesCSVRenderer, JSONRenderer])
    def export(self, request):
        with without_jit():
            return self.csv_export(request, self.filter_queryset(self.get_queryset()), NodeSerializer, "nodes")

    @extend_schema(responses={200: NodeSerializer, 404: OpenApiResponse(description="No node has this hostname"),
                              409: OpenApiResponse(description="Several nodes have this hostname; use the id")},
                   description="One node by its exact hostname (for integrators that know hostnames, not ids).")
    @action(detail=False, methods=["get"], url_path=r"by-hostname/(?P<hostname>[^/]+)", pagination_class=None,
            filter_backends=[])
    def by_hostname(self, request, hostname=None):
        matches = list(self.get_queryset().filter(hostname=hostname)[:10])
        if not matches:
            raise NotFound(f"No node has the hostname {hostname!r}.")
        if len(matches) > 1:
            raise DomainError(f"{len(matches)} nodes have the hostname {hostname!r}; address one by id.",
                              code="ambiguous_hostname", fields={"hostname": [f"ids {[n.pk for n in matches]}"]})
        self.check_object_permissions(request, matches[0])
        return Response(self.get_serializer(matches[0]).data)

    @extend_schema(responses=BoundaryCellSerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def boundary(self, request, pk=None):
        cells = node_boundary(node=self.get_object())
        return Response(BoundaryCellSerializer([c.as_dict() for c in cells], many=True).data)

    @extend_schema(responses=NodeDriftSerializer)
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def drift(self, request, pk=None):
        return Response(NodeDriftSerializer(node_drift(node=self.get_object())).data)

    @extend_schema(responses=SoftwareStackSerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def stacks(self, request, pk=None):
        stacks = SoftwareStack.objects.filter(node=self.get_object())[:50]
        return Response(SoftwareStackSerializer(stacks, many=True).data)


class GPUViewSet(StrictQueryParamsMixin, viewsets.ReadOnlyModelViewSet):
    """GPUs come from agent inventory reports; they are read-only here."""

    queryset = GPU.objects.select_related("node")
    serializer_class = GPUSerializer
    filterset_class = GPUFilterSet
    search_fields = ["uuid", "serial", "node__hostname"]


class BaselineViewSet(AuditedModelViewSet):
    queryset = Baseline.objects.select_related("pool", "node")
    serializer_class = BaselineSerializer
    filterset_fields = ["pool", "node"]

    @extend_schema(responses=BaselineDriftNodeSerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def drift(self, request, pk=None):
        return Response(BaselineDriftNodeSerializer(baseline_drift(baseline=self.get_object()), many=True).data)


class BoundaryOverrideViewSet(AuditedModelViewSet):
    queryset = BoundaryOverride.objects.select_related("provider", "node")
    serializer_class = BoundaryOverrideSerializer
    filterset_fields = ["provider", "node", "layer", "owner"]
