from celery import shared_task


@shared_task(name="core.ping")
def ping() -> str:
    """Round trip through the broker, a worker and the result backend (used by readiness checks and tests)."""
    return "pong"
