from django.contrib.auth.password_validation import validate_password
from rest_framework import serializers

from fleet.core.models import AuditEntry

from ..choices import Role
from ..models import APIToken, User


class UserSerializer(serializers.ModelSerializer):
    password = serializers.CharField(write_only=True, required=False, allow_blank=False,
                                     style={"input_type": "password"})

    class Meta:
        model = User
        fields = ["id", "username", "email", "role", "is_active", "password", "last_login", "date_joined"]
        read_only_fields = ["last_login", "date_joined"]

    def validate_password(self, value):
        validate_password(value)
        return value

    def create(self, validated_data):
        password = validated_data.pop("password", None)
        user = User(**validated_data)
        user.is_staff = user.role == Role.ADMIN
        if password:
            user.set_password(password)
        else:
            user.set_unusable_password()
        user.save()
        return user

    def update(self, instance, validated_data):
        password = validated_data.pop("password", None)
        for field, value in validated_data.items():
            setattr(instance, field, value)
        instance.is_staff = instance.role == Role.ADMIN or instance.is_superuser
        if password:
            instance.set_password(password)
        instance.save()
        return instance


class MeSerializer(serializers.ModelSerializer):
    class Meta:
        model = User
        fields = ["id", "username", "email", "role", "is_superuser"]
        read_only_fields = fields


class APITokenSerializer(serializers.ModelSerializer):
    user = serializers.SlugRelatedField(slug_field="username", read_only=True)
    is_active = serializers.BooleanField(read_only=True)

    class Meta:
        model = APIToken
        fields = ["id", "name", "user", "prefix", "write_enabled", "expires_at", "revoked_at", "last_used_at",
                  "created_at", "is_active"]
        read_only_fields = ["prefix", "revoked_at", "last_used_at", "created_at"]


class APITokenCreatedSerializer(APITokenSerializer):
    key = serializers.CharField(read_only=True, help_text="Shown once; store it now.")

    class Meta(APITokenSerializer.Meta):
        fields = APITokenSerializer.Meta.fields + ["key"]


class LoginSerializer(serializers.Serializer):
    username = serializers.CharField()
    password = serializers.CharField(style={"input_type": "password"})


class SessionSerializer(serializers.Serializer):
    authenticated = serializers.BooleanField()
    user = MeSerializer(allow_null=True)


class AuditEntrySerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditEntry
        fields = ["id", "at", "actor", "actor_label", "action", "object_type", "object_id", "object_repr",
                  "before", "after", "note"]
