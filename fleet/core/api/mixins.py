from django.db import transaction
from rest_framework import viewsets

from .filters import refuse_unknown_query_params


class StrictQueryParamsMixin:
    """Every GET (and HEAD) of the API refuses query parameters the view does not understand with a 400 naming
    them, as the lists do: a detail route, a custom action or a plain APIView no longer ignores a typo. What a
    view understands is `allowed_query_params` (its filters, search, ordering, pagination, the parameters its
    `extend_schema` declares, `extra_query_params`, and the global `format`). Checked after authentication,
    permissions and throttling, so an anonymous caller still gets its 401/403 first.

    Every API view class must have it first among its bases (tests/core/test_query_params.py walks the URL
    resolver to make sure)."""

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if request.method in ("GET", "HEAD"):
            refuse_unknown_query_params(request, self)


class AuditedModelViewSet(StrictQueryParamsMixin, viewsets.ModelViewSet):
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
