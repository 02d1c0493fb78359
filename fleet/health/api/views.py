from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.core.api.mixins import AuditedModelViewSet, StrictQueryParamsMixin
from fleet.core.api.renderers import CSVExportMixin, CSVRenderer
from fleet.inventory.models import Node

from ..choices import STEP_ORDER, Severity
from ..filtersets import FindingFilterSet
from ..models import Rule, RuleOverride, XidPolicy
from ..selectors import finding_list, node_triage
from ..selectors.evidence import finding_evidence, node_evidence
from ..services.xid_policies import xid_policy_save, xid_policy_table_version
from .renderers import EvidenceTextRenderer
from .serializers import (
    FindingDetailSerializer,
    FindingSerializer,
    RuleOverrideSerializer,
    RuleSerializer,
    TriageSerializer,
    XidPolicySerializer,
    XidPolicyVersionSerializer,
)

_FORMAT = OpenApiParameter("format", str, enum=["json", "text"], required=False,
                           description="json (default) or text: the same bundle as plain text for a ticket")
_EVIDENCE_RESPONSES = {(200, "application/json"): OpenApiTypes.OBJECT, (200, "text/plain"): OpenApiTypes.STR,
                       404: OpenApiResponse(description="No such finding or node")}


def _evidence_response(request, bundle: dict, name: str) -> Response:
    extension = "txt" if request.accepted_renderer.format == "text" else "json"
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    disposition = f'attachment; filename="evidence-{name}-{stamp}.{extension}"'
    return Response(bundle, headers={"Content-Disposition": disposition})


class FindingsCSVRenderer(CSVRenderer):
    columns = ["id", "severity", "state", "hostname", "step_number", "step", "layer", "rule", "summary",
               "responsible_party", "provider_name", "provider_support_contact", "action_kind", "recommended_action",
               "gpu_index", "first_seen", "opened_at", "last_seen", "resolved_at", "resolution"]


class FindingViewSet(StrictQueryParamsMixin, CSVExportMixin, viewsets.ReadOnlyModelViewSet):
    """Findings of the health engine; filter by node, pool, severity, step, layer, responsible party, state."""

    queryset = finding_list()
    filterset_class = FindingFilterSet
    search_fields = ["summary", "node__hostname", "rule__slug", "rule__title", "node__provider__name"]
    ordering_fields = ["opened_at", "last_seen", "first_seen", "severity", "step", "resolved_at", "updated_at", "id"]
    # Severity sorts critical → warning → info and step in triage order, never alphabetically.
    ordering_ranks = {"severity": [s.value for s in Severity], "step": STEP_ORDER}
    ordering = ["-opened_at", "-id"]

    def get_serializer_class(self):
        return FindingDetailSerializer if self.action == "retrieve" else FindingSerializer

    @extend_schema(responses={(200, "text/csv"): OpenApiTypes.STR},
                   description="The filtered, ordered findings as CSV (up to 10,000 rows; the list's filters, "
                               "search and ordering; cells escaped against spreadsheet formula injection).")
    @action(detail=False, methods=["get"], pagination_class=None,
            renderer_classes=[FindingsCSVRenderer, JSONRenderer])
    def export(self, request):
        return self.csv_export(request, self.filter_queryset(self.get_queryset()), FindingSerializer, "findings")

    @extend_schema(parameters=[_FORMAT], responses=_EVIDENCE_RESPONSES,
                   description="The finding's evidence bundle: the finding with its routing, the node, the GPU "
                               "table, an nvidia-smi-like snapshot, the kernel-log lines around it, stack "
                               "versions and drift, recent changes. Download as JSON or plain text.")
    @action(detail=True, methods=["get"], renderer_classes=[JSONRenderer, EvidenceTextRenderer])
    def evidence(self, request, pk=None):
        finding = self.get_object()
        return _evidence_response(request, finding_evidence(finding=finding),
                                  f"{finding.node.hostname}-finding-{finding.pk}")


class RuleViewSet(AuditedModelViewSet):
    """The rule catalog. Operators change thresholds, durations, severity and the enabled flag; rules themselves
    come from code."""

    queryset = Rule.objects.all()
    serializer_class = RuleSerializer
    lookup_field = "slug"
    http_method_names = ["get", "put", "patch", "head", "options"]
    filterset_fields = ["step", "layer", "severity", "scope", "enabled"]
    search_fields = ["slug", "title"]
    pagination_class = None


class RuleOverrideViewSet(AuditedModelViewSet):
    """A pool's own thresholds for a rule (unset fields follow the fleet-wide rule)."""

    queryset = RuleOverride.objects.select_related("rule", "pool")
    serializer_class = RuleOverrideSerializer
    filterset_fields = ["rule__slug", "pool"]


class XidPolicyViewSet(AuditedModelViewSet):
    """The Xid policy table: meaning, severity, layer and first action per Xid. Every change bumps the table
    version, which findings record."""

    queryset = XidPolicy.objects.all()
    serializer_class = XidPolicySerializer
    lookup_field = "code"
    http_method_names = ["get", "post", "put", "patch", "head", "options"]
    filterset_fields = ["severity", "action", "layer"]
    search_fields = ["meaning"]
    pagination_class = None

    def perform_create(self, serializer):
        serializer.instance = xid_policy_save(data=serializer.validated_data, actor=self.request.user)

    def perform_update(self, serializer):
        serializer.instance = xid_policy_save(data=serializer.validated_data, actor=self.request.user,
                                              policy=serializer.instance)

    @extend_schema(responses=XidPolicyVersionSerializer)
    @action(detail=False, methods=["get"])
    def version(self, request):
        return Response(XidPolicyVersionSerializer({"version": xid_policy_table_version(),
                                                    "policies": XidPolicy.objects.count()}).data)


class NodeTriageView(StrictQueryParamsMixin, APIView):
    """The node's triage checklist: the four steps in order, the first failing one as the headline."""

    @extend_schema(responses={200: TriageSerializer, 404: OpenApiResponse(description="No such node")})
    def get(self, request, node_id: int):
        node = get_object_or_404(Node, pk=node_id)
        return Response(TriageSerializer(node_triage(node=node)).data)


class NodeEvidenceView(StrictQueryParamsMixin, APIView):
    """The node's evidence bundle (open findings, GPUs, nvidia-smi snapshot, kernel log, stack, changes)."""

    renderer_classes = [JSONRenderer, EvidenceTextRenderer]

    @extend_schema(parameters=[_FORMAT], responses=_EVIDENCE_RESPONSES)
    def get(self, request, node_id: int):
        node = get_object_or_404(Node, pk=node_id)
        return _evidence_response(request, node_evidence(node=node), node.hostname)
