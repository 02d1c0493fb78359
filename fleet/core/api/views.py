from rest_framework import serializers, viewsets

from fleet.accounts.choices import Role
from fleet.core.models import AuditEntry


class AuditEntrySerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditEntry
        fields = ["id", "at", "actor", "actor_label", "action", "object_type", "object_id", "object_repr",
                  "before", "after", "note"]


class AuditEntryViewSet(viewsets.ReadOnlyModelViewSet):
    """The audit log of writes. Operators and admins may read it."""

    queryset = AuditEntry.objects.all()
    serializer_class = AuditEntrySerializer
    read_role = Role.OPERATOR
    filterset_fields = ["action", "object_type", "object_id", "actor"]
    search_fields = ["object_repr", "actor_label"]
