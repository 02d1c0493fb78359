import re

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from fleet.accounts.choices import Role
from fleet.inventory.models import Pool, Provider, Site

from ..choices import ConnectorKind
from ..connectors import CONNECTORS
from ..models import DeliveryAttempt, Integration, OutboxMessage, RoutingRule, Ticket, TicketUpdate
from ..routing import MATCH_CHOICES, MATCH_FIELDS, MATCH_ID_FIELDS
from ..services.integrations import config_validate


def inbound_url(integration: Integration, request=None) -> str:
    path = f"/api/v1/inbound/{integration.inbound_id}/"
    base = settings.FLEET_PUBLIC_URL.rstrip("/")
    if base:
        return base + path
    return request.build_absolute_uri(path) if request is not None else path


class IntegrationSerializer(serializers.ModelSerializer):
    secrets = serializers.DictField(
        child=serializers.CharField(allow_blank=True, allow_null=True, trim_whitespace=False), write_only=True,
        required=False, help_text="Credentials by name (see /integrations/connectors/); stored encrypted, never "
                                  "returned. On update only the names given change; an empty value removes one.")
    config = serializers.JSONField(required=False, default=dict)
    secret_names = serializers.ListField(child=serializers.CharField(), read_only=True,
                                        help_text="Which credentials are set (their values are never returned)")
    inbound_url = serializers.SerializerMethodField()
    sent = serializers.IntegerField(source="counter.sent", read_only=True, default=0)
    failed = serializers.IntegerField(source="counter.failed", read_only=True, default=0)
    dead_lettered = serializers.IntegerField(source="counter.dead_lettered", read_only=True, default=0)
    backlog = serializers.IntegerField(read_only=True, default=0, help_text="Messages not yet delivered")

    class Meta:
        model = Integration
        fields = ["id", "name", "kind", "enabled", "description", "config", "secrets", "secret_names",
                  "max_attempts", "resolve_hold_s", "inbound_url", "inbound_token_prefix", "sent", "failed",
                  "dead_lettered", "backlog", "created_at", "updated_at"]
        read_only_fields = ["secret_names", "inbound_token_prefix", "created_at", "updated_at"]

    @extend_schema_field(OpenApiTypes.STR)
    def get_inbound_url(self, integration) -> str:
        return inbound_url(integration, self.context.get("request"))

    def validate(self, attrs):
        kind = attrs.get("kind") or (self.instance.kind if self.instance else None)
        if self.instance is not None and "kind" in attrs and attrs["kind"] != self.instance.kind:
            raise serializers.ValidationError({"kind": ["The connector kind cannot change; create a new "
                                                        "integration."]})
        if "config" in attrs or self.instance is None:
            attrs["config"] = config_validate(kind=kind, config=attrs.get("config", {}))
        return attrs


class IntegrationCreatedSerializer(IntegrationSerializer):
    inbound_token = serializers.CharField(read_only=True, help_text="Shown once: for systems that call the "
                                                                    "inbound URL with a token instead of a signature")

    class Meta(IntegrationSerializer.Meta):
        fields = [*IntegrationSerializer.Meta.fields, "inbound_token"]


class InboundTokenSerializer(serializers.Serializer):
    inbound_url = serializers.CharField()
    inbound_token = serializers.CharField()


class ConfigFieldSpecSerializer(serializers.Serializer):
    name = serializers.CharField()
    required = serializers.BooleanField()
    type = serializers.CharField(help_text="The serializer field: URLField, CharField, ListField, BooleanField, …")
    default = serializers.JSONField(allow_null=True)
    help = serializers.CharField(allow_blank=True)
    choices = serializers.ListField(child=serializers.CharField())


class ConnectorSpecSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=ConnectorKind.choices)
    label = serializers.CharField()
    keeps_tickets = serializers.BooleanField()
    signs_inbound = serializers.BooleanField()
    secrets = serializers.DictField(child=serializers.BooleanField(), help_text="name → required")
    config = ConfigFieldSpecSerializer(many=True)


def connector_specs() -> list[dict]:
    specs = []
    for kind, label in ConnectorKind.choices:
        connector = CONNECTORS[kind]
        fields = []
        for name, field in connector.config_serializer().fields.items():
            default = field.default if field.default is not serializers.empty else None
            default = default() if callable(default) else default
            fields.append({"name": name, "required": field.required, "type": type(field).__name__,
                           "default": default, "help": str(field.help_text or ""),
                           "choices": list(getattr(field, "choices", {}) or [])})
        specs.append({"kind": kind, "label": label, "keeps_tickets": connector.keeps_tickets,
                      "signs_inbound": bool(connector.inbound_secret), "secrets": connector.secret_fields,
                      "config": fields})
    return specs


class RoutingRuleSerializer(serializers.ModelSerializer):
    match = serializers.JSONField(required=False, default=dict,
                                  help_text=f"Lists; keys: {', '.join(MATCH_FIELDS)}. Empty or absent = any.")
    integration_name = serializers.CharField(source="integration.name", read_only=True)

    class Meta:
        model = RoutingRule
        fields = ["id", "integration", "integration_name", "name", "position", "enabled", "match", "created_at",
                  "updated_at"]
        read_only_fields = ["created_at", "updated_at"]

    def validate_match(self, value):
        if not isinstance(value, dict):
            raise serializers.ValidationError("Must be an object of routing field → list of values.")
        errors, cleaned = {}, {}
        models = {"providers": Provider, "pools": Pool, "sites": Site}
        for key, wanted in value.items():
            if key not in MATCH_FIELDS:
                errors[key] = [f"Unknown routing field; use one of: {', '.join(MATCH_FIELDS)}."]
                continue
            if not isinstance(wanted, list):
                errors[key] = ["Must be a list."]
                continue
            if key in MATCH_ID_FIELDS:
                if not all(isinstance(v, int) and not isinstance(v, bool) for v in wanted):
                    errors[key] = ["Must be a list of ids."]
                    continue
                missing = sorted(set(wanted) - set(models[key].objects.filter(pk__in=wanted)
                                                   .values_list("pk", flat=True)))
                if missing:
                    errors[key] = [f"No such {key[:-1]}: {', '.join(map(str, missing))}."]
                    continue
            elif key in MATCH_CHOICES:
                bad = [v for v in wanted if v not in MATCH_CHOICES[key]]
                if bad:
                    errors[key] = [f"Not valid: {', '.join(map(str, bad))}; use: {', '.join(MATCH_CHOICES[key])}."]
                    continue
            elif not all(isinstance(v, str) and v for v in wanted):
                errors[key] = ["Must be a list of non-empty strings."]
                continue
            cleaned[key] = wanted
        if errors:
            raise serializers.ValidationError(errors)
        return cleaned


class TicketBriefSerializer(serializers.ModelSerializer):
    class Meta:
        model = Ticket
        fields = ["id", "key", "state", "external_id", "external_url"]
        read_only_fields = fields


_ANSWER_DETAIL = re.compile(r"(answered \d{3}): .*", re.DOTALL)
ADMINS_ONLY = "(the answer's text is shown to admins only)"


def _sees_answers(serializer) -> bool:
    """What a remote system answered can hold another service's data: admins only (docs/security.md)."""
    request = serializer.context.get("request")
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_authenticated and user.has_role(Role.ADMIN))


def _without_answer(text: str) -> str:
    return _ANSWER_DETAIL.sub(rf"\1 {ADMINS_ONLY}", text or "")


class DeliveryAttemptSerializer(serializers.ModelSerializer):
    class Meta:
        model = DeliveryAttempt
        fields = ["number", "started_at", "finished_at", "outcome", "status_code", "error", "retry_after_s",
                  "exchanges"]
        read_only_fields = fields

    def to_representation(self, instance):
        data = super().to_representation(instance)
        if not _sees_answers(self):
            data["error"] = _without_answer(data.get("error") or "")
            data["exchanges"] = [{**exchange, "response": ADMINS_ONLY} if "response" in exchange else exchange
                                 for exchange in data.get("exchanges") or []]
        return data


class DeliverySerializer(serializers.ModelSerializer):
    integration_name = serializers.CharField(source="integration.name", read_only=True)
    connector = serializers.CharField(source="integration.kind", read_only=True)
    ticket = TicketBriefSerializer(read_only=True, allow_null=True)
    title = serializers.SerializerMethodField()

    class Meta:
        model = OutboxMessage
        fields = ["id", "integration", "integration_name", "connector", "ticket", "event_kind", "action",
                  "dedup_key", "title", "state", "attempts", "created_at", "next_attempt_at", "delivered_at",
                  "dead_at", "last_status_code", "last_error", "response"]
        read_only_fields = fields

    def to_representation(self, instance):
        data = super().to_representation(instance)
        if not _sees_answers(self):
            data["last_error"] = _without_answer(data.get("last_error") or "")
        return data

    def get_title(self, message) -> str:
        if message.payload:
            return str(message.payload.get("title") or "")
        return str(message.event.get("summary") or message.get_event_kind_display())


class DeliveryDetailSerializer(DeliverySerializer):
    attempt_log = DeliveryAttemptSerializer(many=True, read_only=True)
    held_behind = serializers.SerializerMethodField()

    class Meta(DeliverySerializer.Meta):
        fields = [*DeliverySerializer.Meta.fields, "event", "payload", "progress", "held_behind", "attempt_log"]
        read_only_fields = fields

    def get_held_behind(self, message) -> int | None:
        from ..services.delivery import blocking_message

        blocker = blocking_message(message)
        return blocker.pk if blocker else None


class TicketUpdateSerializer(serializers.ModelSerializer):
    class Meta:
        model = TicketUpdate
        fields = ["id", "at", "source", "state", "comment", "author", "external_event_id"]
        read_only_fields = fields


class TicketSerializer(serializers.ModelSerializer):
    integration_name = serializers.CharField(source="integration.name", read_only=True)
    connector = serializers.CharField(source="integration.kind", read_only=True)
    findings = serializers.PrimaryKeyRelatedField(many=True, read_only=True)

    class Meta:
        model = Ticket
        fields = ["id", "integration", "integration_name", "connector", "key", "subject_kind", "subject_ref",
                  "incident_id", "node", "findings", "state", "external_id", "external_url", "title", "opened_at",
                  "resolve_after", "resolved_at", "last_update_at"]
        read_only_fields = fields


class TicketDetailSerializer(TicketSerializer):
    updates = TicketUpdateSerializer(many=True, read_only=True)

    class Meta(TicketSerializer.Meta):
        fields = [*TicketSerializer.Meta.fields, "updates"]
        read_only_fields = fields


class InboundResultSerializer(serializers.Serializer):
    stored = serializers.IntegerField()
    duplicates = serializers.IntegerField()
    unknown_ticket = serializers.IntegerField()
    ignored = serializers.IntegerField()


class TicketAcknowledgeSerializer(serializers.Serializer):
    note = serializers.CharField(required=False, allow_blank=True, max_length=500, default="")
