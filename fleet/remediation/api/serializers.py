from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from fleet.health.choices import Severity, XidAction
from fleet.health.models import Finding, Rule
from fleet.health.texts import finding_summary
from fleet.inventory.choices import BillingMode, DeliveryForm, Layer, Owner
from fleet.inventory.models import GPU, Node

from ..choices import OPEN_STATES, OverrideKind, StepKind, StepStatus
from ..executors import registered
from ..models import (
    CircuitBreaker,
    EvidenceBundle,
    FindingIntake,
    Incident,
    NodeRemediationSettings,
    Override,
    PoolRemediationSettings,
    RemediationPolicy,
    StepRun,
    TimelineEntry,
    Workflow,
)
from ..selectors import plan_with_status, queue_position
from ..services.approvals import approval_excluded
from ..services.engine import current_run, pool_settings
from ..services.windows import windows_clean
from ..services.workflows import workflow_steps_clean


class IncidentSerializer(serializers.ModelSerializer):
    hostname = serializers.CharField(source="node.hostname", read_only=True, allow_null=True, default=None)
    pool_name = serializers.CharField(source="pool.name", read_only=True, allow_null=True, default=None)
    provider_name = serializers.CharField(source="provider.name", read_only=True, allow_null=True, default=None)
    workflow = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    workflow_name = serializers.CharField(source="workflow.name", read_only=True)
    step_count = serializers.SerializerMethodField()
    current_step_kind = serializers.SerializerMethodField()
    replacement_hostname = serializers.CharField(source="replacement_node.hostname", read_only=True,
                                                 allow_null=True, default=None)

    class Meta:
        model = Incident
        fields = ["id", "key", "node", "hostname", "pool", "pool_name", "site", "provider", "provider_name",
                  "cause_kind", "cause", "title", "state", "waiting_on", "state_reason", "delivery_form", "layer",
                  "responsible_party", "workflow", "workflow_name", "current_step", "step_count",
                  "current_step_kind", "dry_run", "opened_at", "started_at", "closed_at", "opened_by", "resolution",
                  "replacement_node", "replacement_hostname"]
        read_only_fields = fields

    def get_step_count(self, incident) -> int:
        return len(incident.plan)

    def get_current_step_kind(self, incident) -> str | None:
        if incident.current_step < len(incident.plan):
            return incident.plan[incident.current_step]["kind"]
        return None


class PlanStepSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    kind = serializers.CharField()
    title = serializers.CharField()
    params = serializers.JSONField()
    timeout_s = serializers.IntegerField(allow_null=True)
    on_failure = serializers.JSONField()
    requires_approval = serializers.BooleanField()
    status = serializers.CharField(help_text="Latest attempt's status; blank = not reached")
    attempt = serializers.IntegerField()
    executor = serializers.CharField()
    waiting_on = serializers.CharField()
    message = serializers.CharField()
    current = serializers.BooleanField()


class StepRunSerializer(serializers.ModelSerializer):
    class Meta:
        model = StepRun
        fields = ["id", "step_index", "attempt", "kind", "title", "params", "executor", "idempotency_key", "status",
                  "waiting_on", "message", "output", "requires_approval", "approved_by", "approved_at", "not_before",
                  "executor_calls", "started_at", "deadline_at", "next_poll_at", "finished_at", "finished_by"]
        read_only_fields = fields


class LinkedFindingSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="finding.id")
    rule = serializers.CharField(source="finding.rule.slug")
    summary = serializers.SerializerMethodField(help_text="In the request's language (Accept-Language)")
    state = serializers.CharField(source="finding.state")
    severity = serializers.CharField(source="finding.severity")
    node = serializers.IntegerField(source="finding.node_id")
    trigger = serializers.BooleanField()
    attached_at = serializers.DateTimeField()


    def get_summary(self, link) -> str:
        return finding_summary(link.finding)


class BoundaryRowSerializer(serializers.Serializer):
    delivery_form = serializers.CharField()
    layer = serializers.CharField()
    responsible_party = serializers.CharField()
    responsibility_source = serializers.CharField()


class PolicyRefSerializer(serializers.Serializer):
    id = serializers.IntegerField(allow_null=True)
    name = serializers.CharField()
    priority = serializers.IntegerField(allow_null=True)
    version = serializers.IntegerField(allow_null=True)
    snapshot = serializers.JSONField()


class EvidenceRefSerializer(serializers.ModelSerializer):
    class Meta:
        model = EvidenceBundle
        fields = ["id", "collected_at", "source", "step_index"]


class ExcludedApproverSerializer(serializers.Serializer):
    username = serializers.CharField()
    reason = serializers.CharField()


class ApprovalRuleSerializer(serializers.Serializer):
    step_index = serializers.IntegerField()
    two_person = serializers.BooleanField()
    excluded = ExcludedApproverSerializer(many=True)


class IncidentDetailSerializer(IncidentSerializer):
    plan = serializers.SerializerMethodField()
    steps = StepRunSerializer(source="step_runs", many=True, read_only=True)
    findings = LinkedFindingSerializer(source="finding_links", many=True, read_only=True)
    boundary = serializers.SerializerMethodField()
    policy = serializers.SerializerMethodField()
    evidence = EvidenceRefSerializer(many=True, read_only=True)
    queue_position = serializers.SerializerMethodField()
    breaker = serializers.PrimaryKeyRelatedField(read_only=True)
    approval_rule = serializers.SerializerMethodField(
        help_text="For a current step waiting for approval under the two-person rule: who may not approve it")

    class Meta(IncidentSerializer.Meta):
        fields = [*IncidentSerializer.Meta.fields, "plan", "steps", "findings", "boundary", "policy", "evidence",
                  "queue_position", "breaker", "approval_rule"]
        read_only_fields = fields

    @extend_schema_field(ApprovalRuleSerializer(allow_null=True))
    def get_approval_rule(self, incident) -> dict | None:
        run = current_run(incident)
        if run is None or run.status != StepStatus.AWAITING_APPROVAL:
            return None
        excluded = approval_excluded(incident, run, pool_settings(incident.pool_id))
        if not excluded:
            return None
        return {"step_index": run.step_index, "two_person": True,
                "excluded": [{"username": name, "reason": why} for name, why in excluded.items()]}

    @extend_schema_field(PlanStepSerializer(many=True))
    def get_plan(self, incident) -> list[dict]:
        return plan_with_status(incident)

    @extend_schema_field(BoundaryRowSerializer)
    def get_boundary(self, incident) -> dict:
        return {"delivery_form": incident.delivery_form, "layer": incident.layer,
                "responsible_party": incident.responsible_party,
                "responsibility_source": incident.responsibility_source}

    @extend_schema_field(PolicyRefSerializer(allow_null=True))
    def get_policy(self, incident) -> dict | None:
        if not incident.policy_snapshot:
            return None
        snap = incident.policy_snapshot
        return {"id": incident.policy_id, "name": snap.get("name", ""), "priority": snap.get("priority"),
                "version": incident.policy_version, "snapshot": snap}

    def get_queue_position(self, incident) -> int | None:
        return queue_position(incident)


class TimelineEntrySerializer(serializers.ModelSerializer):
    class Meta:
        model = TimelineEntry
        fields = ["id", "at", "kind", "actor_label", "step_index", "attempt", "step_kind", "message", "output"]
        read_only_fields = fields


class IncidentCreateSerializer(serializers.Serializer):
    node = serializers.PrimaryKeyRelatedField(queryset=Node.objects.all())
    workflow = serializers.SlugRelatedField(slug_field="slug", queryset=Workflow.objects.all())
    note = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")


class StepActionSerializer(serializers.Serializer):
    step_index = serializers.IntegerField(min_value=0, required=False, allow_null=True, default=None,
                                          help_text="The step this action is meant for; must be the current one")
    note = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")


class CompleteStepSerializer(StepActionSerializer):
    output = serializers.DictField(required=False, default=dict,
                                   help_text="Anything worth keeping with the step, e.g. {\"ticket\": \"CS-123\"}")


class EscalateSerializer(serializers.Serializer):
    workflow = serializers.SlugRelatedField(slug_field="slug", queryset=Workflow.objects.all())
    note = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")


class NoteSerializer(serializers.Serializer):
    note = serializers.CharField(max_length=1000)


class WorkflowSerializer(serializers.ModelSerializer):
    steps = serializers.JSONField(help_text='[{"kind", "title", "params", "timeout_s", "requires_approval", '
                                            '"on_failure": {"action": "retry|escalate|wait|continue", …}}]')
    open_incidents = serializers.SerializerMethodField()

    class Meta:
        model = Workflow
        fields = ["id", "slug", "name", "description", "steps", "urgent", "enabled", "built_in", "version",
                  "open_incidents", "updated_at"]
        read_only_fields = ["id", "built_in", "version", "open_incidents", "updated_at"]

    def get_open_incidents(self, workflow) -> int:
        return workflow.incidents.filter(state__in=sorted(OPEN_STATES)).count()

    def validate_slug(self, value):
        if self.instance is not None and value != self.instance.slug:
            raise serializers.ValidationError("A workflow's slug cannot change.")
        return value

    def validate(self, attrs):
        if "steps" in attrs:
            own = self.instance.slug if self.instance is not None else attrs.get("slug")
            cleaned, errors = workflow_steps_clean(attrs["steps"], own_slug=own)
            if errors:
                raise serializers.ValidationError(errors)  # keyed "steps[i].field"
            attrs["steps"] = cleaned
        return attrs


class RemediationPolicySerializer(serializers.ModelSerializer):
    workflow = serializers.SlugRelatedField(slug_field="slug", queryset=Workflow.objects.all(), allow_null=True,
                                            help_text="null: a matching finding opens no incident")
    rules = serializers.ListField(child=serializers.CharField(), required=False)
    xid_codes = serializers.ListField(child=serializers.IntegerField(min_value=1, max_value=1000), required=False)
    xid_actions = serializers.ListField(child=serializers.ChoiceField(choices=XidAction.choices), required=False)
    severities = serializers.ListField(child=serializers.ChoiceField(choices=Severity.choices), required=False)
    layers = serializers.ListField(child=serializers.ChoiceField(choices=Layer.choices), required=False)
    parties = serializers.ListField(child=serializers.ChoiceField(choices=Owner.choices), required=False)
    delivery_forms = serializers.ListField(child=serializers.ChoiceField(choices=DeliveryForm.choices),
                                           required=False)
    billing_modes = serializers.ListField(child=serializers.ChoiceField(choices=BillingMode.choices),
                                          required=False)

    class Meta:
        model = RemediationPolicy
        fields = ["id", "name", "priority", "enabled", "rules", "xid_codes", "xid_actions", "severities", "layers",
                  "parties", "delivery_forms", "billing_modes", "provider", "pool", "min_recent_remediations",
                  "workflow", "note", "changed_in_version", "updated_at"]
        read_only_fields = ["id", "changed_in_version", "updated_at"]

    def validate_rules(self, value):
        known = set(Rule.objects.values_list("slug", flat=True))
        unknown = [v for v in value if v not in known]
        if unknown:
            raise serializers.ValidationError(f"Unknown rule: {', '.join(unknown)}.")
        return list(dict.fromkeys(value))


class PolicyVersionSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    policies = serializers.IntegerField()


class PoolRemediationSettingsSerializer(serializers.ModelSerializer):
    pool_name = serializers.CharField(source="pool.name", read_only=True)
    max_concurrent_replacements = serializers.IntegerField(
        source="pool.max_concurrent_replacements", min_value=0, max_value=1000, required=False,
        help_text="Nodes of this pool that may be remediated at once; more incidents wait in the queue")
    executors = serializers.ListField(child=serializers.CharField(max_length=32), required=False, max_length=10)
    maintenance_windows = serializers.JSONField(required=False)
    two_person_kinds = serializers.ListField(
        child=serializers.ChoiceField(choices=StepKind.choices), required=False, max_length=len(StepKind.choices),
        help_text="Step kinds that need a second person besides terminate, retire and RMA")

    class Meta:
        model = PoolRemediationSettings
        fields = ["pool", "pool_name", "max_concurrent_replacements", "executors", "dry_run", "maintenance_windows",
                  "verify_quiet_period_s", "two_person_approval", "two_person_kinds", "updated_at"]
        read_only_fields = ["pool", "pool_name", "updated_at"]

    def validate_executors(self, value):
        known = registered()
        unknown = [name for name in value if name not in known]
        if unknown:
            raise serializers.ValidationError(f"Unknown executor: {', '.join(unknown)}; installed: "
                                              f"{', '.join(sorted(known))}.")
        return list(dict.fromkeys(value))

    def validate(self, attrs):
        if "maintenance_windows" in attrs:
            cleaned, errors = windows_clean(attrs["maintenance_windows"])
            if errors:  # keyed "maintenance_windows[i].field"
                raise serializers.ValidationError({f"maintenance_windows{key}": msgs for key, msgs in errors.items()})
            attrs["maintenance_windows"] = cleaned
        return attrs

    def update(self, instance, validated_data):
        pool_data = validated_data.pop("pool", {})
        if "max_concurrent_replacements" in pool_data:
            instance.pool.max_concurrent_replacements = pool_data["max_concurrent_replacements"]
            instance.pool.save(update_fields=["max_concurrent_replacements"])
        return super().update(instance, validated_data)


class NodeRemediationSettingsSerializer(PoolRemediationSettingsSerializer):
    class Meta:
        model = NodeRemediationSettings
        fields = ["node", "executors", "note", "updated_at"]
        read_only_fields = ["updated_at"]


class CircuitBreakerSerializer(serializers.ModelSerializer):
    name = serializers.SerializerMethodField()
    incident_key = serializers.CharField(source="incident.key", read_only=True, allow_null=True, default=None)

    class Meta:
        model = CircuitBreaker
        fields = ["id", "scope", "pool", "site", "name", "threshold_pct", "window_s", "min_nodes", "state",
                  "tripped_at", "tripped_reason", "unhealthy_nodes", "total_nodes", "incident", "incident_key",
                  "reset_at", "reset_by", "reset_note", "updated_at"]
        read_only_fields = ["id", "scope", "pool", "site", "name", "state", "tripped_at", "tripped_reason",
                            "unhealthy_nodes", "total_nodes", "incident", "incident_key", "reset_at", "reset_by",
                            "reset_note", "updated_at"]

    def get_name(self, breaker) -> str:
        return str(breaker.pool or breaker.site)


class BreakerResetSerializer(serializers.Serializer):
    note = serializers.CharField(max_length=300)


class OverrideSerializer(serializers.ModelSerializer):
    finding = serializers.PrimaryKeyRelatedField(queryset=Finding.objects.all(), required=False, allow_null=True)
    gpu = serializers.PrimaryKeyRelatedField(queryset=GPU.objects.all(), required=False, allow_null=True)
    kind = serializers.ChoiceField(choices=OverrideKind.choices)
    active = serializers.SerializerMethodField()

    class Meta:
        model = Override
        fields = ["id", "kind", "finding", "gpu", "until", "reason", "created_by_label", "created_at", "revoked_at",
                  "active"]
        read_only_fields = ["id", "created_by_label", "created_at", "revoked_at", "active"]

    def get_active(self, override) -> bool:
        from django.utils import timezone

        return override.revoked_at is None and (override.until is None or override.until > timezone.now())


class FindingIntakeSerializer(serializers.ModelSerializer):
    incident_key = serializers.CharField(source="incident.key", read_only=True, allow_null=True, default=None)

    class Meta:
        model = FindingIntake
        fields = ["finding", "decided_at", "outcome", "incident", "incident_key", "policy", "policy_version",
                  "retry_at", "message"]
        read_only_fields = fields


class ExecutorSerializer(serializers.Serializer):
    name = serializers.CharField()
    kinds = serializers.ListField(child=serializers.CharField())


class PoolOverviewSerializer(serializers.Serializer):
    pool = serializers.IntegerField()
    name = serializers.CharField()
    max_concurrent_replacements = serializers.IntegerField()
    active_nodes = serializers.IntegerField()
    queued = serializers.IntegerField()
    dry_run = serializers.BooleanField()
    breaker_id = serializers.IntegerField(allow_null=True)
    breaker_state = serializers.CharField()
    breaker_incident = serializers.CharField(allow_null=True)


MAX_BULK = 200


class BulkOverrideSerializer(serializers.Serializer):
    """One override (acknowledge, snooze, mark healthy) on many findings at once."""

    findings = serializers.PrimaryKeyRelatedField(queryset=Finding.objects.all(), many=True, allow_empty=False)
    kind = serializers.ChoiceField(choices=OverrideKind.choices)
    reason = serializers.CharField(max_length=500)
    until = serializers.DateTimeField(required=False, allow_null=True, default=None)

    def validate_findings(self, value):
        if len(value) > MAX_BULK:
            raise serializers.ValidationError(f"At most {MAX_BULK} findings at once.")
        return list({finding.pk: finding for finding in value}.values())


class BulkIncidentSerializer(serializers.Serializer):
    """One operator workflow (cordon, drain, …) opened on many nodes at once."""

    nodes = serializers.PrimaryKeyRelatedField(queryset=Node.objects.all(), many=True, allow_empty=False)
    workflow = serializers.SlugRelatedField(slug_field="slug", queryset=Workflow.objects.all())
    note = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")

    def validate_nodes(self, value):
        if len(value) > MAX_BULK:
            raise serializers.ValidationError(f"At most {MAX_BULK} nodes at once.")
        return list({node.pk: node for node in value}.values())


class BulkIncidentRefusalSerializer(serializers.Serializer):
    node = serializers.IntegerField()
    hostname = serializers.CharField()
    code = serializers.CharField()
    message = serializers.CharField()


class BulkIncidentResultSerializer(serializers.Serializer):
    opened = IncidentSerializer(many=True)
    refused = BulkIncidentRefusalSerializer(many=True, help_text="Nodes where no incident opened, and why "
                                                                 "(e.g. incident_exists, node_retired)")
