from django.db.models import Count
from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from fleet.core.api.mixins import AuditedModelViewSet

from ..filtersets import GPUFilterSet, NodeFilterSet
from ..models import GPU, Baseline, BoundaryOverride, Node, Pool, Provider, Site, SoftwareStack
from ..selectors import baseline_drift, node_boundary, node_drift
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
    queryset = Pool.objects.annotate(node_count=Count("nodes"))
    serializer_class = PoolSerializer
    filterset_fields = ["provider", "site", "delivery_form", "billing_mode"]
    search_fields = ["name", "instance_type", "gpu_model"]


class NodeViewSet(AuditedModelViewSet):
    queryset = Node.objects.select_related("provider", "site", "pool")
    serializer_class = NodeSerializer
    filterset_class = NodeFilterSet
    search_fields = ["hostname", "instance_id", "machine_id"]
    ordering_fields = ["hostname", "state", "created_at", "updated_at", "delivery_form", "billing_mode"]
    ordering = ["hostname"]

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


class GPUViewSet(viewsets.ReadOnlyModelViewSet):
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
