from django.db import transaction
from rest_framework import viewsets


class AuditedModelViewSet(viewsets.ModelViewSet):
    """A CRUD viewset whose every write lands in the audit log in the same transaction."""

    # The entry is written by the model's audit hooks (fleet.core.audit, the request's user as actor); these
    # overrides only make the row and its entry commit together. The docstring is the API docs' default text.

    def perform_create(self, serializer):
        with transaction.atomic():
            serializer.save()

    def perform_update(self, serializer):
        with transaction.atomic():
            serializer.save()

    def perform_destroy(self, instance):
        with transaction.atomic():
            instance.delete()
