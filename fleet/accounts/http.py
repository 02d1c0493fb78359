"""Request-level checks for the login endpoints: CSRF (with Django's Origin check) and the client's address."""

from rest_framework import exceptions
from rest_framework.authentication import CSRFCheck
from rest_framework.throttling import BaseThrottle


def _no_response(request):  # CsrfViewMiddleware wants a get_response; only its checks are used
    return None


def enforce_csrf(request) -> None:
    """Django's CSRF check, as its middleware would run it: the token from the cookie must come back in the
    X-CSRFToken header (or form field), and an Origin header, when sent, must be this site or a
    CSRF_TRUSTED_ORIGINS entry. Raises a 403 in the API's error shape."""
    django_request = getattr(request, "_request", request)
    check = CSRFCheck(_no_response)
    check.process_request(django_request)
    reason = check.process_view(django_request, None, (), {})
    if reason:
        raise exceptions.PermissionDenied(f"CSRF Failed: {reason}")


def client_address(request) -> str:
    """REMOTE_ADDR, or the address NUM_PROXIES trusted proxies put in X-Forwarded-For (DRF's rule)."""
    return BaseThrottle().get_ident(getattr(request, "_request", request)) or "unknown"
