from django.db import transaction
from django.shortcuts import get_object_or_404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import MethodNotAllowed
from rest_framework.generics import get_object_or_404 as get_object_or_404_lenient
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.core.api.errors import DomainError
from fleet.core.api.mixins import AuditedModelViewSet, StrictQueryParamsMixin
from fleet.health.api.renderers import EvidenceTextRenderer
from fleet.inventory.models import Node, Pool

from ..executors import registered
from ..filtersets import IncidentFilterSet
from ..models import (
    CircuitBreaker,
    FindingIntake,
    NodeRemediationSettings,
    Override,
    PoolRemediationSettings,
    RemediationPolicy,
    Workflow,
)
from ..selectors import incident_list, pools_overview
from ..services import actions
from ..services.breakers import breaker_reset
from ..services.overrides import override_create, override_revoke
from ..services.policies import policy_save, policy_table_version
from ..services.workflows import workflow_save
from .serializers import (
    BreakerResetSerializer,
    BulkIncidentResultSerializer,
    BulkIncidentSerializer,
    BulkOverrideSerializer,
    CircuitBreakerSerializer,
    CompleteStepSerializer,
    EscalateSerializer,
    ExecutorSerializer,
    FindingIntakeSerializer,
    IncidentCreateSerializer,
    IncidentDetailSerializer,
    IncidentSerializer,
    NodeRemediationSettingsSerializer,
    NoteSerializer,
    OverrideSerializer,
    PolicyVersionSerializer,
    PoolOverviewSerializer,
    PoolRemediationSettingsSerializer,
    RemediationPolicySerializer,
    StepActionSerializer,
    TimelineEntrySerializer,
    WorkflowSerializer,
)

_ACTION_ERRORS = {400: OpenApiResponse(description="Bad input (names the field)"),
                  403: OpenApiResponse(description="Viewers cannot act"),
                  409: OpenApiResponse(description="Not possible in the incident's current state (e.g. "
                                                   "step_out_of_order, not_awaiting_approval, incident_closed)")}
_FORMAT = OpenApiParameter("format", str, enum=["json", "text"], required=False,
                           description="json (default) or text (plain text for a ticket)")


def _step_action(serializer_class, description: str):
    return extend_schema(request=serializer_class, responses={200: IncidentDetailSerializer, **_ACTION_ERRORS},
                         description=description)


class IncidentViewSet(StrictQueryParamsMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Remediation incidents: one open per node and cause. Viewers read; operators open incidents by hand and act
    on them (approving a destructive step needs an operator or admin)."""

    queryset = incident_list()
    filterset_class = IncidentFilterSet
    search_fields = ["key", "title", "node__hostname"]
    ordering_fields = ["opened_at", "started_at", "closed_at", "state"]
    ordering = ["-opened_at"]

    def get_queryset(self):
        queryset = super().get_queryset()
        if self.action == "retrieve":
            queryset = queryset.prefetch_related("step_runs", "finding_links__finding__rule", "evidence")
        return queryset

    def get_serializer_class(self):
        if self.action == "create":
            return IncidentCreateSerializer
        return IncidentDetailSerializer if self.action == "retrieve" else IncidentSerializer

    def _detail(self, incident, code=status.HTTP_200_OK):
        fresh = self.get_queryset().model.objects.get(pk=incident.pk)
        return Response(IncidentDetailSerializer(fresh).data, status=code)

    @extend_schema(request=IncidentCreateSerializer, responses={201: IncidentDetailSerializer, **_ACTION_ERRORS},
                   description="Open an incident on a node with a chosen workflow (the node page's cordon, drain, "
                               "reboot and replace buttons use operator-cordon, operator-drain, operator-reboot "
                               "and operator-replace).")
    def create(self, request, *args, **kwargs):
        data = IncidentCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        incident = actions.incident_open_manual(node=data.validated_data["node"],
                                                workflow=data.validated_data["workflow"], actor=request.user,
                                                note=data.validated_data["note"])
        return self._detail(incident, status.HTTP_201_CREATED)

    @extend_schema(request=BulkIncidentSerializer, responses={200: BulkIncidentResultSerializer, **_ACTION_ERRORS},
                   description="Open the same operator workflow (e.g. operator-cordon) on several nodes (≤ 200). "
                               "Each node is its own incident; a node that cannot take one (an open incident of "
                               "that workflow, retired) is listed under `refused` with the reason, the others open.")
    @action(detail=False, methods=["post"], filter_backends=[], pagination_class=None)
    def bulk(self, request):
        data = BulkIncidentSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        opened, refused = [], []
        for node in data.validated_data["nodes"]:
            try:
                opened.append(actions.incident_open_manual(node=node, workflow=data.validated_data["workflow"],
                                                           actor=request.user, note=data.validated_data["note"]))
            except DomainError as exc:
                refused.append({"node": node.pk, "hostname": node.hostname, "code": exc.get_codes(),
                                "message": str(exc.detail)})
        incidents = incident_list().filter(pk__in=[i.pk for i in opened])
        return Response(BulkIncidentResultSerializer({"opened": incidents, "refused": refused}).data)

    def _run(self, request, pk, serializer_class, fn, **extra):
        # DRF's lookup turns an id that is not a number into a 404 instead of a ValueError.
        pk = get_object_or_404_lenient(self.get_queryset().model.objects.all(), pk=pk).pk
        data = serializer_class(data=request.data)
        data.is_valid(raise_exception=True)
        incident = fn(incident_id=pk, actor=request.user, **data.validated_data, **extra)
        return self._detail(incident)

    @_step_action(StepActionSerializer, "Approve the current step (destructive steps, workflows that ask, nodes "
                                        "labelled no-auto-remediation). Operators and admins.")
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        return self._run(request, pk, StepActionSerializer, actions.incident_approve)

    @_step_action(CompleteStepSerializer, "Mark the current waiting step done (a runbook step carried out).")
    @action(detail=True, methods=["post"])
    def complete(self, request, pk=None):
        return self._run(request, pk, CompleteStepSerializer, actions.incident_step_complete)

    @_step_action(StepActionSerializer, "Mark the current waiting step failed; its on-failure rule applies.")
    @action(detail=True, methods=["post"])
    def fail(self, request, pk=None):
        return self._run(request, pk, StepActionSerializer, actions.incident_step_fail)

    @_step_action(StepActionSerializer, "Run the current (failed or waiting) step again as a new attempt.")
    @action(detail=True, methods=["post"])
    def retry(self, request, pk=None):
        return self._run(request, pk, StepActionSerializer, actions.incident_step_retry)

    @_step_action(StepActionSerializer, "Skip the current step and go on.")
    @action(detail=True, methods=["post"])
    def skip(self, request, pk=None):
        return self._run(request, pk, StepActionSerializer, actions.incident_step_skip)

    @_step_action(EscalateSerializer, "Continue with another workflow.")
    @action(detail=True, methods=["post"])
    def escalate(self, request, pk=None):
        return self._run(request, pk, EscalateSerializer, actions.incident_escalate)

    @_step_action(NoteSerializer, "Cancel the incident (a mass-failure incident also closes its circuit breaker).")
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        pk = get_object_or_404_lenient(self.get_queryset().model.objects.all(), pk=pk).pk
        data = NoteSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return self._detail(actions.incident_cancel(incident_id=pk, actor=request.user,
                                                    note=data.validated_data["note"]))

    @_step_action(NoteSerializer, "Add a note to the timeline.")
    @action(detail=True, methods=["post"])
    def note(self, request, pk=None):
        return self._run(request, pk, NoteSerializer, actions.incident_note)

    @extend_schema(responses=TimelineEntrySerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def timeline(self, request, pk=None):
        incident = self.get_object()
        return Response(TimelineEntrySerializer(incident.timeline.all(), many=True).data)

    @extend_schema(parameters=[_FORMAT, OpenApiParameter("bundle", int, required=False,
                                                         description="A bundle id (default: the latest)")],
                   responses={(200, "application/json"): OpenApiTypes.OBJECT, (200, "text/plain"): OpenApiTypes.STR,
                              404: OpenApiResponse(description="No such incident, or no bundle yet")})
    @action(detail=True, methods=["get"], renderer_classes=[JSONRenderer, EvidenceTextRenderer],
            filter_backends=[], pagination_class=None)
    def evidence(self, request, pk=None):
        incident = self.get_object()
        bundles = incident.evidence.all()
        if request.query_params.get("bundle"):
            bundles = bundles.filter(pk=request.query_params["bundle"]) if request.query_params["bundle"].isdigit() \
                else bundles.none()
        bundle = bundles.first()
        if bundle is None:
            return Response({"error": {"code": "not_found", "message": "No evidence bundle captured yet.",
                                       "fields": {}}}, status=status.HTTP_404_NOT_FOUND)
        extension = "txt" if request.accepted_renderer.format == "text" else "json"
        stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
        return Response(bundle.bundle, headers={
            "Content-Disposition": f'attachment; filename="evidence-{incident.key}-{stamp}.{extension}"'})


class WorkflowViewSet(AuditedModelViewSet):
    """Workflows as data. Operators create and edit them; a workflow that an open incident runs cannot change its
    steps (409). No delete: disable instead."""

    queryset = Workflow.objects.all()
    serializer_class = WorkflowSerializer
    lookup_field = "slug"
    http_method_names = ["get", "post", "put", "patch", "head", "options"]
    filterset_fields = ["enabled", "built_in", "urgent"]
    search_fields = ["slug", "name"]
    pagination_class = None

    def perform_create(self, serializer):
        serializer.instance = workflow_save(data=serializer.validated_data, actor=self.request.user)

    def perform_update(self, serializer):
        serializer.instance = workflow_save(data=serializer.validated_data, actor=self.request.user,
                                            workflow=serializer.instance)


class RemediationPolicyViewSet(AuditedModelViewSet):
    """Which finding opens which workflow, tried in priority order (first match wins). Every change bumps the table
    version (incidents record the version that chose their workflow) and is audited. No delete: disable."""

    queryset = RemediationPolicy.objects.select_related("workflow")
    serializer_class = RemediationPolicySerializer
    http_method_names = ["get", "post", "put", "patch", "head", "options"]
    filterset_fields = ["enabled", "workflow__slug", "pool", "provider"]
    search_fields = ["name", "note"]
    pagination_class = None

    def perform_create(self, serializer):
        serializer.instance = policy_save(data=serializer.validated_data, actor=self.request.user)

    def perform_update(self, serializer):
        serializer.instance = policy_save(data=serializer.validated_data, actor=self.request.user,
                                          policy=serializer.instance)

    @extend_schema(responses=PolicyVersionSerializer)
    @action(detail=False, methods=["get"])
    def version(self, request):
        return Response(PolicyVersionSerializer({"version": policy_table_version(),
                                                 "policies": RemediationPolicy.objects.count()}).data)


class PoolRemediationSettingsViewSet(AuditedModelViewSet):
    """Per-pool remediation settings: executors in order, dry run, maintenance windows, the verification quiet
    period, and the concurrency limit (`Pool.max_concurrent_replacements`)."""

    queryset = PoolRemediationSettings.objects.select_related("pool")
    serializer_class = PoolRemediationSettingsSerializer
    lookup_field = "pool"
    http_method_names = ["get", "put", "patch", "head", "options"]
    pagination_class = None

    def get_object(self):
        pool = get_object_or_404(Pool, pk=self.kwargs["pool"]) if str(self.kwargs["pool"]).isdigit() else None
        if pool is None:
            return get_object_or_404(PoolRemediationSettings, pk=0)
        row, _ = PoolRemediationSettings.objects.get_or_create(pool=pool)
        self.check_object_permissions(self.request, row)
        return row

    @extend_schema(responses=PoolOverviewSerializer(many=True),
                   description="Per pool: nodes being remediated, the queue, dry run and the circuit breaker.")
    @action(detail=False, methods=["get"])
    def overview(self, request):
        return Response(PoolOverviewSerializer(pools_overview(), many=True).data)


class NodeRemediationSettingsViewSet(AuditedModelViewSet):
    """A node's own executor list (overrides its pool's)."""

    queryset = NodeRemediationSettings.objects.select_related("node").order_by("node_id")
    serializer_class = NodeRemediationSettingsSerializer
    lookup_field = "node"
    # A node id is a 64-bit integer: anything longer is a 404 from the router, not an overflow in the database.
    lookup_value_regex = r"[0-9]{1,18}"
    http_method_names = ["get", "post", "put", "patch", "delete", "head", "options"]
    filterset_fields = ["node"]


class CircuitBreakerViewSet(AuditedModelViewSet):
    """Circuit breakers per pool and site. Operators change the thresholds and reset an open breaker."""

    queryset = CircuitBreaker.objects.select_related("pool", "site", "incident")
    serializer_class = CircuitBreakerSerializer
    http_method_names = ["get", "post", "put", "patch", "head", "options"]
    filterset_fields = ["state", "pool", "site"]
    pagination_class = None

    def create(self, request, *args, **kwargs):
        raise MethodNotAllowed("POST", detail="Breakers are created with their pool or site.")

    @extend_schema(request=BreakerResetSerializer, responses={200: CircuitBreakerSerializer, **_ACTION_ERRORS})
    @action(detail=True, methods=["post"])
    def reset(self, request, pk=None):
        breaker = self.get_object()
        data = BreakerResetSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        breaker = breaker_reset(breaker=breaker, actor=request.user, note=data.validated_data["note"])
        return Response(CircuitBreakerSerializer(CircuitBreaker.objects.get(pk=breaker.pk)).data)


class OverrideViewSet(StrictQueryParamsMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Operator overrides on findings and GPUs: acknowledge, snooze until, mark healthy until — each with a reason,
    audited. Snoozed or healthy-marked findings open no incidents."""

    queryset = Override.objects.all()
    serializer_class = OverrideSerializer
    filterset_fields = ["kind", "finding", "gpu"]

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = override_create(actor=self.request.user, kind=data["kind"], reason=data["reason"],
                                              finding=data.get("finding"), gpu=data.get("gpu"),
                                              until=data.get("until"))

    @extend_schema(request=BulkOverrideSerializer, responses={201: OverrideSerializer(many=True), **_ACTION_ERRORS},
                   description="Acknowledge, snooze or mark healthy several findings (≤ 200) with one reason: all "
                               "or none (a bad `until` changes nothing).")
    @action(detail=False, methods=["post"], filter_backends=[], pagination_class=None)
    def bulk(self, request):
        data = BulkOverrideSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        with transaction.atomic():
            overrides = [override_create(actor=request.user, kind=values["kind"], reason=values["reason"],
                                         finding=finding, until=values["until"]) for finding in values["findings"]]
        return Response(OverrideSerializer(overrides, many=True).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=OverrideSerializer)
    @action(detail=True, methods=["post"])
    def revoke(self, request, pk=None):
        override = override_revoke(override=self.get_object(), actor=request.user)
        return Response(OverrideSerializer(override).data)


class FindingIntakeViewSet(StrictQueryParamsMixin, viewsets.ReadOnlyModelViewSet):
    """What remediation decided for each finding (opened, attached, no policy, snoozed, …)."""

    queryset = FindingIntake.objects.select_related("incident")
    serializer_class = FindingIntakeSerializer
    # The key is the finding's 64-bit id: anything longer is a 404 from the router, not an overflow in the database.
    lookup_value_regex = r"[0-9]{1,18}"
    filterset_fields = ["finding", "outcome", "incident", "finding__node"]
    ordering = ["-decided_at"]


class ExecutorListView(StrictQueryParamsMixin, APIView):
    """Executors installed on this server and the step kinds each can carry out."""

    @extend_schema(responses=ExecutorSerializer(many=True))
    def get(self, request):
        rows = [{"name": e.name, "kinds": sorted(e.kinds)} for e in registered().values()]
        return Response(ExecutorSerializer(sorted(rows, key=lambda r: r["name"]), many=True).data)


class NodeIncidentsView(StrictQueryParamsMixin, APIView):
    """A node's incidents, newest first (the node page)."""

    @extend_schema(responses=IncidentSerializer(many=True))
    def get(self, request, node_id: int):
        node = get_object_or_404(Node, pk=node_id)
        return Response(IncidentSerializer(incident_list().filter(node=node)[:50], many=True).data)
