import ipaddress
import re

from rest_framework import serializers

from fleet.inventory.models import Node, Pool
from fleet_agent.protocol import ACTION_KINDS

from ..models import AgentAction, BootstrapHost, BootstrapRun, ExecutorConfig, SSHAction, SSHHost, SSHKey

HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}"
                      r"[A-Za-z0-9])?)*$")


class SSHKeySerializer(serializers.ModelSerializer):
    host_count = serializers.IntegerField(read_only=True, default=0)

    class Meta:
        model = SSHKey
        fields = ["id", "name", "public_key", "fingerprint", "host_count", "created_at"]
        read_only_fields = fields


class SSHKeyCreateSerializer(serializers.Serializer):
    """Import a private key (and its passphrase, if it has one) or let the server generate an Ed25519 pair.
    The private key is write-only: no answer ever contains it."""

    name = serializers.CharField(max_length=100)
    private_key = serializers.CharField(required=False, allow_blank=True, write_only=True, trim_whitespace=False,
                                        style={"base_template": "textarea.html"})
    passphrase = serializers.CharField(required=False, allow_blank=True, write_only=True, trim_whitespace=False)
    generate = serializers.BooleanField(required=False, default=False)

    def validate(self, attrs):
        if attrs.get("generate") == bool(attrs.get("private_key")):
            raise serializers.ValidationError({"private_key": ["Give a private key, or set generate (not both)."]})
        return attrs


class SSHHostSerializer(serializers.ModelSerializer):
    key_name = serializers.CharField(source="key.name", read_only=True, default=None, allow_null=True)
    pool_name = serializers.CharField(source="pool.name", read_only=True, default=None, allow_null=True)
    node_hostname = serializers.CharField(source="node.hostname", read_only=True, default=None, allow_null=True)
    jump_host_label = serializers.SerializerMethodField()
    confirmed_by_name = serializers.CharField(source="confirmed_by.username", read_only=True, default=None,
                                              allow_null=True)
    key = serializers.PrimaryKeyRelatedField(queryset=SSHKey.objects.all(), required=False, allow_null=True)
    jump_host = serializers.PrimaryKeyRelatedField(queryset=SSHHost.objects.all(), required=False, allow_null=True)
    pool = serializers.PrimaryKeyRelatedField(queryset=Pool.objects.all(), required=False, allow_null=True)
    node = serializers.PrimaryKeyRelatedField(queryset=Node.objects.all(), required=False, allow_null=True)

    class Meta:
        model = SSHHost
        fields = ["id", "address", "port", "username", "key", "key_name", "jump_host", "jump_host_label", "pool",
                  "pool_name", "node", "node_hostname", "host_key_state", "host_key_fingerprint",
                  "offered_fingerprint", "offered_host_key", "offered_at", "confirmed_by_name", "confirmed_at",
                  "last_contact_at", "last_error", "created_at", "updated_at"]
        read_only_fields = ["host_key_state", "host_key_fingerprint", "offered_fingerprint", "offered_host_key",
                            "offered_at", "confirmed_at", "last_contact_at", "last_error", "created_at", "updated_at"]

    def get_jump_host_label(self, host) -> str | None:
        return str(host.jump_host) if host.jump_host_id else None

    def validate_address(self, value: str) -> str:
        value = value.strip()
        try:
            return str(ipaddress.ip_address(value))
        except ValueError:
            pass
        if not HOSTNAME.match(value):
            raise serializers.ValidationError("A host name (letters, digits, '-' and '.') or an IP address.")
        return value.lower()

    def validate_username(self, value: str) -> str:
        if not value or any(ch.isspace() or ch in "@:" for ch in value) or value.startswith("-"):
            raise serializers.ValidationError("A login name without spaces, '@' or ':'.")
        return value

    def validate(self, attrs):
        node = attrs.get("node")
        if node is not None and SSHHost.objects.filter(node=node).exclude(
                pk=getattr(self.instance, "pk", None)).exists():
            raise serializers.ValidationError({"node": ["Another SSH host is linked to this node."]})
        return attrs


class ConfirmHostKeySerializer(serializers.Serializer):
    fingerprint = serializers.CharField(max_length=100, help_text="The SHA256 fingerprint the console showed")


class RebootSerializer(serializers.Serializer):
    confirm = serializers.CharField(help_text="The host's address, typed again: a reboot stops everything on it")


class GPUResetSerializer(serializers.Serializer):
    gpu_index = serializers.IntegerField(min_value=0, max_value=63)


class RunHookSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=64)
    timeout_s = serializers.IntegerField(min_value=1, max_value=3600, required=False, default=600)


class SSHActionSerializer(serializers.ModelSerializer):
    host_label = serializers.CharField(source="host.__str__", read_only=True)

    class Meta:
        model = SSHAction
        fields = ["id", "host", "host_label", "kind", "params", "state", "exit_status", "message", "result",
                  "incident_key", "requested_by", "requested_at", "started_at", "finished_at", "duration_s"]
        read_only_fields = fields


class BootstrapOptionsSerializer(serializers.Serializer):
    offline = serializers.BooleanField(required=False, default=False)
    allow_actions = serializers.ListField(child=serializers.ChoiceField(choices=ACTION_KINDS), required=False,
                                          default=list)
    root = serializers.CharField(required=False, allow_blank=True, default="")
    python = serializers.CharField(required=False, allow_blank=True, default="")
    no_systemd = serializers.BooleanField(required=False, default=False)
    force = serializers.BooleanField(required=False, default=False)


class BootstrapCreateSerializer(serializers.Serializer):
    pool = serializers.PrimaryKeyRelatedField(queryset=Pool.objects.all())
    hosts = serializers.PrimaryKeyRelatedField(queryset=SSHHost.objects.all(), many=True, allow_empty=False)
    options = BootstrapOptionsSerializer(required=False)
    concurrency = serializers.IntegerField(min_value=1, max_value=100, required=False)
    host_timeout_s = serializers.IntegerField(min_value=10, max_value=3600, required=False)


class BootstrapHostSerializer(serializers.ModelSerializer):
    host_label = serializers.CharField(source="host.__str__", read_only=True)
    node_hostname = serializers.CharField(source="node.hostname", read_only=True, default=None, allow_null=True)

    class Meta:
        model = BootstrapHost
        fields = ["id", "host", "host_label", "state", "message", "output_tail", "node", "node_hostname",
                  "started_at", "finished_at", "updated_at"]
        read_only_fields = fields


class BootstrapRunSerializer(serializers.ModelSerializer):
    pool_name = serializers.CharField(source="pool.name", read_only=True)
    created_by_name = serializers.CharField(source="created_by.username", read_only=True, default=None,
                                            allow_null=True)
    summary = serializers.SerializerMethodField()
    hosts = BootstrapHostSerializer(many=True, read_only=True)

    class Meta:
        model = BootstrapRun
        fields = ["id", "pool", "pool_name", "state", "options", "concurrency", "host_timeout_s", "created_by_name",
                  "created_at", "started_at", "finished_at", "summary", "hosts"]
        read_only_fields = fields

    def get_summary(self, run) -> dict[str, int]:
        counts: dict[str, int] = {}
        for row in run.hosts.all():
            counts[row.state] = counts.get(row.state, 0) + 1
        return counts


class AgentActionSerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True)
    node_hostname = serializers.CharField(source="node.hostname", read_only=True)

    class Meta:
        model = AgentAction
        fields = ["id", "node", "node_hostname", "kind", "params", "state", "not_after", "incident_key",
                  "requested_by", "created_at", "delivered_at", "deliveries", "exit_status", "message",
                  "stdout_tail", "stderr_tail", "evidence", "duration_s", "started_at", "finished_at", "reported_at"]
        read_only_fields = fields


class AgentActionCreateSerializer(serializers.Serializer):
    node = serializers.PrimaryKeyRelatedField(queryset=Node.objects.all())
    kind = serializers.CharField(max_length=20)
    params = serializers.DictField(required=False, default=dict)
    ttl_s = serializers.IntegerField(min_value=30, max_value=7 * 86400, required=False, default=3600)


class ExecutorConfigSerializer(serializers.ModelSerializer):
    pool_name = serializers.CharField(source="pool.name", read_only=True)
    has_secret = serializers.BooleanField(read_only=True)
    secret = serializers.CharField(write_only=True, required=False, allow_blank=False, trim_whitespace=False,
                                   help_text="API token / secret access key / signing secret; write-only")
    settings = serializers.JSONField()

    class Meta:
        model = ExecutorConfig
        fields = ["id", "pool", "pool_name", "executor", "settings", "secret", "has_secret", "created_at",
                  "updated_at"]
        read_only_fields = ["created_at", "updated_at"]
        validators: list = []  # one per pool and executor: the service says so, naming the field
