"""The API's filter backends: django-filter's with values normalised before they reach the database and comma
lists read as repeated parameters; unknown query parameters and ordering fields refused; ordering by rank."""

from datetime import UTC, datetime
from decimal import Decimal

from django.db.models import Case, IntegerField, Value, When
from django.forms import MultipleChoiceField
from django_filters import utils
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework.exceptions import ValidationError
from rest_framework.filters import BaseFilterBackend, OrderingFilter, SearchFilter

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


def _comma_lists(query_params, names):
    """The query with each of `names` given as `a,b` read as `a` and `b` repeated (both spellings work)."""
    if not any("," in value for name in names for value in query_params.getlist(name)):
        return query_params
    data = query_params.copy()
    for name in names:
        values = data.getlist(name)
        if any("," in value for value in values):
            data.setlist(name, [part.strip() for value in values for part in value.split(",") if part.strip()])
    return data


def multi_value_filters(filterset_class) -> list[str]:
    """The filters of a filter set that take several values (a repeated parameter, or a comma list)."""
    return [name for name, filter_ in filterset_class.base_filters.items()
            if issubclass(filter_.field_class, MultipleChoiceField)]


class FleetFilterBackend(DjangoFilterBackend):
    def get_filterset_kwargs(self, request, queryset, view):
        kwargs = super().get_filterset_kwargs(request, queryset, view)
        filterset_class = self.get_filterset_class(view, queryset)
        if filterset_class is not None:
            kwargs["data"] = _comma_lists(request.query_params, multi_value_filters(filterset_class))
        return kwargs

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


# --- Unknown query parameters and ordering fields are errors -------------------------------------------------

# Every view understands DRF's format override (`?format=json`, `?format=csv`, `?format=text`).
GLOBAL_QUERY_PARAMS = frozenset({"format"})


def _filter_param_names(filter_name: str, filter_) -> set[str]:
    widget = filter_.field.widget
    suffixes = getattr(widget, "suffixes", None)
    if suffixes:  # range filters: `<name>_min`/`<name>_max`, `<name>_after`/`<name>_before`
        return {f"{filter_name}_{suffix}" if suffix else filter_name for suffix in suffixes}
    return {filter_name}


def _declared_params(request, view) -> set[str]:
    """Query parameters a view declares for the API docs (`extend_schema(parameters=[...])`): names of
    `OpenApiParameter`s in the query, or the fields of a query serializer."""
    from drf_spectacular.utils import OpenApiParameter

    method = request.method.lower()
    handler = getattr(view, getattr(view, "action", None) or method, None) or getattr(view, method, None)
    schema_class = getattr(handler, "kwargs", {}).get("schema")
    try:
        if schema_class is None:
            schema = view.schema
            schema_class = schema if isinstance(schema, type) else type(schema)
        schema = schema_class()
        schema.view = view
        schema.method = request.method.upper()
        declared = schema.get_override_parameters()
    except Exception:  # noqa: BLE001 — a view without spectacular's schema declares nothing
        return set()
    names: set[str] = set()
    for parameter in declared:
        if isinstance(parameter, OpenApiParameter):
            if parameter.location == OpenApiParameter.QUERY:
                names.add(parameter.name)
        else:
            serializer = parameter() if isinstance(parameter, type) else parameter
            names.update(getattr(serializer, "fields", {}).keys())
    return names


def allowed_query_params(request, view) -> set[str]:
    """Every query parameter `view` understands: its filters, search, ordering, pagination, what its docs declare,
    and `extra_query_params` for anything else it reads itself."""
    allowed = set(GLOBAL_QUERY_PARAMS) | set(getattr(view, "extra_query_params", ()))
    queryset = view.get_queryset() if hasattr(view, "get_queryset") else None
    for backend_class in getattr(view, "filter_backends", ()):
        backend = backend_class()
        if isinstance(backend, DjangoFilterBackend) and queryset is not None:
            filterset_class = backend.get_filterset_class(view, queryset)
            if filterset_class is not None:
                for name, filter_ in filterset_class.base_filters.items():
                    allowed |= _filter_param_names(name, filter_)
        elif isinstance(backend, SearchFilter):
            if getattr(view, "search_fields", None):
                allowed.add(backend.search_param)
        elif isinstance(backend, OrderingFilter):
            allowed.add(backend.ordering_param)
    paginator = getattr(view, "paginator", None)
    if paginator is not None:
        for attribute in ("page_query_param", "page_size_query_param", "limit_query_param",
                          "offset_query_param", "cursor_query_param"):
            name = getattr(paginator, attribute, None)
            if name:
                allowed.add(name)
    return allowed | _declared_params(request, view)


class FleetSearchFilter(SearchFilter):
    """DRF's search, documented only where the view has search fields (elsewhere `search` is an unknown
    parameter, not one the docs offer and the view ignores)."""

    def get_schema_operation_parameters(self, view):
        if not getattr(view, "search_fields", None):
            return []
        return super().get_schema_operation_parameters(view)


def refuse_unknown_query_params(request, view) -> None:
    """A 400 naming every query parameter `view` does not understand (once per request)."""
    if getattr(request, "_fleet_params_checked", False):
        return
    allowed = allowed_query_params(request, view)
    unknown = sorted(set(request.query_params) - allowed)
    if unknown:
        accepted = ", ".join(sorted(allowed))
        raise ValidationError(
            {name: [f"Unknown query parameter {name!r}. This endpoint accepts: {accepted}."] for name in unknown},
            code="unknown_parameter")
    request._fleet_params_checked = True


class KnownQueryParamsBackend(BaseFilterBackend):
    """A query parameter the view does not understand is a 400 naming it, never silently ignored: a typo in a
    filter (`?severty=critical`) would otherwise return the whole, unfiltered list. Every GET is checked earlier
    by `StrictQueryParamsMixin` (fleet.core.api.mixins); this backend covers the other methods that filter (a
    PATCH or DELETE through `get_object`)."""

    def filter_queryset(self, request, queryset, view):
        refuse_unknown_query_params(request, view)
        return queryset


def rank(field: str, order) -> Case:
    """An ordering expression that sorts `field` by the position of its value in `order` (e.g. severities,
    critical first) instead of alphabetically; unknown values last."""
    return Case(*(When(**{field: value}, then=Value(index)) for index, value in enumerate(order)),
                default=Value(len(order)), output_field=IntegerField())


class FleetOrderingFilter(OrderingFilter):
    """DRF's ordering with three changes: an unknown field is a 400 naming it; a view's `ordering_ranks`
    ({"severity": [...]}) sorts a field by a fixed order; the allowed fields are listed in the API schema."""

    def get_ordering(self, request, queryset, view):
        params = request.query_params.getlist(self.ordering_param)
        fields = [part.strip() for value in params for part in value.split(",") if part.strip()]
        if fields:
            valid = {item[0] for item in self.get_valid_fields(queryset, view, {"request": request})}
            unknown = [term for term in fields if term.removeprefix("-") not in valid]
            if unknown:
                raise ValidationError({self.ordering_param: [
                    f"Unknown ordering field {term!r}. Order by: {', '.join(sorted(valid))} "
                    f"(prefix - for descending)." for term in unknown]}, code="unknown_ordering")
            return fields
        return self.get_default_ordering(view)

    def filter_queryset(self, request, queryset, view):
        ordering = self.get_ordering(request, queryset, view)
        if not ordering:
            return queryset
        ranks = getattr(view, "ordering_ranks", {})
        aliases = getattr(view, "ordering_aliases", {})
        terms = []
        for term in ordering:
            if not isinstance(term, str):
                terms.append(term)
                continue
            name = term.removeprefix("-")
            if name in aliases:
                terms.append(f"-{aliases[name]}" if term.startswith("-") else aliases[name])
            elif name in ranks:
                expression = rank(name, ranks[name])
                terms.append(expression.desc() if term.startswith("-") else expression.asc())
            else:
                terms.append(term)
        return queryset.order_by(*terms)

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        try:
            queryset = view.get_queryset()
            fields = sorted(item[0] for item in self.get_valid_fields(queryset, view, {"request": view.request}))
        except Exception:  # noqa: BLE001 — schema generation without a usable queryset: leave it a string
            return parameters
        if not fields:
            return parameters
        ranked = ", ".join(sorted({*getattr(view, "ordering_ranks", {}), *getattr(view, "ordering_aliases", {})}))
        parameters[0]["description"] = (
            "Fields to order by, comma-separated; prefix - for descending." +
            (f" {ranked} sorts by rank (most severe first), not alphabetically." if ranked else ""))
        parameters[0]["schema"] = {"type": "array",
                                   "items": {"type": "string", "enum": [*fields, *(f"-{f}" for f in fields)]}}
        parameters[0]["style"] = "form"
        parameters[0]["explode"] = False
        return parameters
