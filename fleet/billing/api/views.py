from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, status, viewsets
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from fleet.core.api.mixins import AuditedModelViewSet, StrictQueryParamsMixin
from fleet.inventory.models import Node, Pool

from ..filtersets import (
    BillingPlanFilterSet,
    CheckpointPolicyFilterSet,
    CostProfileFilterSet,
    NodeBillingFilterSet,
    PreemptionRecordFilterSet,
    PriceListEntryFilterSet,
)
from ..models import BillingPlan, CheckpointPolicy, CostProfile, PreemptionRecord, PriceListEntry
from ..selectors import (
    cost_report,
    expiring_reserved_terms,
    node_billing,
    node_billing_rows,
    pool_preemptions_daily,
    pool_what_if,
    preemption_rates,
)
from ..selectors.facts import NODE_RELATED
from ..services import preemption_record_by_operator
from .renderers import CostReportCSVRenderer
from .serializers import (
    BillingPlanSerializer,
    CheckpointPolicySerializer,
    CostProfileSerializer,
    CostQuerySerializer,
    CostReportSerializer,
    ExpiringTermQuerySerializer,
    ExpiringTermSerializer,
    NodeBillingRowSerializer,
    NodeBillingSerializer,
    NodePreemptedSerializer,
    PoolWhatIfQuerySerializer,
    PoolWhatIfSerializer,
    PreemptionDailyQuerySerializer,
    PreemptionDailySerializer,
    PreemptionRateQuerySerializer,
    PreemptionRateSerializer,
    PreemptionRecordSerializer,
    PriceListEntrySerializer,
)


def _query(serializer_class, request) -> dict:
    serializer = serializer_class(data=request.query_params)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


class BillingPlanViewSet(AuditedModelViewSet):
    """Prices per pool (inherited by its nodes of the same billing mode) or per node."""

    queryset = BillingPlan.objects.select_related("pool", "node")
    serializer_class = BillingPlanSerializer
    filterset_class = BillingPlanFilterSet
    ordering_fields = ["id", "term_end", "updated_at"]


class PriceListEntryViewSet(AuditedModelViewSet):
    """The provider price list: instance type or server model × billing mode (× term)."""

    queryset = PriceListEntry.objects.select_related("provider")
    serializer_class = PriceListEntrySerializer
    filterset_class = PriceListEntryFilterSet
    search_fields = ["instance_type", "note"]


class CostProfileViewSet(AuditedModelViewSet):
    """Running costs beside compute (storage, egress, backup, ops labour) per provider or site."""

    queryset = CostProfile.objects.select_related("provider", "site")
    serializer_class = CostProfileSerializer
    filterset_class = CostProfileFilterSet


class CheckpointPolicyViewSet(AuditedModelViewSet):
    queryset = CheckpointPolicy.objects.select_related("pool")
    serializer_class = CheckpointPolicySerializer
    filterset_class = CheckpointPolicyFilterSet


class PreemptionRecordViewSet(StrictQueryParamsMixin, viewsets.ReadOnlyModelViewSet):
    """Preemptions, recorded from cloud notices, silent spot nodes and operators."""

    queryset = PreemptionRecord.objects.select_related("node", "pool", "site", "recorded_by")
    serializer_class = PreemptionRecordSerializer
    filterset_class = PreemptionRecordFilterSet
    search_fields = ["node__hostname", "instance_type"]
    ordering_fields = ["at", "lost_gpu_hours", "notice_lead_time_s"]


class NodePreemptedView(StrictQueryParamsMixin, generics.GenericAPIView):
    """An operator marks the node preempted: a preemption record, and the node moves to `preempted`."""

    queryset = Node.objects.select_related(*NODE_RELATED)
    serializer_class = NodePreemptedSerializer

    @extend_schema(request=NodePreemptedSerializer, responses={201: PreemptionRecordSerializer})
    def post(self, request, pk: int):
        node = self.get_object()
        body = self.get_serializer(data=request.data)
        body.is_valid(raise_exception=True)
        record = preemption_record_by_operator(node=node, actor=request.user, **body.validated_data)
        return Response(PreemptionRecordSerializer(record).data, status=status.HTTP_201_CREATED)


class NodeBillingView(StrictQueryParamsMixin, generics.GenericAPIView):
    """The node's billing, monthly cost breakdown, preemptions and compliance flags."""

    queryset = Node.objects.select_related(*NODE_RELATED)
    serializer_class = NodeBillingSerializer

    @extend_schema(parameters=[CostQuerySerializer], responses=NodeBillingSerializer)
    def get(self, request, pk: int):
        params = _query(CostQuerySerializer, request)
        now = timezone.now()
        data = node_billing(node=self.get_object(), now=now, period_days=params["period_days"])
        return Response(NodeBillingSerializer(data, context={"now": now}).data)


class NodeBillingListView(StrictQueryParamsMixin, generics.ListAPIView):
    """Billing across the fleet: one row per node with its monthly cost, preemptions and compliance flags."""

    queryset = Node.objects.select_related(*NODE_RELATED).order_by("hostname", "id")
    serializer_class = NodeBillingRowSerializer
    filterset_class = NodeBillingFilterSet
    search_fields = ["hostname", "instance_id"]
    ordering_fields = ["hostname", "billing_mode", "state"]

    def list(self, request, *args, **kwargs):
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        rows = node_billing_rows(nodes=page, now=timezone.now())
        return self.get_paginated_response(self.get_serializer(rows, many=True).data)


class CostReportView(StrictQueryParamsMixin, generics.GenericAPIView):
    """Monthly cost per node with totals per currency; `?format=csv` (or `cost-report.csv`) downloads it."""

    queryset = Node.objects.select_related(*NODE_RELATED).order_by("hostname", "id")
    serializer_class = CostReportSerializer
    filterset_class = NodeBillingFilterSet
    pagination_class = None
    search_fields = ["hostname", "instance_id"]
    ordering_fields = ["hostname", "billing_mode", "state"]
    renderer_classes = [*api_settings.DEFAULT_RENDERER_CLASSES, CostReportCSVRenderer]

    @extend_schema(parameters=[CostQuerySerializer], filters=True, responses=CostReportSerializer)
    def get(self, request, format=None):  # noqa: A002 — DRF passes the format suffix by this name
        params = _query(CostQuerySerializer, request)
        now = timezone.now()
        report = cost_report(nodes=self.filter_queryset(self.get_queryset()), now=now,
                             period_days=params["period_days"])
        response = Response(self.get_serializer(report).data)
        if request.accepted_renderer.format == CostReportCSVRenderer.format:
            response["Content-Disposition"] = f'attachment; filename="cost-report-{now:%Y-%m-%d}.csv"'
        return response

    def finalize_response(self, request, response, *args, **kwargs):
        # Errors stay JSON in the one error shape even when CSV was asked for.
        if response.status_code >= 400 and getattr(request, "accepted_renderer", None) is not None \
                and request.accepted_renderer.format == CostReportCSVRenderer.format:
            request.accepted_renderer, request.accepted_media_type = JSONRenderer(), JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)


class PreemptionRateView(StrictQueryParamsMixin, APIView):
    """Preemptions per node-day over the last 7 and 30 days, per pool, site (region) or instance type."""

    @extend_schema(parameters=[PreemptionRateQuerySerializer], responses=PreemptionRateSerializer(many=True))
    def get(self, request):
        params = _query(PreemptionRateQuerySerializer, request)
        rows = preemption_rates(now=timezone.now(), scope=params["group_by"], billing_mode=params.get("billing_mode"))
        return Response(PreemptionRateSerializer(rows, many=True).data)


class PreemptionDailyView(StrictQueryParamsMixin, APIView):
    """Per spot pool and UTC day over the last `days` days: preemptions, node-hours on spot and the rate per
    node-day (the trends page's line chart)."""

    @extend_schema(parameters=[PreemptionDailyQuerySerializer], responses=PreemptionDailySerializer)
    def get(self, request):
        params = _query(PreemptionDailyQuerySerializer, request)
        days, pools = pool_preemptions_daily(now=timezone.now(), days=params["days"])
        return Response(PreemptionDailySerializer({"days": days, "pools": pools}).data)


class ExpiringReservedTermView(StrictQueryParamsMixin, APIView):
    """Reserved terms that end within `within_days` (default 30)."""

    @extend_schema(parameters=[ExpiringTermQuerySerializer], responses=ExpiringTermSerializer(many=True))
    def get(self, request):
        params = _query(ExpiringTermQuerySerializer, request)
        terms = expiring_reserved_terms(now=timezone.now(), **params)
        return Response(ExpiringTermSerializer(terms, many=True).data)


class PoolWhatIfView(StrictQueryParamsMixin, APIView):
    """The pool's monthly cost today and as on-demand, reserved, spot (with expected preemption losses) or
    bare metal."""

    @extend_schema(parameters=[PoolWhatIfQuerySerializer],
                   responses={200: PoolWhatIfSerializer, 404: OpenApiResponse(description="No such pool")})
    def get(self, request, pk: int):
        pool = get_object_or_404(Pool.objects.select_related("provider", "site"), pk=pk)
        params = _query(PoolWhatIfQuerySerializer, request)
        result = pool_what_if(pool=pool, now=timezone.now(), spot_preemption_rate=params.get("spot_preemption_rate"),
                              bare_metal_entry=params.get("bare_metal_price"))
        return Response(PoolWhatIfSerializer(result).data)
