import json

from django.db.models import Count, Q
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from fleet.accounts.choices import Role
from fleet.core.api.errors import DomainError
from fleet.core.api.mixins import AuditedModelViewSet, StrictQueryParamsMixin

from ..choices import MessageState
from ..connectors.base import InboundRejected
from ..filtersets import DeliveryFilterSet, TicketFilterSet
from ..models import Integration, OutboxMessage, RoutingRule, Ticket
from ..services.delivery import message_retry
from ..services.inbound import inbound_authenticate, inbound_receive
from ..services.integrations import (
    inbound_token_rotate,
    integration_create,
    integration_delete,
    integration_update,
)
from ..services.outbox import integration_test_message_write, ticket_acknowledge
from .serializers import (
    ConnectorSpecSerializer,
    DeliveryDetailSerializer,
    DeliverySerializer,
    InboundResultSerializer,
    InboundTokenSerializer,
    IntegrationCreatedSerializer,
    IntegrationSerializer,
    RoutingRuleSerializer,
    TicketAcknowledgeSerializer,
    TicketDetailSerializer,
    TicketSerializer,
    connector_specs,
    inbound_url,
)


class IntegrationViewSet(StrictQueryParamsMixin, viewsets.ModelViewSet):
    """Connectors to ticketing and notification systems. Admins configure them (they hold credentials and decide
    where fleet data goes); operators send test messages. Credentials are write-only."""

    queryset = Integration.objects.select_related("counter").annotate(
        backlog=Count("messages", filter=Q(messages__state__in=[MessageState.PENDING, MessageState.QUEUED,
                                                                 MessageState.SENDING, MessageState.RETRYING])))
    serializer_class = IntegrationSerializer
    write_role = Role.ADMIN
    action_roles = {"test": Role.OPERATOR}
    filterset_fields = ["kind", "enabled"]
    search_fields = ["name", "description"]
    pagination_class = None

    @extend_schema(responses={201: IntegrationCreatedSerializer})
    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        secrets = data.pop("secrets", None)
        integration, token = integration_create(data=data, secrets=secrets, actor=request.user)
        integration = self.get_queryset().get(pk=integration.pk)
        body = IntegrationCreatedSerializer(integration, context=self.get_serializer_context()).data
        body["inbound_token"] = token
        return Response(body, status=status.HTTP_201_CREATED)

    def perform_update(self, serializer):
        data = dict(serializer.validated_data)
        secrets = data.pop("secrets", None)
        serializer.instance = integration_update(integration=serializer.instance, data=data, secrets=secrets,
                                                 actor=self.request.user)

    def update(self, request, *args, **kwargs):
        super().update(request, *args, **kwargs)
        instance = self.get_queryset().get(pk=self.get_object().pk)
        return Response(self.get_serializer(instance).data)

    def perform_destroy(self, instance):
        integration_delete(integration=instance, actor=self.request.user)

    @extend_schema(request=None, responses={202: DeliverySerializer})
    @action(detail=True, methods=["post"])
    def test(self, request, pk=None):
        """Queue a test message; follow it in the delivery log."""
        integration = self.get_object()
        if not integration.enabled:
            raise DomainError("This integration is disabled; enable it to send a test message.",
                              code="integration_disabled")
        message = integration_test_message_write(integration=integration, actor=request.user)
        return Response(DeliverySerializer(message).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={200: InboundTokenSerializer})
    @action(detail=True, methods=["post"], url_path="rotate-inbound-token")
    def rotate_inbound_token(self, request, pk=None):
        """A new inbound token (shown once); the old one stops working at once."""
        integration = self.get_object()
        token = inbound_token_rotate(integration=integration, actor=request.user)
        return Response({"inbound_url": inbound_url(integration, request), "inbound_token": token})

    @extend_schema(responses={200: ConnectorSpecSerializer(many=True)})
    @action(detail=False, methods=["get"])
    def connectors(self, request):
        """What each connector kind needs: its settings (with defaults) and credentials."""
        return Response(connector_specs())


class RoutingRuleViewSet(AuditedModelViewSet):
    """Which integration gets which events (responsible party, severity, provider, pool, site, event kind, …)."""

    queryset = RoutingRule.objects.select_related("integration")
    serializer_class = RoutingRuleSerializer
    filterset_fields = ["integration", "enabled"]
    pagination_class = None


class DeliveryViewSet(StrictQueryParamsMixin, viewsets.ReadOnlyModelViewSet):
    """The delivery log: every message, its state, tries, response codes and next try; retry a dead one."""

    queryset = OutboxMessage.objects.select_related("integration", "ticket")
    filterset_class = DeliveryFilterSet
    search_fields = ["dedup_key", "last_error"]
    ordering_fields = ["id", "created_at", "next_attempt_at", "attempts"]
    ordering = ["-id"]
    action_roles = {"retry": Role.OPERATOR}

    def get_queryset(self):
        queryset = super().get_queryset()
        if self.action == "retrieve":
            queryset = queryset.prefetch_related("attempt_log")
        return queryset

    def get_serializer_class(self):
        return DeliveryDetailSerializer if self.action == "retrieve" else DeliverySerializer

    @extend_schema(request=None, responses={200: DeliveryDetailSerializer})
    @action(detail=True, methods=["post"])
    def retry(self, request, pk=None):
        """Send a dead-lettered or waiting message again now, with a fresh allowance of tries."""
        message = message_retry(message=self.get_object(), actor=request.user)
        return Response(DeliveryDetailSerializer(message, context=self.get_serializer_context()).data)


class TicketViewSet(StrictQueryParamsMixin, viewsets.GenericViewSet, mixins.ListModelMixin, mixins.RetrieveModelMixin):
    """External tickets: one per occurrence and integration, with their timeline (what we sent, what came back)."""

    queryset = Ticket.objects.select_related("integration").prefetch_related("findings")
    filterset_class = TicketFilterSet
    search_fields = ["key", "external_id", "title"]
    ordering = ["-opened_at"]
    action_roles = {"acknowledge": Role.OPERATOR}

    @extend_schema(request=TicketAcknowledgeSerializer, responses={202: DeliverySerializer})
    @action(detail=True, methods=["post"])
    def acknowledge(self, request, pk=None):
        """Acknowledge the external alert or ticket (PagerDuty, Opsgenie: acknowledged; others: a note)."""
        body = TicketAcknowledgeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        message = ticket_acknowledge(ticket=self.get_object(), actor=request.user, note=body.validated_data["note"])
        return Response(DeliverySerializer(message).data, status=status.HTTP_202_ACCEPTED)

    def get_queryset(self):
        queryset = super().get_queryset()
        if self.action == "retrieve":
            queryset = queryset.prefetch_related("updates")
        return queryset

    def get_serializer_class(self):
        return TicketDetailSerializer if self.action == "retrieve" else TicketSerializer


class InboundView(StrictQueryParamsMixin, APIView):
    """An external system's update about a ticket (acknowledged, in progress, resolved, a comment), authenticated
    by the integration's token or the system's webhook signature. 401 and nothing stored otherwise."""

    authentication_classes = []
    permission_classes = [AllowAny]
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "integration_inbound"

    def get_authenticate_header(self, request):
        return 'Bearer realm="integration inbound"'

    @extend_schema(request=OpenApiTypes.OBJECT, responses={
        200: InboundResultSerializer, 400: OpenApiResponse(description="Unreadable body"),
        401: OpenApiResponse(description="Unknown integration or a bad signature / token"),
        403: OpenApiResponse(description="The integration is disabled")})
    def post(self, request, inbound_id: str):
        from django.utils import timezone

        body = request.body
        headers = {k.lower(): v for k, v in request.headers.items()}
        now = timezone.now()
        integration = inbound_authenticate(inbound_id=inbound_id, headers=headers, body=body, now=now)
        try:
            payload = json.loads(body or b"null")
        except ValueError:
            raise DomainError("The body is not JSON.", code="invalid", status_code=400,
                              fields={"body": ["Not JSON."]}) from None
        try:
            result = inbound_receive(integration=integration, headers=headers, payload=payload, now=now)
        except InboundRejected as exc:
            name = str(exc).split(":", 1)[0] if ":" in str(exc) else "body"
            raise DomainError(str(exc), code="invalid", status_code=400, fields={name: [str(exc)]}) from None
        return Response(result.as_dict())
