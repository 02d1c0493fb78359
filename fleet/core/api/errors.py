"""The API's one error shape: {"error": {"code", "message", "fields"}} for every 4xx."""

from django.core.exceptions import (
    DisallowedHost,
    RequestDataTooBig,
    SuspiciousOperation,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import ProtectedError, RestrictedError
from django.http import Http404, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


class DomainError(exceptions.APIException):
    """A business rule refused the request (e.g. a state transition that is not allowed)."""

    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"
    default_detail = "The request conflicts with the current state."

    def __init__(self, message: str, *, code: str | None = None, status_code: int | None = None,
                 fields: dict | None = None):
        super().__init__(detail=message, code=code or self.default_code)
        if status_code:
            self.status_code = status_code
        self.fields = fields or {}


def _flatten(detail, prefix: str = "") -> dict[str, list[str]]:
    """Turn DRF's nested error detail into {"a.b[0].c": ["message"]}."""
    out: dict[str, list[str]] = {}
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            out.update(_flatten(value, name))
    elif isinstance(detail, list):
        if all(not isinstance(item, dict | list) for item in detail):
            out[prefix or "non_field_errors"] = [str(item) for item in detail]
        else:
            for index, item in enumerate(detail):
                if item:
                    out.update(_flatten(item, f"{prefix}[{index}]"))
    else:
        out[prefix or "non_field_errors"] = [str(detail)]
    return out


def _first_code(detail) -> str:
    if isinstance(detail, dict):
        for value in detail.values():
            return _first_code(value)
    if isinstance(detail, list) and detail:
        return _first_code(detail[0])
    return getattr(detail, "code", None) or "invalid"


def error_body(code: str, message: str, fields: dict | None = None) -> dict:
    return {"error": {"code": code, "message": message, "fields": fields or {}}}


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"
    default_detail = "The request body is too large."


def _translate(exc):
    """Django's own exceptions that a request can provoke, as the API exceptions they stand for."""
    if isinstance(exc, DjangoValidationError):
        return exceptions.ValidationError(detail=exc.message_dict if hasattr(exc, "error_dict") else exc.messages)
    if isinstance(exc, Http404):
        return exceptions.NotFound()
    if isinstance(exc, DjangoPermissionDenied):
        return exceptions.PermissionDenied(detail=str(exc) or None)
    if isinstance(exc, ProtectedError | RestrictedError):
        # Deleting a row that others still point at is a conflict the caller can resolve, not a server error.
        blockers = exc.protected_objects if isinstance(exc, ProtectedError) else exc.restricted_objects
        kinds = sorted({str(obj._meta.verbose_name_plural) for obj in blockers})
        return DomainError(f"Still referenced by {', '.join(kinds)}; delete or move those first.",
                           code="protected")
    if isinstance(exc, RequestDataTooBig):
        return PayloadTooLarge()
    if isinstance(exc, TooManyFieldsSent | TooManyFilesSent):
        return exceptions.ValidationError(detail={"non_field_errors": [str(exc)]}, code="too_many_fields")
    if isinstance(exc, DisallowedHost):
        # Django's text names the setting to change (a hint for whoever probes the server): say only what is wrong.
        return exceptions.ParseError(detail="This server does not answer to that Host header.", code="bad_host")
    if isinstance(exc, SuspiciousOperation):
        return exceptions.ParseError(detail=str(exc) or "The request was refused as malformed.")
    return exc


def api_error_response(exc) -> JsonResponse | None:
    """The API's error shape for an exception raised outside a DRF view (middleware, request parsing);
    None when the exception is not one a client can provoke."""
    exc = _translate(exc)
    if not isinstance(exc, exceptions.APIException):
        return None
    response = exception_handler(exc, {})
    return JsonResponse(response.data, status=response.status_code, headers=_retry_headers(response))


def exception_handler(exc, context):
    exc = _translate(exc)

    response = drf_exception_handler(exc, context)
    if response is None:
        return None

    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten(exc.detail)
        names = ", ".join(sorted(fields))
        body = error_body(_first_code(exc.detail), f"Invalid input: {names}", fields)
    else:
        detail = exc.detail if isinstance(exc, exceptions.APIException) else str(exc)
        code = getattr(detail, "code", None) or getattr(exc, "default_code", "error")
        body = error_body(str(code), str(detail), getattr(exc, "fields", None))
    return Response(body, status=response.status_code, headers=_retry_headers(response))


def _retry_headers(response) -> dict:
    return {k: v for k, v in response.items() if k in ("Retry-After", "WWW-Authenticate", "Allow")}
