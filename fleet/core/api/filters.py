"""The API's filter backend: django-filter's, with filter values normalised before they reach the database."""

from datetime import UTC, datetime

from django_filters import utils
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework.exceptions import ValidationError


def _utc(value):
    # Python accepts UTC offsets up to ±23:59, PostgreSQL only up to ±15:59 (`?since=...+23:45` was a 500);
    # in UTC the offset is gone. At the edges of the calendar the conversion itself overflows.
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC)
    if isinstance(value, slice):
        return slice(_utc(value.start), _utc(value.stop), value.step)
    return value


class FleetFilterBackend(DjangoFilterBackend):
    def filter_queryset(self, request, queryset, view):
        filterset = self.get_filterset(request, queryset, view)
        if filterset is None:
            return queryset
        if not filterset.is_valid() and self.raise_exception:
            raise utils.translate_validation(filterset.errors)
        cleaned = filterset.form.cleaned_data
        for name, value in cleaned.items():
            try:
                cleaned[name] = _utc(value)
            except OverflowError:
                raise ValidationError({name: ["Date and time out of range."]}, code="invalid") from None
        return filterset.qs
