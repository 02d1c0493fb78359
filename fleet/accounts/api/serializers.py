from datetime import timedelta

from django.conf import settings
from django.contrib.auth.password_validation import validate_password
from django.utils import timezone
from rest_framework import serializers

from ..models import APIToken, User
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
