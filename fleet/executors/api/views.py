import uuid
from datetime import timedelta

from django.db import transaction
from django.db.models import Count, Prefetch
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, permissions, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.accounts.choices import Role
from fleet.core.api.mixins import StrictQueryParamsMixin
from fleet.telemetry.api.views import public_url

from ..choices import SSHActionKind
from ..models import AgentAction, BootstrapHost, BootstrapRun, ExecutorConfig, SSHAction, SSHHost, SSHKey
from ..services.agent_actions import agent_action_cancel, agent_action_request
from ..services.bootstrap import BootstrapOptions, bootstrap_create
from ..services.executor_configs import executor_config_delete, executor_config_save
from ..services.ssh_actions import ssh_action_request
from ..services.ssh_hosts import (
    ssh_host_confirm,
    ssh_host_create,
    ssh_host_delete,
    ssh_host_scan,
    ssh_host_update,
    ssh_key_delete,
    ssh_key_generate,
    ssh_key_import,
)
from ..services.webhook import webhook_callback
from .serializers import (
    AgentActionCreateSerializer,
    AgentActionSerializer,
    BootstrapCreateSerializer,
    BootstrapRunSerializer,
    ConfirmHostKeySerializer,
    ExecutorConfigSerializer,
    GPUResetSerializer,
    RebootSerializer,
    RunHookSerializer,
    SSHActionSerializer,
    SSHHostSerializer,
    SSHKeyCreateSerializer,
    SSHKeySerializer,
)


class SSHKeyViewSet(StrictQueryParamsMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                    mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """Login keys for SSH hosts. Operators see the public half; only admins add or remove keys (a private key
    opens every host that trusts it). The private key goes in once and never comes out."""

    queryset = SSHKey.objects.annotate(host_count=Count("hosts")).order_by("name")
    serializer_class = SSHKeySerializer
    read_role = Role.OPERATOR
    write_role = Role.ADMIN
    search_fields = ["name", "fingerprint"]

    @extend_schema(request=SSHKeyCreateSerializer, responses={201: SSHKeySerializer})
    def create(self, request):
        serializer = SSHKeyCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if data.get("generate"):
            key = ssh_key_generate(actor=request.user, name=data["name"])
        else:
            key = ssh_key_import(actor=request.user, name=data["name"], private_key=data["private_key"],
                                 passphrase=data.get("passphrase", ""))
        key.host_count = 0
        return Response(SSHKeySerializer(key).data, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance):
        ssh_key_delete(actor=self.request.user, key=instance)


class SSHHostViewSet(StrictQueryParamsMixin, viewsets.ModelViewSet):
    """Bare-metal hosts reached over SSH. A host's key is pinned only when an operator confirms the fingerprint
    the host offered (`confirm-host-key`); until then, and after it changes, nothing is run on it."""

    queryset = SSHHost.objects.select_related("key", "jump_host", "pool", "node", "confirmed_by")
    serializer_class = SSHHostSerializer
    filterset_fields = ["pool", "node", "host_key_state", "key"]
    search_fields = ["address", "username", "node__hostname"]
    ordering_fields = ["address", "port", "host_key_state", "last_contact_at", "created_at"]

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = ssh_host_create(actor=self.request.user, **data)

    def perform_update(self, serializer):
        serializer.instance = ssh_host_update(actor=self.request.user, host=serializer.instance,
                                              **serializer.validated_data)

    def perform_destroy(self, instance):
        ssh_host_delete(actor=self.request.user, host=instance)

    @extend_schema(request=None, responses=SSHHostSerializer)
    @action(detail=True, methods=["post"])
    def scan(self, request, pk=None):
        """Read the key the host offers now (it is pinned only by confirming its fingerprint)."""
        host = ssh_host_scan(host=self.get_object(), actor=request.user)
        return Response(SSHHostSerializer(host).data)

    @extend_schema(request=ConfirmHostKeySerializer, responses=SSHHostSerializer)
    @action(detail=True, methods=["post"], url_path="confirm-host-key")
    def confirm_host_key(self, request, pk=None):
        body = ConfirmHostKeySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        host = ssh_host_confirm(host=self.get_object(), actor=request.user,
                                fingerprint=body.validated_data["fingerprint"])
        return Response(SSHHostSerializer(host).data)

    def _queue(self, request, host: SSHHost, kind: str, params: dict) -> Response:
        from ..tasks import ssh_action_run

        with transaction.atomic():
            row, created = ssh_action_request(host=host, kind=kind, params=params, actor=request.user)
            if created:
                transaction.on_commit(lambda: ssh_action_run.delay(row.pk))
        return Response(SSHActionSerializer(row).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={202: SSHActionSerializer})
    @action(detail=True, methods=["post"])
    def diagnose(self, request, pk=None):
        """Collect nvidia-smi -q -x, the kernel log and its Xid lines, uptime and the PCI GPU count."""
        return self._queue(request, self.get_object(), SSHActionKind.DIAGNOSE, {})

    @extend_schema(request=RebootSerializer, responses={202: SSHActionSerializer})
    @action(detail=True, methods=["post"])
    def reboot(self, request, pk=None):
        host = self.get_object()
        body = RebootSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        if body.validated_data["confirm"].strip() != host.address:
            raise ValidationError({"confirm": [f"Type the host's address ({host.address}) to confirm the reboot."]})
        return self._queue(request, host, SSHActionKind.REBOOT, {})

    @extend_schema(request=GPUResetSerializer, responses={202: SSHActionSerializer})
    @action(detail=True, methods=["post"], url_path="gpu-reset")
    def gpu_reset(self, request, pk=None):
        body = GPUResetSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return self._queue(request, self.get_object(), SSHActionKind.GPU_RESET, dict(body.validated_data))

    @extend_schema(request=RunHookSerializer, responses={202: SSHActionSerializer})
    @action(detail=True, methods=["post"], url_path="run-hook")
    def run_hook(self, request, pk=None):
        body = RunHookSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        return self._queue(request, self.get_object(), SSHActionKind.RUN_HOOK, dict(body.validated_data))


class SSHActionViewSet(StrictQueryParamsMixin, viewsets.ReadOnlyModelViewSet):
    queryset = SSHAction.objects.select_related("host")
    serializer_class = SSHActionSerializer
    filterset_fields = ["host", "kind", "state", "incident_key"]
    ordering_fields = ["requested_at", "finished_at"]


class BootstrapRunViewSet(StrictQueryParamsMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                          mixins.CreateModelMixin, viewsets.GenericViewSet):
    """Install the agent on many SSH hosts at once; each host's progress is on the run."""

    queryset = BootstrapRun.objects.select_related("pool", "created_by").prefetch_related(
        Prefetch("hosts", queryset=BootstrapHost.objects.select_related("host", "node")))
    serializer_class = BootstrapRunSerializer
    filterset_fields = ["pool", "state"]

    @extend_schema(request=BootstrapCreateSerializer, responses={202: BootstrapRunSerializer})
    def create(self, request):
        from ..tasks import bootstrap_run

        body = BootstrapCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        options = BootstrapOptions(**{**data.get("options", {}),
                                      "allow_actions": tuple((data.get("options") or {}).get("allow_actions", ()))})
        with transaction.atomic():
            run = bootstrap_create(actor=request.user, pool=data["pool"], hosts=list(dict.fromkeys(data["hosts"])),
                                   server_url=public_url(request), options=options,
                                   concurrency=data.get("concurrency"), host_timeout_s=data.get("host_timeout_s"))
            transaction.on_commit(lambda: bootstrap_run.delay(run.pk))
        return Response(BootstrapRunSerializer(self.get_queryset().get(pk=run.pk)).data,
                        status=status.HTTP_202_ACCEPTED)


class AgentActionViewSet(StrictQueryParamsMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                         viewsets.GenericViewSet):
    """Actions for nodes' agents (the action channel): queued here or by a remediation step, handed to the node
    with the answer to its next report, answered by a later report. Operators only: outcomes carry node output."""

    queryset = AgentAction.objects.select_related("node")
    serializer_class = AgentActionSerializer
    read_role = Role.OPERATOR
    lookup_field = "public_id"
    lookup_url_kwarg = "pk"
    filterset_fields = ["node", "kind", "state", "incident_key"]
    ordering_fields = ["created_at", "reported_at"]

    def get_object(self):
        try:
            uuid.UUID(str(self.kwargs["pk"]))
        except ValueError:
            raise NotFound("No such agent action.") from None
        return super().get_object()

    @extend_schema(request=AgentActionCreateSerializer, responses={201: AgentActionSerializer})
    def create(self, request):
        body = AgentActionCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        action, _ = agent_action_request(node=data["node"], kind=data["kind"], params=data["params"],
                                         actor=request.user, ttl=timedelta(seconds=data["ttl_s"]))
        return Response(AgentActionSerializer(action).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=AgentActionSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        return Response(AgentActionSerializer(agent_action_cancel(action=self.get_object(),
                                                                  actor=request.user)).data)


class ExecutorConfigViewSet(StrictQueryParamsMixin, viewsets.ModelViewSet):
    """How the Slurm, Kubernetes, AWS and webhook executors reach a pool's scheduler or cloud. Admins write
    (these hold credentials); operators read. A secret goes in and never comes out (`has_secret`)."""

    queryset = ExecutorConfig.objects.select_related("pool")
    serializer_class = ExecutorConfigSerializer
    read_role = Role.OPERATOR
    write_role = Role.ADMIN
    filterset_fields = ["pool", "executor"]

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance = executor_config_save(actor=self.request.user, pool=data["pool"],
                                                   executor=data["executor"], settings=data["settings"],
                                                   secret=data.get("secret"))

    def perform_update(self, serializer):
        instance = serializer.instance
        data = serializer.validated_data
        serializer.instance = executor_config_save(
            actor=self.request.user, pool=data.get("pool", instance.pool),
            executor=data.get("executor", instance.executor), settings=data.get("settings", instance.settings),
            secret=data.get("secret"), instance=instance)

    def perform_destroy(self, instance):
        executor_config_delete(actor=self.request.user, config=instance)


class ExecutorCallbackView(StrictQueryParamsMixin, APIView):
    """Where a webhook's receiver reports back (signed with the pool's webhook secret; see docs/executors.md)."""

    authentication_classes: list = []
    permission_classes = [permissions.AllowAny]
    parser_classes: list = []

    @extend_schema(request={"application/json": {"type": "object", "description": '{"status": "in_progress | done '
                                                 '| failed", "message": "…", "replacement": {…}}, signed: '
                                                 'X-Fleet-Signature: t=<unix>,v1=<hex HMAC-SHA256>'}},
                   responses={200: {"type": "object"}}, auth=[])
    def post(self, request, public_id):
        result = webhook_callback(public_id=str(public_id), body=request.body,
                                  signature=request.headers.get("X-Fleet-Signature", ""))
        return Response({"id": str(result.public_id), "state": result.state})
