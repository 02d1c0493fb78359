from django.db import transaction
from rest_framework import viewsets


class AuditedModelViewSet(viewsets.ModelViewSet):
    """A CRUD viewset whose writes are atomic: the row and its audit entry (written by the model's audit hooks,
    `fleet.core.audit`, with the request's user as actor) commit together or not at all."""

    def perform_create(self, serializer):
        with transaction.atomic():
            serializer.save()

    def perform_update(self, serializer):
        with transaction.atomic():
            serializer.save()

    def perform_destroy(self, instance):
        with transaction.atomic():
            instance.delete()
