"""Process health endpoints for load balancers and orchestrators."""

import logging

from django.db import connection
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

logger = logging.getLogger(__name__)


@never_cache
@require_GET
def healthz(request):
    return JsonResponse({"status": "ok"})


def _check_database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


def _check_broker() -> None:
    from config.celery_app import app

    with app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=2)


@never_cache
@require_GET
def readyz(request):
    checks = {"database": _check_database, "broker": _check_broker}
    failed = {}
    for name, check in checks.items():
        try:
            check()
        except Exception as exc:  # a readiness probe reports any failure, whatever its type
            logger.warning("readiness check %s failed: %s", name, exc.__class__.__name__)
            failed[name] = exc.__class__.__name__
    if failed:
        names = ", ".join(sorted(failed))
        return JsonResponse({"status": "unavailable", "failed": failed,
                             "message": f"not ready: {names} unreachable"}, status=503)
    return JsonResponse({"status": "ok", "checks": sorted(checks)})
