from datetime import timedelta

from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ..choices import BASELINE_STACK_FIELDS, STACK_FIELDS, Layer, Owner
from ..models import GPU, Baseline, BoundaryOverride, Node, Pool, Provider, Site, SoftwareStack
from ..selectors import severity_name


class ProviderSerializer(serializers.ModelSerializer):
    class Meta:
        model = Provider
        fields = ["id", "name", "slug", "kind", "cloud", "support_contact", "notes", "created_at"]

    def validate(self, attrs):
        kind = attrs.get("kind", getattr(self.instance, "kind", None))
        cloud = attrs.get("cloud", getattr(self.instance, "cloud", ""))
        if cloud and kind != "cloud":
            raise serializers.ValidationError({"cloud": ["Only providers of kind 'cloud' have a cloud."]})
        return attrs


class SiteSerializer(serializers.ModelSerializer):
    provider_support_contact = serializers.CharField(source="provider.support_contact", read_only=True, default="",
                                                     help_text="The provider's contact, for sites without their own")

    class Meta:
        model = Site
        fields = ["id", "name", "provider", "region_code", "country", "icp_filing_required", "support_contact",
                  "provider_support_contact", "created_at"]
        validators = []  # the unique (provider, name) check below names the field

    def validate(self, attrs):
        provider = attrs.get("provider", getattr(self.instance, "provider", None))
        name = attrs.get("name", getattr(self.instance, "name", None))
        clash = Site.objects.filter(provider=provider, name=name)
        if self.instance is not None:
            clash = clash.exclude(pk=self.instance.pk)
        if clash.exists():
            raise serializers.ValidationError({"name": ["This provider already has a site with this name."]})
        return attrs

    def validate_country(self, value: str) -> str:
        if len(value) != 2 or not value.isalpha():
            raise serializers.ValidationError("Use an ISO 3166-1 alpha-2 code such as US, DE or CN.")
        return value.upper()


class PoolSerializer(serializers.ModelSerializer):
    node_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Pool
        fields = ["id", "name", "provider", "site", "delivery_form", "billing_mode", "instance_type", "gpu_model",
                  "gpus_per_node", "max_concurrent_replacements", "node_count", "created_at"]


def _validate_labels(value):
    if not isinstance(value, dict):
        raise serializers.ValidationError("Labels are an object of string keys to string values.")
    for key, item in value.items():
        if not isinstance(item, str) or len(key) > 63 or len(item) > 200:
            raise serializers.ValidationError(f"Label {key!r} must map to a string (keys ≤ 63, values ≤ 200 chars).")
    return value


# A report older than this many intervals (and at least the floor) counts as silent in the list, as in triage.
STALE_AFTER_INTERVALS = 3
MIN_STALE_AFTER_S = 60


class NodeSerializer(serializers.ModelSerializer):
    provider_name = serializers.CharField(source="provider.name", read_only=True)
    provider_support_contact = serializers.CharField(source="provider.support_contact", read_only=True)
    site_name = serializers.CharField(source="site.name", read_only=True, default=None)
    site_support_contact = serializers.CharField(source="site.support_contact", read_only=True, default=None,
                                                 help_text="The site's own contact (remote hands), if it has one")
    pool_name = serializers.CharField(source="pool.name", read_only=True, default=None)
    labels = serializers.JSONField(required=False, validators=[_validate_labels])
    # The triage columns (`selectors.node_list`); absent on a node just created or changed, then null.
    worst_severity = serializers.SerializerMethodField(help_text="Severity of the worst open finding; null if none")
    open_findings = serializers.IntegerField(read_only=True, default=None)
    open_since = serializers.DateTimeField(read_only=True, default=None,
                                           help_text="When the oldest open finding opened")
    headline_party = serializers.ChoiceField(
        choices=Owner.choices, read_only=True, default=None,
        help_text="Who acts on the triage headline: the first failing step's most severe, oldest finding")
    last_report_at = serializers.DateTimeField(read_only=True, default=None,
                                               help_text="When the latest agent report arrived (null: never)")
    silent = serializers.SerializerMethodField(
        help_text="No report for 3 intervals (at least 60 s) or flagged silent; null when it never reported")
    gpus_seen = serializers.IntegerField(read_only=True, default=None,
                                         help_text="GPUs in the latest report, less those it marks lost")
    gpus_expected = serializers.IntegerField(read_only=True, default=None,
                                             help_text="Declared, else the baseline's, else the pool's GPUs per node")

    class Meta:
        model = Node
        fields = ["id", "hostname", "provider", "provider_name", "provider_support_contact", "site", "site_name",
                  "site_support_contact",
                  "pool", "pool_name", "delivery_form", "billing_mode", "expected_gpu_count", "expected_gpu_model",
                  "state", "labels", "public_endpoint", "machine_id", "instance_id", "instance_type", "created_at",
                  "updated_at", "worst_severity", "open_findings", "open_since", "headline_party", "last_report_at",
                  "silent", "gpus_seen", "gpus_expected"]
        read_only_fields = ["created_at", "updated_at"]
        extra_kwargs = {"updated_at": {"help_text": "When this record was last edited (not when it last reported: "
                                                    "see last_report_at)"}}

    @extend_schema_field(serializers.ChoiceField(choices=["critical", "warning", "info"], allow_null=True))
    def get_worst_severity(self, node) -> str | None:
        rank = getattr(node, "severity_rank", None)
        return severity_name(rank)

    @extend_schema_field(serializers.BooleanField(allow_null=True))
    def get_silent(self, node) -> bool | None:
        received = getattr(node, "last_report_at", None)
        if received is None:
            return None
        if getattr(node, "reporting_silent", False):
            return True
        stale_after = max(STALE_AFTER_INTERVALS * (getattr(node, "report_interval_s", None) or 15), MIN_STALE_AFTER_S)
        return received < timezone.now() - timedelta(seconds=stale_after)


class GPUSerializer(serializers.ModelSerializer):
    hostname = serializers.CharField(source="node.hostname", read_only=True)

    class Meta:
        model = GPU
        fields = ["id", "node", "hostname", "index", "uuid", "model", "memory_total_bytes", "serial", "pci_bus_id",
                  "compute_capability", "temperature_slowdown_c", "temperature_shutdown_c",
                  "temperature_max_operating_c", "present", "first_seen", "updated_at"]
        read_only_fields = fields


class SoftwareStackSerializer(serializers.ModelSerializer):
    class Meta:
        model = SoftwareStack
        fields = ["id", "node", "collected_at", "hash", *STACK_FIELDS]
        read_only_fields = fields


class _FrameworkPinSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=40)
    version = serializers.CharField(max_length=40, required=False, allow_blank=True)
    cuda = serializers.CharField(max_length=16, required=False, allow_blank=True)


class BaselineSerializer(serializers.ModelSerializer):
    frameworks = _FrameworkPinSerializer(many=True, required=False)
    cuda_toolkits = serializers.ListField(child=serializers.CharField(max_length=16), required=False)

    class Meta:
        model = Baseline
        fields = ["id", "name", "pool", "node", *BASELINE_STACK_FIELDS, "gpu_model", "gpu_memory_bytes", "gpu_count",
                  "mig_mode", "gsp_firmware_version", "ib_port_count", "ib_rate_gbps", "updated_at"]
        read_only_fields = ["updated_at"]

    def validate(self, attrs):
        pool = attrs.get("pool", getattr(self.instance, "pool", None))
        node = attrs.get("node", getattr(self.instance, "node", None))
        if bool(pool) == bool(node):
            raise serializers.ValidationError({"pool": ["Set exactly one of pool or node."]})
        return attrs


class BoundaryOverrideSerializer(serializers.ModelSerializer):
    class Meta:
        model = BoundaryOverride
        fields = ["id", "provider", "delivery_form", "node", "layer", "owner", "note", "created_at"]
        read_only_fields = ["created_at"]

    def validate(self, attrs):
        provider = attrs.get("provider", getattr(self.instance, "provider", None))
        node = attrs.get("node", getattr(self.instance, "node", None))
        if bool(provider) == bool(node):
            raise serializers.ValidationError({"provider": ["Set exactly one of provider or node."]})
        if node and attrs.get("delivery_form"):
            raise serializers.ValidationError({"delivery_form": ["Only provider overrides take a delivery form."]})
        scope = {"node": node} if node else {"provider": provider, "delivery_form": attrs.get("delivery_form", "")}
        clash = BoundaryOverride.objects.filter(layer=attrs.get("layer", getattr(self.instance, "layer", "")),
                                                **scope)
        if self.instance:
            clash = clash.exclude(pk=self.instance.pk)
        if clash.exists():
            raise serializers.ValidationError({"layer": ["This cell already has an override; edit that one."]})
        return attrs


class BoundaryCellSerializer(serializers.Serializer):
    layer = serializers.ChoiceField(choices=Layer.choices)
    owner = serializers.ChoiceField(choices=Owner.choices)
    source = serializers.CharField()
    note = serializers.CharField(allow_blank=True)


class DriftItemSerializer(serializers.Serializer):
    field = serializers.CharField()
    expected = serializers.JSONField()
    actual = serializers.JSONField()


class NodeDriftSerializer(serializers.Serializer):
    baseline = BaselineSerializer(allow_null=True)
    drifted = serializers.BooleanField()
    drift = DriftItemSerializer(many=True)


class BaselineDriftNodeSerializer(serializers.Serializer):
    node_id = serializers.IntegerField()
    hostname = serializers.CharField()
    drift = DriftItemSerializer(many=True)
