"""The API's filter backend: django-filter's, with filter values normalised before they reach the database."""

from datetime import UTC, datetime
from decimal import Decimal

from django_filters import utils
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework.exceptions import ValidationError

from .parsers import INT64_MAX, INT64_MIN


class _OutOfRange(Exception):
    pass


def _normalised(value):
    """A cleaned filter value the database can compare: aware datetimes in UTC, numbers within 64 bits."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        # Python accepts UTC offsets up to ±23:59, PostgreSQL only up to ±15:59 (`?since=...+23:45` was a 500);
        # in UTC the offset is gone. At the edges of the calendar the conversion itself overflows.
        try:
            return value.astimezone(UTC)
        except OverflowError:
            raise _OutOfRange("Date and time out of range.") from None
    if isinstance(value, Decimal | int) and not isinstance(value, bool):
        # A number filter on an id column (`?gpu=1e39`) reaches SQLite as an int it cannot bind.
        if not INT64_MIN <= value <= INT64_MAX:
            raise _OutOfRange("Ensure this value fits in 64 bits.")
        return value
    if isinstance(value, slice):
        return slice(_normalised(value.start), _normalised(value.stop), value.step)
    if isinstance(value, list | tuple):
        return type(value)(_normalised(item) for item in value)
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
                cleaned[name] = _normalised(value)
            except _OutOfRange as exc:
                raise ValidationError({name: [str(exc)]}, code="invalid") from None
        return filterset.qs
