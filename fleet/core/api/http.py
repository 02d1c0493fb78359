"""Plain Django pieces that keep everything under /api/ in the API's one error shape, including what happens
before or outside a DRF view: a URL no route matches, a body too large or with too many fields, and query
strings or paths carrying characters no database column can hold."""

from django.http import JsonResponse
from django.views import defaults

from .errors import api_error_response, error_body

API_PREFIX = "/api/"


def _is_api(request) -> bool:
    return request.path_info.startswith(API_PREFIX)


def _json(status: int, code: str, message: str, fields: dict | None = None):
    return JsonResponse(error_body(code, message, fields), status=status)


class APIInputGuardMiddleware:
    """Refuses, with a 400 naming the parameter, a NUL character anywhere in an API path or query string.

    PostgreSQL cannot store or compare text holding NUL, so a search term or a slug lookup carrying one would
    otherwise reach the database and come back as a 500. DRF's CharField already refuses NUL in bodies and
    the API's parsers refuse it in any JSON value or key; this covers the part of a request no serializer
    sees. Cheap on the agent path: reports carry no query string.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if _is_api(request):
            refused = self._refuse(request)
            if refused is not None:
                return refused
        return self.get_response(request)

    @staticmethod
    def _refuse(request):
        if "\x00" in request.path:
            return _json(400, "invalid", "The path may not contain NUL (\\u0000) characters.",
                         {"path": ["Null characters are not allowed."]})
        if not request.META.get("QUERY_STRING"):
            return None
        try:
            params = request.GET
        except Exception as exc:  # TooManyFieldsSent and other SuspiciousOperations: the client's fault
            response = api_error_response(exc)
            if response is None:
                raise
            return response
        for key, values in params.lists():
            if "\x00" in key:
                return _json(400, "invalid", "Query parameter names may not contain NUL (\\u0000) characters.",
                             {"non_field_errors": ["Null characters are not allowed."]})
            if any("\x00" in value for value in values):
                return _json(400, "invalid", f"Invalid input: {key}", {key: ["Null characters are not allowed."]})
        return None


def bad_request(request, exception, template_name=defaults.ERROR_400_TEMPLATE_NAME):
    """handler400: SuspiciousOperation raised outside a DRF view (a body over DATA_UPLOAD_MAX_MEMORY_SIZE read
    by middleware, too many fields, a disallowed host)."""
    if _is_api(request):
        response = api_error_response(exception)
        if response is not None:
            return response
        return _json(400, "bad_request", "The request was refused as malformed.")
    return defaults.bad_request(request, exception, template_name)


def not_found(request, exception, template_name=defaults.ERROR_404_TEMPLATE_NAME):
    """handler404: an /api/ URL that no route matches answers in the error shape, not Django's HTML page."""
    if _is_api(request):
        return _json(404, "not_found", "No such API endpoint or object.")
    return defaults.page_not_found(request, exception, template_name)
