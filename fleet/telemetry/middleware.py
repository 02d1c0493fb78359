"""The fast lane's place in the request path: the first middleware.

Nearly every request a fleet makes is one steady-state report from a node whose credential is cached. The fast
lane (`fleet.telemetry.api.views._steady_report`, services/admission.py) answers those in one Redis round trip;
placed first, it also skips the rest of the middleware chain (sessions, locale, CSRF, authentication, messages,
the audit context) and URL resolution, none of which a queued report uses: about a fifth of its web CPU. Every
request it does not answer with a 200 continues down the chain to `ReportsView` unchanged, which answers it as
before (errors, events, inventory, Redis trouble).
"""

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.urls import get_script_prefix, reverse


class AgentReportFastLaneMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response
        self._paths: dict[str, str] = {}  # script prefix -> the reports path under it

    def __call__(self, request):
        if request.method == "POST" and request.path == self._reports_path() and self._as_the_chain_would(request):
            from .api import views  # looked up per call: the module's function, as tests observe it

            response = views._steady_report(request)
            if response is not None:
                # What the skipped SecurityMiddleware adds that matters to a JSON answer.
                if settings.SECURE_CONTENT_TYPE_NOSNIFF:
                    response.headers["X-Content-Type-Options"] = "nosniff"
                if settings.SECURE_HSTS_SECONDS and request.is_secure():
                    response.headers["Strict-Transport-Security"] = f"max-age={settings.SECURE_HSTS_SECONDS}"
                return response
        return self.get_response(request)

    @staticmethod
    def _as_the_chain_would(request) -> bool:
        """What the skipped middleware would refuse or redirect stays theirs: a Host outside ALLOWED_HOSTS (400),
        and plain HTTP where HTTPS is required (SecurityMiddleware's redirect)."""
        try:
            request.get_host()
        except DisallowedHost:
            return False
        return request.is_secure() or not settings.SECURE_SSL_REDIRECT

    def _reports_path(self) -> str:
        prefix = get_script_prefix()
        path = self._paths.get(prefix)
        if path is None:
            path = self._paths[prefix] = reverse("agent-reports")
        return path
