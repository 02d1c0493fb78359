from celery import shared_task


@shared_task(name="billing.check_reserved_terms")
def check_reserved_terms() -> dict:
    """Hourly (CELERY_BEAT_SCHEDULE): renew auto-renewing terms, note those ending within 30 days."""
    from django.utils import timezone

    from .services import check_reserved_terms as service

    return service(now=timezone.now())


@shared_task(name="billing.close_cost_day")
def close_cost_day() -> dict:
    """Hourly (CELERY_BEAT_SCHEDULE): record what yesterday (UTC) cost per pool and currency, at the prices of the
    time; the first run after midnight writes it, the others find it closed."""
    from django.utils import timezone

    from .services import cost_yesterday_close

    return cost_yesterday_close(now=timezone.now())


@shared_task(name="billing.record_preemption_notice")
def record_preemption_notice(event_id: int) -> int | None:
    """Ingestion's after-commit hook for a stored preemption_notice event: record the announced preemption."""
    from fleet.telemetry.models import Event

    from .services import preemption_record_from_notice

    event = Event.objects.select_related("node").filter(pk=event_id).first()
    if event is None:
        return None
    return preemption_record_from_notice(node=event.node, notice_event=event).pk
