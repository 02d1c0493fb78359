import uuid

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from .choices import (
    AgentActionKind,
    AgentActionState,
    BootstrapState,
    ConfiguredExecutor,
    ExternalState,
    HostKeyState,
    RunState,
    SSHActionKind,
    SSHActionState,
)


class SSHKey(models.Model):
    """A private key the control plane logs in with, encrypted at rest (FLEET_ENCRYPTION_KEYS). Only the public half
    and its fingerprint are ever shown."""

    name = models.CharField(max_length=100, unique=True)
    public_key = models.TextField()
    fingerprint = models.CharField(max_length=100)
    private_key_encrypted = models.BinaryField(editable=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "SSH key"

    def __str__(self) -> str:
        return f"{self.name} ({self.fingerprint})"


class SSHHost(models.Model):
    """A bare-metal host reached over SSH, with its host key pinned once an operator confirmed the fingerprint."""

    address = models.CharField(max_length=253, help_text="Host name or IP address")
    port = models.PositiveIntegerField(default=22, validators=[MinValueValidator(1), MaxValueValidator(65535)])
    username = models.CharField(max_length=64)
    key = models.ForeignKey(SSHKey, on_delete=models.PROTECT, null=True, blank=True, related_name="hosts",
                            help_text="Empty: use the server's ssh-agent (FLEET_SSH_AUTH_SOCK)")
    jump_host = models.ForeignKey("self", on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    pool = models.ForeignKey("inventory.Pool", on_delete=models.SET_NULL, null=True, blank=True,
                             related_name="ssh_hosts")
    node = models.OneToOneField("inventory.Node", on_delete=models.SET_NULL, null=True, blank=True,
                                related_name="ssh_host")
    host_key = models.TextField(blank=True, help_text="The pinned host key (OpenSSH public key line)")
    host_key_fingerprint = models.CharField(max_length=100, blank=True)
    host_key_state = models.CharField(max_length=16, choices=HostKeyState.choices, default=HostKeyState.UNKNOWN)
    offered_host_key = models.TextField(blank=True, help_text="What the host offered at the last scan")
    offered_fingerprint = models.CharField(max_length=100, blank=True)
    offered_at = models.DateTimeField(null=True, blank=True)
    confirmed_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                     related_name="+")
    confirmed_at = models.DateTimeField(null=True, blank=True)
    last_contact_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=1000, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["address", "port"]
        verbose_name = "SSH host"
        constraints = [models.UniqueConstraint(fields=["address", "port"], name="ssh_host_unique_address_port")]

    def __str__(self) -> str:
        return f"{self.username}@{self.address}:{self.port}"


class BootstrapRun(models.Model):
    """Installing the agent on many hosts at once: one row per run, one `BootstrapHost` per host."""

    pool = models.ForeignKey("inventory.Pool", on_delete=models.PROTECT, related_name="+")
    state = models.CharField(max_length=16, choices=RunState.choices, default=RunState.QUEUED)
    options = models.JSONField(default=dict, blank=True, help_text="install.sh options (no secrets)")
    concurrency = models.PositiveSmallIntegerField(default=10)
    host_timeout_s = models.PositiveIntegerField(default=600)
    enrollment_token = models.ForeignKey("telemetry.EnrollmentToken", on_delete=models.SET_NULL, null=True,
                                         blank=True, related_name="+")
    # The enrolment token's key, encrypted, for the worker that runs the hosts; wiped when the run ends.
    token_encrypted = models.BinaryField(null=True, blank=True, editable=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"bootstrap #{self.pk} into {self.pool}"


class BootstrapHost(models.Model):
    run = models.ForeignKey(BootstrapRun, on_delete=models.CASCADE, related_name="hosts")
    host = models.ForeignKey(SSHHost, on_delete=models.CASCADE, related_name="bootstraps")
    state = models.CharField(max_length=16, choices=BootstrapState.choices, default=BootstrapState.QUEUED)
    message = models.CharField(max_length=1000, blank=True)
    output_tail = models.TextField(blank=True)
    node = models.ForeignKey("inventory.Node", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["run_id", "id"]
        constraints = [models.UniqueConstraint(fields=["run", "host"], name="bootstrap_host_once_per_run")]


class SSHAction(models.Model):
    """One thing run on a host over SSH: diagnostics, a reboot, a GPU reset, a hook. Steps of a remediation
    carry their idempotency key, so a retried step finds its action instead of running it again."""

    host = models.ForeignKey(SSHHost, on_delete=models.CASCADE, related_name="actions")
    kind = models.CharField(max_length=16, choices=SSHActionKind.choices)
    params = models.JSONField(default=dict, blank=True)
    idempotency_key = models.CharField(max_length=200, null=True, blank=True, unique=True)
    incident_key = models.CharField(max_length=64, blank=True)
    state = models.CharField(max_length=16, choices=SSHActionState.choices, default=SSHActionState.QUEUED)
    exit_status = models.IntegerField(null=True, blank=True)
    message = models.CharField(max_length=1000, blank=True)
    result = models.JSONField(default=dict, blank=True)
    requested_by = models.CharField(max_length=150, blank=True)
    requested_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_s = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["-requested_at", "-id"]
        verbose_name = "SSH action"


class AgentAction(models.Model):
    """An action for a node's agent, delivered in the answer to its reports (no inbound port on the node) and
    answered in a later report. The node decides whether it runs it (its own allow-list) and runs it at most once;
    the server keeps handing it out until an outcome comes back or it expires."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    node = models.ForeignKey("inventory.Node", on_delete=models.CASCADE, related_name="agent_actions")
    kind = models.CharField(max_length=20, choices=AgentActionKind.choices)
    params = models.JSONField(default=dict, blank=True)
    not_after = models.DateTimeField(help_text="The node refuses it after this moment")
    idempotency_key = models.CharField(max_length=200, null=True, blank=True, unique=True)
    incident_key = models.CharField(max_length=64, blank=True)
    requested_by = models.CharField(max_length=150, blank=True)
    state = models.CharField(max_length=16, choices=AgentActionState.choices, default=AgentActionState.PENDING)
    boot_id_before = models.CharField(max_length=64, blank=True, help_text="reboot: the node's boot before it")
    created_at = models.DateTimeField()
    delivered_at = models.DateTimeField(null=True, blank=True)
    deliveries = models.PositiveIntegerField(default=0)
    # The outcome, as the node reported it (claims of the node, shown as such).
    exit_status = models.IntegerField(null=True, blank=True)
    message = models.CharField(max_length=4096, blank=True)
    stdout_tail = models.TextField(blank=True)
    stderr_tail = models.TextField(blank=True)
    evidence = models.JSONField(null=True, blank=True)
    duration_s = models.FloatField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    reported_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["node", "state"], name="agentaction_open_by_node",
                                condition=models.Q(state__in=["pending", "delivered"]))]

    def __str__(self) -> str:
        return f"{self.kind} on {self.node_id} ({self.state})"


class ExecutorConfig(models.Model):
    """How one executor reaches a pool's scheduler or cloud: settings (validated per executor) and, where one is
    needed, a secret (API token, secret access key, webhook signing secret), encrypted and never shown."""

    pool = models.ForeignKey("inventory.Pool", on_delete=models.CASCADE, related_name="executor_configs")
    executor = models.CharField(max_length=16, choices=ConfiguredExecutor.choices)
    settings = models.JSONField(default=dict, blank=True)
    secret_encrypted = models.BinaryField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["pool_id", "executor"]
        constraints = [models.UniqueConstraint(fields=["pool", "executor"], name="executor_config_once_per_pool")]

    def __str__(self) -> str:
        return f"{self.executor} for {self.pool}"

    @property
    def has_secret(self) -> bool:
        return bool(self.secret_encrypted)


class ExternalRequest(models.Model):
    """One request an executor made outside the fleet: an AWS replacement or a signed webhook. Recorded under the
    step's idempotency key before it is sent, so a retried step never asks twice; a webhook's receiver completes
    it through the signed callback URL."""

    public_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    executor = models.CharField(max_length=16, choices=ConfiguredExecutor.choices)
    kind = models.CharField(max_length=32, help_text="The remediation step kind")
    node = models.ForeignKey("inventory.Node", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    pool = models.ForeignKey("inventory.Pool", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    incident_key = models.CharField(max_length=64, blank=True)
    idempotency_key = models.CharField(max_length=200, unique=True)
    state = models.CharField(max_length=16, choices=ExternalState.choices, default=ExternalState.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    payload = models.JSONField(default=dict, blank=True, help_text="What was sent (no secrets)")
    detail = models.JSONField(default=dict, blank=True, help_text="What came back")
    message = models.CharField(max_length=1000, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
