import gzip
import time
import zlib

import orjson
from django.conf import settings
from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, permissions, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ParseError, PermissionDenied, ValidationError
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.throttling import AnonRateThrottle, SimpleRateThrottle
from rest_framework.views import APIView

from fleet.accounts.choices import Role
from fleet.core import ratelimit
from fleet.core.api.errors import error_body
from fleet.core.api.mixins import StrictQueryParamsMixin
from fleet.core.api.throttling import FailOpenThrottleMixin
from fleet.core.audit import audit_context
from fleet.inventory.models import GPU, Node

from .. import metrics
from ..authentication import IsNodeAgent, NodeCredentialAuthentication, NodePrincipal
from ..models import ChangeLogEntry, EnrollmentToken, Event
from ..secrets import hash_secret
from ..selectors import SeriesError, fleet_summary, gpu_series, node_latest_status, node_series
from ..services import admission
from ..services.enrollment import (
    enrollment_token_create,
    enrollment_token_revoke,
    node_enroll,
    node_reenrollment_allow,
    node_reenrollment_cancel,
)
from ..services.ingest import NodeMismatch, claimed_nodes, one_instance
from ..services.stream import is_steady, queued_result, reports_accept
from ..validation import ReportInvalid, validate_batch
from .filtersets import EventFilterSet
from .parsers import StrictJSONParser
from .serializers import (
    ChangeLogEntrySerializer,
    EnrollmentTokenCreatedSerializer,
    EnrollmentTokenSerializer,
    EnrollRequestSerializer,
    EnrollResponseSerializer,
    EventSerializer,
    FleetSummarySerializer,
    NodeStatusSerializer,
    ReenrollmentAllowSerializer,
    ReenrollmentApprovalSerializer,
    ReportAckSerializer,
    SeriesQuerySerializer,
    SeriesSerializer,
)


def public_url(request) -> str:
    return settings.FLEET_PUBLIC_URL.rstrip("/") or request.build_absolute_uri("/").rstrip("/")


# Hooks that add to the answer of a report batch: `hook(*, node_id, signing_key, actions_open, reports, now) ->
# dict`. A higher app registers one in its AppConfig.ready() (the executors' action channel does).
REPORT_ANSWER_HOOKS: list = []


def report_answer_register(hook) -> None:
    if hook not in REPORT_ANSWER_HOOKS:
        REPORT_ANSWER_HOOKS.append(hook)


class EnrollmentTokenViewSet(StrictQueryParamsMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                             mixins.CreateModelMixin, viewsets.GenericViewSet):
    """Enrolment tokens (operators). The key and its install command are shown once, at creation."""

    queryset = EnrollmentToken.objects.select_related("provider", "pool", "site")
    serializer_class = EnrollmentTokenSerializer
    read_role = Role.OPERATOR
    filterset_fields = ["provider", "pool", "delivery_form", "billing_mode"]

    @extend_schema(responses={201: EnrollmentTokenCreatedSerializer})
    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        token, key = enrollment_token_create(actor=request.user, **serializer.validated_data)
        token.key = key
        token.install_command = f"curl -fsSL {public_url(request)}/install.sh | sudo sh -s -- --token {key}"
        return Response(EnrollmentTokenCreatedSerializer(token).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=EnrollmentTokenSerializer)
    @action(detail=True, methods=["post"])
    def revoke(self, request, pk=None):
        token = enrollment_token_revoke(token=self.get_object(), actor=request.user)
        return Response(EnrollmentTokenSerializer(token).data)


class EnrollThrottle(FailOpenThrottleMixin, AnonRateThrottle):
    """Per source address; generous, since a rollout behind one NAT enrols many nodes at once. Fails open."""

    scope = "enroll"


class EnrollView(StrictQueryParamsMixin, APIView):
    """Swap an enrolment token and the node's facts for a per-node credential (shown once)."""

    authentication_classes: list = []
    permission_classes = [permissions.AllowAny]
    throttle_classes = [EnrollThrottle]
    parser_classes = [StrictJSONParser]

    def get_authenticate_header(self, request):
        # A bad enrolment token is an authentication failure (401), not a permission one.
        return "EnrollmentToken"

    @extend_schema(request=EnrollRequestSerializer, responses={201: EnrollResponseSerializer}, auth=[])
    def post(self, request):
        serializer = EnrollRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        enrollment = node_enroll(token_key=serializer.validated_data["token"],
                                 facts=serializer.validated_data["facts"],
                                 credential=serializer.validated_data.get("credential"))
        body = {"node_id": enrollment.node.pk, "credential": enrollment.credential,
                "reports_url": "/api/v1/agent/reports", "interval_s": settings.FLEET_DEFAULT_REPORT_INTERVAL_S}
        return Response(body, status=status.HTTP_201_CREATED if enrollment.created else status.HTTP_200_OK)


class NodeRateThrottle(SimpleRateThrottle):
    """Per-node flood protection for the agent endpoints: a fixed window per node (`AGENT_RATE_LIMIT`). Fails open
    when the counter store is unavailable (`ratelimit.hit` returns None)."""

    scope = "agent"

    def allow_request(self, request, view):
        node_id = getattr(request.user, "node_id", None)
        if self.rate is None or node_id is None:
            return True
        count = ratelimit.hit(f"{self.scope}:{node_id}", self.duration)
        return count is None or count <= self.num_requests

    def wait(self):
        return ratelimit.seconds_left(self.duration)


def _read_body(request) -> bytes:
    limit = settings.AGENT_MAX_BODY_BYTES
    length = int(request.META.get("CONTENT_LENGTH") or 0)
    if length > limit:
        raise _TooLarge()
    raw = request.body
    if request.META.get("HTTP_CONTENT_ENCODING", "").lower() == "gzip":
        try:
            decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
            raw = decompressor.decompress(raw, limit + 1)
            if len(raw) > limit or decompressor.unconsumed_tail:
                raise _TooLarge()
        except (zlib.error, gzip.BadGzipFile) as exc:
            raise ParseError(f"Body is not valid gzip: {exc}") from None
        # One complete gzip member and nothing after it: a truncated stream or trailing bytes mean the body is
        # not what the agent sent (the agent writes exactly one member).
        if not decompressor.eof:
            raise ParseError("Body is not valid gzip: the stream is truncated.")
        if decompressor.unused_data:
            raise ParseError("Body is not valid gzip: data after the end of the gzip stream.")
    if len(raw) > limit:
        raise _TooLarge()
    return raw


class _TooLarge(Exception):
    pass


class ReportsView(StrictQueryParamsMixin, APIView):
    """A batch of agent reports. Idempotent on (node, agent instance, sequence)."""

    # Nearly every request is one steady-state report from a node whose credential is cached: `_steady_report`
    # answers those first in the middleware chain (fleet/telemetry/middleware.py), without DRF's request wrapping,
    # negotiation and exception machinery, in one Redis round trip (services/admission.py). Whatever it cannot
    # answer with a 200 reaches this view untouched.

    authentication_classes = [NodeCredentialAuthentication]
    permission_classes = [IsNodeAgent]
    throttle_classes = [NodeRateThrottle]
    parser_classes: list = []
    renderer_classes = [JSONRenderer]  # agents read JSON only; skips negotiating the browsable API

    @extend_schema(
        request={"application/json": {"type": "object", "description": "See docs/agent-protocol.md and the "
                                      "JSON Schema fleet_agent/schema/report-v1.schema.json"}},
        responses={200: ReportAckSerializer},
    )
    def post(self, request):
        started = time.perf_counter()
        now = timezone.now()
        try:
            raw = _read_body(request)
            payload = orjson.loads(raw)
            # A NUL can only arrive as the JSON escape, so without one the strings need no sanitising walk.
            reports = validate_batch(payload, now=now, has_nul=b"\\u0000" in raw)
            result = reports_accept(node_id=request.user.node_id, reports=reports, now=now)
        except _TooLarge:
            metrics.reports_rejected("too_large")
            limit = settings.AGENT_MAX_BODY_BYTES
            return Response(error_body("too_large", f"Body exceeds {limit} bytes; send smaller batches."),
                            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
        except orjson.JSONDecodeError as exc:
            metrics.reports_rejected("malformed")
            raise ParseError(f"Malformed JSON: {exc}") from None
        except ReportInvalid as exc:
            metrics.reports_rejected(exc.code)
            return Response(error_body(exc.code, f"Invalid report: {', '.join(sorted(exc.fields))}", exc.fields),
                            status=exc.status)
        except NodeMismatch as exc:
            metrics.reports_rejected("wrong_node")
            raise PermissionDenied(f"A node may only report for itself: {exc}.") from None
        except ValueError as exc:
            metrics.reports_rejected("invalid")
            raise ValidationError({"reports": [str(exc)]}) from None
        return Response(_answer_body(result=result, principal=request.user, reports=reports, now=now,
                                     started=started))


def _answer_body(*, result, principal, reports: list[dict], now, started: float) -> dict:
    """The answer to an accepted batch, on either path (the fast lane's must be the view's, byte for byte)."""
    # What higher apps add to the answer (the executors' action channel: outcomes in the batch are recorded,
    # open actions ride the answer), registered with `report_answer_register`.
    actions = {}
    for hook in REPORT_ANSWER_HOOKS:
        actions.update(hook(node_id=principal.node_id, signing_key=principal.action_key,
                            actions_open=principal.actions_open, reports=reports, now=now))
    # Queued reports count as stored when a writer has stored them (fleet_writer_reports_total).
    metrics.reports_accepted(0 if result.queued else result.accepted, result.duplicates,
                             time.perf_counter() - started)
    body = {"acked_sequence": result.acked_sequence, "agent_instance_id": result.agent_instance_id,
            "accepted": result.accepted, "duplicates": result.duplicates, **actions}
    if any(result.dropped.values()):
        metrics.items_dropped(result.dropped)
        body["dropped"] = result.dropped
    if result.queued:
        body["queued"] = True
    return body


_FAST_ACCEPT = ("application/json", "*/*", "application/*")


def _steady_report(request) -> HttpResponse | None:
    """The answer to a steady-state report from a cached credential under its rate limit, queued with one fsync;
    None for every other request (ReportsView answers it as before: errors, events, inventory, Redis trouble)."""
    if not admission.available():
        return None
    header = request.META.get("HTTP_AUTHORIZATION", "")
    parts = header.split()
    if len(parts) != 2 or parts[0].lower() != NodeCredentialAuthentication.keyword or not header.isascii():
        return None
    accept = request.META.get("HTTP_ACCEPT")
    if accept and not any(kind in accept for kind in _FAST_ACCEPT):
        return None  # DRF's negotiation decides (406)
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return None
    if not 0 < length <= min(settings.AGENT_MAX_BODY_BYTES, settings.DATA_UPLOAD_MAX_MEMORY_SIZE or length):
        return None  # the view answers a body Django or the agent limit refuses, with its error
    started = time.perf_counter()
    now = timezone.now()
    try:
        raw = _read_body(request)
        reports = validate_batch(orjson.loads(raw), now=now, has_nul=b"\\u0000" in raw)
        instance_id = one_instance(reports)
    except (_TooLarge, ParseError, ReportInvalid, ValueError):
        return None  # the view answers it with its error
    claimed = claimed_nodes(reports)
    if not is_steady(reports) or len(claimed) > 1:
        return None  # events or an inventory (written in the request), or reports the view refuses (403)
    throttle = NodeRateThrottle()
    admitted = admission.admit_and_enqueue(
        hash_secret(parts[1]), reports, now, claimed=claimed.pop() if claimed else None,
        limit=throttle.num_requests if throttle.rate is not None else None, window_s=throttle.duration or 1)
    if admitted is None:
        return None
    principal = NodePrincipal(node_id=admitted.node_id, credential_id=admitted.credential_id,
                              actions_open=admitted.actions_open, action_key=admitted.action_key,
                              username=f"node:{admitted.node_id}")
    request.user = principal  # as DRF would set it
    with audit_context(actor=principal):  # anything an answer hook writes names the node
        body = _answer_body(result=queued_result(instance_id, reports), principal=principal, reports=reports,
                            now=now, started=started)
    return HttpResponse(orjson.dumps(body), content_type="application/json")


class NodeTelemetryViewSet(StrictQueryParamsMixin, viewsets.GenericViewSet):
    """Per-node telemetry read endpoints, nested under /nodes/{id}/."""

    queryset = Node.objects.all()

    @extend_schema(responses=NodeStatusSerializer)
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def status(self, request, pk=None):
        node = self.get_object()
        status_row, gpus = node_latest_status(node=node)
        if status_row is None:
            raise NotFound("This node has not reported yet.")
        return Response(NodeStatusSerializer(status_row, context={"gpu_statuses": gpus}).data)

    @extend_schema(parameters=[
        OpenApiParameter("metric", str, many=True, required=True),
        OpenApiParameter("start", str), OpenApiParameter("end", str), OpenApiParameter("step", int)],
        responses=SeriesSerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def series(self, request, pk=None):
        return _series_response(request, lambda **kw: node_series(node=self.get_object(), **kw))

    @extend_schema(responses=ChangeLogEntrySerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def changes(self, request, pk=None):
        rows = ChangeLogEntry.objects.filter(node=self.get_object())[:200]
        return Response(ChangeLogEntrySerializer(rows, many=True).data)

    @extend_schema(methods=["POST"], request=ReenrollmentAllowSerializer,
                   responses={201: ReenrollmentApprovalSerializer},
                   description="Let this node's machine enrol again once, within the given minutes, without its "
                               "current credential (a node that lost its disk). Operators.")
    @extend_schema(methods=["DELETE"], request=None, responses={204: None},
                   description="Withdraw the open approvals to re-enrol this node. Operators.")
    @action(detail=True, methods=["post", "delete"], url_path="allow-reenrollment", pagination_class=None,
            filter_backends=[])
    def allow_reenrollment(self, request, pk=None):
        node = self.get_object()
        if request.method == "DELETE":
            node_reenrollment_cancel(node=node, actor=request.user)
            return Response(status=status.HTTP_204_NO_CONTENT)
        serializer = ReenrollmentAllowSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        minutes = serializer.validated_data.get("minutes") or settings.REENROLLMENT_APPROVAL_MINUTES
        approval = node_reenrollment_allow(node=node, actor=request.user,
                                           until=timezone.now() + timezone.timedelta(minutes=minutes))
        return Response(ReenrollmentApprovalSerializer(approval).data, status=status.HTTP_201_CREATED)


class GPUTelemetryViewSet(StrictQueryParamsMixin, viewsets.GenericViewSet):
    queryset = GPU.objects.all()

    @extend_schema(parameters=[
        OpenApiParameter("metric", str, many=True, required=True),
        OpenApiParameter("start", str), OpenApiParameter("end", str), OpenApiParameter("step", int)],
        responses=SeriesSerializer(many=True))
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def series(self, request, pk=None):
        return _series_response(request, lambda **kw: gpu_series(gpu=self.get_object(), **kw))


def _series_response(request, fetch):
    query = SeriesQuerySerializer(data={**request.query_params.dict(),
                                        "metric": request.query_params.getlist("metric")})
    query.is_valid(raise_exception=True)
    now = timezone.now()
    end = query.validated_data.get("end") or now
    start = query.validated_data.get("start") or end - timezone.timedelta(hours=1)
    try:
        data = fetch(metrics=query.validated_data["metric"], start=start, end=end,
                     step=query.validated_data["step"], now=now)
    except SeriesError as exc:
        raise ValidationError({exc.field: [str(exc)]}) from None
    return Response(data)


class EventViewSet(StrictQueryParamsMixin, viewsets.ReadOnlyModelViewSet):
    queryset = Event.objects.select_related("node", "gpu")
    serializer_class = EventSerializer
    filterset_class = EventFilterSet
    ordering_fields = ["at", "received_at", "severity"]
    search_fields = ["message", "node__hostname"]


class FleetSummaryView(StrictQueryParamsMixin, APIView):
    @extend_schema(responses=FleetSummarySerializer)
    def get(self, request):
        return Response(FleetSummarySerializer(fleet_summary()).data)
