from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from fleet.inventory.models import Pool, Provider, Site

from ..models import ChangeLogEntry, EnrollmentToken, Event, GPUStatus, NodeStatus, ReenrollmentApproval
from ..services.enrollment import MAX_APPROVAL

MAX_TOKEN_USES = 1_000_000


class EnrollmentTokenSerializer(serializers.ModelSerializer):
    provider = serializers.PrimaryKeyRelatedField(queryset=Provider.objects.all())
    site = serializers.PrimaryKeyRelatedField(queryset=Site.objects.all(), required=False, allow_null=True)
    pool = serializers.PrimaryKeyRelatedField(queryset=Pool.objects.all(), required=False, allow_null=True)
    labels = serializers.DictField(child=serializers.CharField(max_length=200), required=False)
    is_usable = serializers.BooleanField(read_only=True)
    max_uses = serializers.IntegerField(min_value=1, max_value=MAX_TOKEN_USES, required=False, allow_null=True)

    class Meta:
        model = EnrollmentToken
        fields = ["id", "name", "prefix", "provider", "site", "pool", "delivery_form", "billing_mode", "labels",
                  "expires_at", "max_uses", "uses", "revoked_at", "is_usable", "created_at"]
        read_only_fields = ["prefix", "uses", "revoked_at", "created_at"]

    def validate_expires_at(self, value):
        if value is not None and value <= timezone.now():
            raise serializers.ValidationError("Must be in the future: a token that is already expired enrols nothing.")
        return value

    def validate_labels(self, value):
        # The values are CharFields (which refuse NUL characters); the keys are not checked by DictField.
        for key in value:
            if not key or len(key) > 100 or "\x00" in key:
                raise serializers.ValidationError(f"Label names are 1-100 characters without NUL: {key[:100]!r}.")
        return value


class EnrollmentTokenCreatedSerializer(EnrollmentTokenSerializer):
    key = serializers.CharField(read_only=True, help_text="Shown once.")
    install_command = serializers.CharField(read_only=True)

    class Meta(EnrollmentTokenSerializer.Meta):
        fields = EnrollmentTokenSerializer.Meta.fields + ["key", "install_command"]


class EnrollCloudSerializer(serializers.Serializer):
    provider = serializers.CharField(allow_null=True, required=False, max_length=32)
    instance_id = serializers.CharField(allow_null=True, required=False, allow_blank=True, max_length=100)
    instance_type = serializers.CharField(allow_null=True, required=False, allow_blank=True, max_length=64)
    region = serializers.CharField(allow_null=True, required=False, allow_blank=True, max_length=64)
    spot = serializers.BooleanField(allow_null=True, required=False)


class EnrollFactsSerializer(serializers.Serializer):
    machine_id = serializers.RegexField(r"^[A-Za-z0-9_.:-]{8,64}$", max_length=64)
    hostname = serializers.CharField(max_length=253)
    agent_version = serializers.CharField(max_length=32, required=False, allow_blank=True)
    agent_instance_id = serializers.CharField(max_length=64, required=False, allow_blank=True)
    gpu_count = serializers.IntegerField(min_value=0, max_value=64, required=False, allow_null=True)
    gpu_model = serializers.CharField(max_length=100, required=False, allow_blank=True, allow_null=True)
    cloud = EnrollCloudSerializer(required=False, allow_null=True)


class EnrollRequestSerializer(serializers.Serializer):
    token = serializers.CharField(max_length=200)
    credential = serializers.CharField(
        max_length=256, required=False, allow_blank=True, allow_null=True,
        help_text="The node's current credential, when it has one: re-enrolling a known machine needs it "
                  "(or an operator's approval).")
    facts = EnrollFactsSerializer()


class ReenrollmentAllowSerializer(serializers.Serializer):
    minutes = serializers.IntegerField(
        min_value=1, max_value=int(MAX_APPROVAL.total_seconds() // 60), required=False,
        help_text="How long the approval lasts (default REENROLLMENT_APPROVAL_MINUTES).")


class ReenrollmentApprovalSerializer(serializers.ModelSerializer):
    class Meta:
        model = ReenrollmentApproval
        fields = ["id", "node", "approved_by", "created_at", "expires_at", "used_at", "cancelled_at"]
        read_only_fields = fields


class EnrollResponseSerializer(serializers.Serializer):
    node_id = serializers.IntegerField()
    credential = serializers.CharField()
    reports_url = serializers.CharField()
    interval_s = serializers.IntegerField()


class DroppedSerializer(serializers.Serializer):
    events = serializers.IntegerField(help_text="Events over AGENT_MAX_EVENTS_PER_REPORT / _PER_BATCH")
    gpus = serializers.IntegerField(help_text="New GPUs over AGENT_MAX_GPUS_PER_NODE")
    gpu_uuid_conflicts = serializers.IntegerField(help_text="GPU uuids that belong to another node")


class ReportAckSerializer(serializers.Serializer):
    acked_sequence = serializers.IntegerField()
    agent_instance_id = serializers.CharField()
    accepted = serializers.IntegerField()
    duplicates = serializers.IntegerField()
    dropped = DroppedSerializer(required=False, help_text="Present when stored reports lost some of their content.")
    queued = serializers.BooleanField(required=False, help_text="Present (true) when the batch was acknowledged "
                                      "once durable in the ingest queue; a writer stores it within about a second "
                                      "(docs/agent-protocol.md). `duplicates` is then not yet known (0).")
    actions = serializers.ListField(child=serializers.DictField(), required=False,
                                    help_text="Open actions for this node, signed (docs/executors.md); absent if none")


class GPUStatusSerializer(serializers.ModelSerializer):
    index = serializers.IntegerField(source="gpu.index")
    uuid = serializers.CharField(source="gpu.uuid")
    model = serializers.CharField(source="gpu.model")
    temperature_slowdown_c = serializers.IntegerField(source="gpu.temperature_slowdown_c", allow_null=True)
    temperature_shutdown_c = serializers.IntegerField(source="gpu.temperature_shutdown_c", allow_null=True)

    class Meta:
        model = GPUStatus
        exclude = ["node"]


class NodeStatusSerializer(serializers.ModelSerializer):
    gpus = serializers.SerializerMethodField()

    class Meta:
        model = NodeStatus
        exclude = ["node", "fabric_key"]  # the health cycle's read key, not a fact

    @extend_schema_field(GPUStatusSerializer(many=True))
    def get_gpus(self, obj) -> list[dict]:
        rows = self.context.get("gpu_statuses", [])
        return GPUStatusSerializer(rows, many=True).data


class EventSerializer(serializers.ModelSerializer):
    hostname = serializers.CharField(source="node.hostname", read_only=True)
    gpu_index = serializers.IntegerField(source="gpu.index", read_only=True, default=None)
    gpu_uuid = serializers.CharField(source="gpu.uuid", read_only=True, default=None)

    class Meta:
        model = Event
        fields = ["id", "node", "hostname", "gpu", "gpu_index", "gpu_uuid", "kind", "code", "severity", "at",
                  "received_at", "pci_bus_id", "message", "raw", "detail"]


class ChangeLogEntrySerializer(serializers.ModelSerializer):
    class Meta:
        model = ChangeLogEntry
        fields = ["id", "node", "at", "field", "old", "new", "summary"]


class SeriesSerializer(serializers.Serializer):
    metric = serializers.CharField()
    step = serializers.IntegerField()
    source = serializers.CharField()
    points = serializers.ListField(child=serializers.ListField())


class SeriesQuerySerializer(serializers.Serializer):
    metric = serializers.ListField(child=serializers.CharField(), min_length=1)
    start = serializers.DateTimeField(required=False)
    end = serializers.DateTimeField(required=False)
    step = serializers.IntegerField(min_value=1, max_value=86400, required=False, default=60)

    def validate(self, attrs):
        if attrs.get("start") and attrs.get("end") and attrs["start"] >= attrs["end"]:
            raise serializers.ValidationError({"end": ["end must be after start."]})
        return attrs


class FleetSummarySerializer(serializers.Serializer):
    nodes = serializers.IntegerField()
    gpus = serializers.IntegerField()
    silent = serializers.IntegerField()
    reporting = serializers.IntegerField()
    by_state = serializers.DictField(child=serializers.IntegerField())
    by_delivery_form = serializers.DictField(child=serializers.IntegerField())
    by_billing_mode = serializers.DictField(child=serializers.IntegerField())
    by_provider = serializers.DictField(child=serializers.IntegerField())
    nvml_unavailable = serializers.IntegerField()
