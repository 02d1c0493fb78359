from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from fleet.inventory.models import Pool

from ..choices import CheckStatus, Scope, TriageStep, step_number
from ..models import MAX_DURATION_S, Finding, Rule, RuleOverride, XidPolicy
from ..rules.catalog import RULES_BY_SLUG
from ..texts import catalogue_text, evidence_rendered, finding_action, finding_summary


class _TextField(serializers.CharField):
    """A read-only string rendered per request in its language (Accept-Language; English by default)."""

    def __init__(self, render, **kwargs):
        self._render = render
        super().__init__(source="*", read_only=True, **kwargs)

    def to_representation(self, instance):
        return self._render(instance)


class FindingSerializer(serializers.ModelSerializer):
    rule = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    rule_title = _TextField(lambda finding: catalogue_text(finding.rule.title))
    summary = _TextField(finding_summary, help_text="In the request's language (Accept-Language; default English)")
    recommended_action = _TextField(finding_action,
                                    help_text="In the request's language (Accept-Language; default English)")
    hostname = serializers.CharField(source="node.hostname", read_only=True)
    pool = serializers.IntegerField(source="node.pool_id", read_only=True, allow_null=True)
    gpu_index = serializers.IntegerField(source="gpu.index", read_only=True, allow_null=True, default=None)
    step_number = serializers.SerializerMethodField()
    provider = serializers.IntegerField(source="node.provider_id", read_only=True)
    provider_name = serializers.CharField(source="node.provider.name", read_only=True)
    provider_support_contact = serializers.CharField(
        source="node.provider.support_contact", read_only=True,
        help_text="How to reach the provider's support (from the provider record); blank when not set.")

    class Meta:
        model = Finding
        fields = ["id", "rule", "rule_title", "node", "hostname", "pool", "provider", "provider_name",
                  "provider_support_contact", "gpu", "gpu_index", "subject", "state",
                  "step", "step_number", "layer", "severity", "summary", "responsible_party",
                  "responsibility_source", "action_kind", "recommended_action", "xid_policy_version", "first_seen",
                  "opened_at", "last_seen", "resolved_at", "resolution", "updated_at"]
        read_only_fields = fields

    def get_step_number(self, finding) -> int:
        return step_number(finding.step)


class FindingDetailSerializer(FindingSerializer):
    evidence = serializers.SerializerMethodField()

    class Meta(FindingSerializer.Meta):
        fields = [*FindingSerializer.Meta.fields, "evidence"]
        read_only_fields = fields

    @extend_schema_field(serializers.JSONField())
    def get_evidence(self, finding) -> dict:
        return evidence_rendered(finding.evidence)


class ParamSpecSerializer(serializers.Serializer):
    name = serializers.CharField()
    kind = serializers.ChoiceField(choices=["number", "integer", "boolean", "string_list"])
    default = serializers.JSONField()
    help = serializers.CharField()
    minimum = serializers.FloatField(allow_null=True)
    maximum = serializers.FloatField(allow_null=True)


def _check_params(rule: Rule, value) -> dict:
    definition = RULES_BY_SLUG.get(rule.slug)
    if definition is None:
        raise serializers.ValidationError("This rule is no longer in the catalog.")
    cleaned, errors = definition.clean_params(value)
    if "params" in errors:
        raise serializers.ValidationError(errors["params"])
    if errors:
        # Keys arrive as "params.<name>"; nested under the field they flatten back to that path.
        raise serializers.ValidationError({key.split(".", 1)[-1]: messages for key, messages in errors.items()})
    return cleaned


class RuleSerializer(serializers.ModelSerializer):
    params = serializers.JSONField(required=False, help_text="Only the parameters given change; others keep "
                                                             "their values.")
    param_specs = serializers.SerializerMethodField()
    # Named apart from other apps' "scope" fields so the OpenAPI enum names do not collide.
    applies_to = serializers.ChoiceField(source="scope", choices=Scope.choices, read_only=True,
                                         help_text="node: one finding per node; gpu: one per GPU")
    duration_s = serializers.IntegerField(min_value=0, max_value=MAX_DURATION_S, required=False)
    clear_hold_s = serializers.IntegerField(min_value=0, max_value=MAX_DURATION_S, required=False)

    class Meta:
        model = Rule
        fields = ["id", "slug", "title", "description", "step", "layer", "applies_to", "severity", "duration_s",
                  "clear_hold_s", "params", "param_specs", "enabled", "updated_at"]
        read_only_fields = ["id", "slug", "title", "description", "step", "layer", "updated_at"]

    @extend_schema_field(ParamSpecSerializer(many=True))
    def get_param_specs(self, rule) -> list[dict]:
        definition = RULES_BY_SLUG.get(rule.slug)
        return [{**p.describe(), "help": catalogue_text(p.help)} for p in definition.params] if definition else []

    def to_representation(self, instance):
        data = super().to_representation(instance)
        # The catalogue's texts follow the code; the English is the message id (fleet/locale).
        data["title"], data["description"] = catalogue_text(data["title"]), catalogue_text(data["description"])
        return data

    def validate_params(self, value):
        cleaned = _check_params(self.instance, value)
        return {**(self.instance.params or {}), **cleaned}


class RuleOverrideSerializer(serializers.ModelSerializer):
    rule = serializers.SlugRelatedField(slug_field="slug", queryset=Rule.objects.all())
    pool = serializers.PrimaryKeyRelatedField(queryset=Pool.objects.all())
    params = serializers.JSONField(required=False, help_text="Only the parameters that differ from the fleet-wide "
                                                             "rule.")
    duration_s = serializers.IntegerField(min_value=0, max_value=MAX_DURATION_S, required=False, allow_null=True)
    clear_hold_s = serializers.IntegerField(min_value=0, max_value=MAX_DURATION_S, required=False, allow_null=True)

    class Meta:
        model = RuleOverride
        fields = ["id", "rule", "pool", "params", "enabled", "duration_s", "clear_hold_s", "note", "updated_at"]
        read_only_fields = ["updated_at"]
        validators = []  # the unique (rule, pool) check below names the field

    def validate(self, attrs):
        rule = attrs.get("rule", getattr(self.instance, "rule", None))
        pool = attrs.get("pool", getattr(self.instance, "pool", None))
        if "params" in attrs:
            try:
                cleaned = _check_params(rule, attrs["params"])
            except serializers.ValidationError as exc:
                raise serializers.ValidationError({"params": exc.detail}) from exc
            base = self.instance.params if self.instance is not None and self.partial else {}
            attrs["params"] = {**(base or {}), **cleaned}
        elif self.instance is not None and "rule" in attrs and attrs["rule"] != self.instance.rule:
            attrs["params"] = _check_params(rule, self.instance.params)
        clash = RuleOverride.objects.filter(rule=rule, pool=pool)
        if self.instance is not None:
            clash = clash.exclude(pk=self.instance.pk)
        if clash.exists():
            raise serializers.ValidationError({"pool": ["This pool already has an override for this rule; edit it."]})
        return attrs


class XidPolicySerializer(serializers.ModelSerializer):
    class Meta:
        model = XidPolicy
        fields = ["id", "code", "meaning", "severity", "action", "layer", "escalation", "changed_in_version",
                  "updated_at"]
        read_only_fields = ["changed_in_version", "updated_at"]

    def validate_code(self, value):
        if self.instance is not None and value != self.instance.code:
            raise serializers.ValidationError("The code of a policy cannot change; create a policy for the new code.")
        return value


class XidPolicyVersionSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    policies = serializers.IntegerField()


class PendingConditionSerializer(serializers.Serializer):
    rule = serializers.CharField()
    subject = serializers.CharField()
    summary = serializers.CharField()
    since = serializers.DateTimeField()
    opens_after_s = serializers.IntegerField(help_text="The rule's hold time")
    opens_at = serializers.DateTimeField(help_text="When a finding opens if the condition still holds")
    opens_in_s = serializers.IntegerField(help_text="Seconds until then, at generated_at")


class TriageStepSerializer(serializers.Serializer):
    step = serializers.ChoiceField(choices=TriageStep.choices)
    number = serializers.IntegerField()
    title = serializers.CharField()
    status = serializers.ChoiceField(choices=CheckStatus.choices)
    reason = serializers.CharField()
    findings = FindingDetailSerializer(many=True)
    pending = PendingConditionSerializer(many=True)


class ConsequenceSerializer(serializers.Serializer):
    finding = serializers.IntegerField(help_text="An open finding that another open finding explains")
    rule = serializers.CharField()
    summary = serializers.CharField()
    explained_by = serializers.IntegerField(help_text="The finding that explains it (its rule declares so)")
    explained_by_rule = serializers.CharField()
    root_cause = serializers.IntegerField(help_text="The end of the chain: the finding the headline names")


class TriageSerializer(serializers.Serializer):
    node = serializers.IntegerField()
    hostname = serializers.CharField()
    generated_at = serializers.DateTimeField()
    last_report_at = serializers.DateTimeField(allow_null=True)
    fresh = serializers.BooleanField()
    headline = serializers.CharField()
    headline_finding = FindingSerializer(allow_null=True)
    steps = TriageStepSerializer(many=True)
    consequences = ConsequenceSerializer(many=True)
