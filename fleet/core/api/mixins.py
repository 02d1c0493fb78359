from django.db import transaction
from rest_framework import viewsets

from fleet.core.models import AuditEntry
from fleet.core.services import audit_record


class AuditedModelViewSet(viewsets.ModelViewSet):
    """A CRUD viewset whose every write lands in the audit log in the same transaction."""

    def perform_create(self, serializer):
        with transaction.atomic():
            instance = serializer.save()
            audit_record(actor=self.request.user, action=AuditEntry.Action.CREATE, instance=instance,
                         after=self.get_serializer(instance).data)

    def perform_update(self, serializer):
        with transaction.atomic():
            before = self.get_serializer(serializer.instance).data
            instance = serializer.save()
            audit_record(actor=self.request.user, action=AuditEntry.Action.UPDATE, instance=instance,
                         before=before, after=self.get_serializer(instance).data)

    def perform_destroy(self, instance):
        with transaction.atomic():
            before = self.get_serializer(instance).data
            audit_record(actor=self.request.user, action=AuditEntry.Action.DELETE, instance=instance,
                         before=before)
            instance.delete()
