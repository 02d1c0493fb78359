import re
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.password_validation import validate_password
from django.http import QueryDict
from django.utils import timezone
from rest_framework import serializers

from fleet.core.models import AuditEntry

from ..models import APIToken, SavedView, User
from ..services import api_token_default_expiry, user_create, user_update


class UserSerializer(serializers.ModelSerializer):
    password = serializers.CharField(write_only=True, required=False, allow_blank=False,
                                     style={"input_type": "password"})

    class Meta:
        model = User
        fields = ["id", "username", "email", "role", "is_active", "is_superuser", "password", "last_login",
                  "date_joined"]
        read_only_fields = ["is_superuser", "last_login", "date_joined"]

    def validate_password(self, value):
        validate_password(value, user=self.instance)
        return value

    def create(self, validated_data):
        password = validated_data.pop("password", None)
        return user_create(actor=self.context["request"].user, password=password, **validated_data)

    def update(self, instance, validated_data):
        return user_update(user=instance, actor=self.context["request"].user, **validated_data)


class PasswordResetLinkSerializer(serializers.Serializer):
    path = serializers.CharField(help_text="The console path to hand to the user (shown once; the token is in the "
                                           "fragment, so it never reaches a server log)")
    expires_at = serializers.DateTimeField(help_text="When the link stops working (it also stops once used)")


class PasswordResetConfirmSerializer(serializers.Serializer):
    uid = serializers.CharField(max_length=64)
    token = serializers.CharField(max_length=128)
    # Bounded like the login's, so a megabyte "password" is refused before anything hashes it.
    password = serializers.CharField(max_length=1024, trim_whitespace=False, style={"input_type": "password"})


class MeSerializer(serializers.ModelSerializer):
    class Meta:
        model = User
        fields = ["id", "username", "email", "role", "is_superuser"]
        read_only_fields = fields


class APITokenSerializer(serializers.ModelSerializer):
    user = serializers.SlugRelatedField(slug_field="username", read_only=True)
    is_active = serializers.BooleanField(read_only=True)
    write_enabled = serializers.BooleanField(
        default=False, help_text="Off unless asked for: a token can write only when created with this set.")
    expires_at = serializers.DateTimeField(
        required=False, allow_null=True, help_text="Default: API_TOKEN_DEFAULT_TTL_DAYS (90) days from now; at most "
        "API_TOKEN_MAX_TTL_DAYS (365). Every token expires.")

    class Meta:
        model = APIToken
        fields = ["id", "name", "user", "prefix", "write_enabled", "expires_at", "revoked_at", "last_used_at",
                  "created_at", "is_active"]
        read_only_fields = ["prefix", "revoked_at", "last_used_at", "created_at"]

    def validate_expires_at(self, value):
        # Null only ever comes back for tokens made before every token expired; none is created that way.
        if value is None:
            raise serializers.ValidationError("Every token expires: give a time, or leave it out for the default.")
        now = timezone.now()
        if value <= now:
            raise serializers.ValidationError("Must be in the future.")
        longest = timedelta(days=settings.API_TOKEN_MAX_TTL_DAYS)
        if value - now > longest:
            raise serializers.ValidationError(f"At most {settings.API_TOKEN_MAX_TTL_DAYS} days from now.")
        return value

    def validate(self, attrs):
        attrs.setdefault("expires_at", api_token_default_expiry())
        return attrs


class APITokenCreatedSerializer(APITokenSerializer):
    key = serializers.CharField(read_only=True, help_text="Shown once; store it now.")

    class Meta(APITokenSerializer.Meta):
        fields = APITokenSerializer.Meta.fields + ["key"]


class LoginSerializer(serializers.Serializer):
    # Bounded so a megabyte "password" is refused before anything hashes it.
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=1024, trim_whitespace=False, style={"input_type": "password"})


class SessionSerializer(serializers.Serializer):
    authenticated = serializers.BooleanField()
    user = MeSerializer(allow_null=True)


class AuditEntrySerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditEntry
        fields = ["id", "at", "actor", "actor_label", "action", "object_type", "object_id", "object_repr",
                  "before", "after", "note"]


_QUERY_KEY = re.compile(r"^[a-z_]{1,40}$")
# What a saved view may not carry: paging and the format are not filters.
_NOT_FILTERS = {"page", "page_size", "format"}


class SavedViewSerializer(serializers.ModelSerializer):
    class Meta:
        model = SavedView
        fields = ["id", "page", "name", "query", "created_at", "updated_at"]
        read_only_fields = ["created_at", "updated_at"]
        validators = []  # the unique (user, page, name) check below names the field

    def validate_name(self, value: str) -> str:
        value = value.strip()
        if not value:
            raise serializers.ValidationError("Give the view a name.")
        return value

    def validate_query(self, value: str) -> str:
        value = value.strip().lstrip("?")
        params = QueryDict(value)
        bad = sorted(key for key in params if not _QUERY_KEY.match(key) or key in _NOT_FILTERS)
        if bad:
            raise serializers.ValidationError(f"Not a list filter: {', '.join(repr(k[:40]) for k in bad)}.")
        return params.urlencode()

    def validate(self, attrs):
        user = self.context["request"].user
        page = attrs.get("page", getattr(self.instance, "page", None))
        name = attrs.get("name", getattr(self.instance, "name", None))
        clash = SavedView.objects.filter(user=user, page=page, name=name)
        if self.instance is not None:
            clash = clash.exclude(pk=self.instance.pk)
        if clash.exists():
            raise serializers.ValidationError({"name": [f"You already have a {page} view named {name!r}."]})
        return attrs
