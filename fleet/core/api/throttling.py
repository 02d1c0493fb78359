"""DRF throttles that fail open when their counter store (the cache: Redis in production) is unavailable."""

from fleet.core import ratelimit


class FailOpenThrottleMixin:
    """Put before a DRF throttle class: an unreachable or hung cache lets the request through (logged, counted
    in `fleet_rate_limit_unavailable_total{scope}`) instead of failing it with a 500. See `fleet.core.ratelimit`."""

    def allow_request(self, request, view):
        if not ratelimit.store_health.available():
            ratelimit.store_health.failed(self.scope, None)
            return True
        try:
            return super().allow_request(request, view)
        except ratelimit.STORE_ERRORS as exc:
            ratelimit.store_health.failed(self.scope, exc)
            return True
