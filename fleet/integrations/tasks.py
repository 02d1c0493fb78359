"""Celery entry points: thin wrappers around `services.delivery`."""

from celery import shared_task


# The lease (INTEGRATIONS_LEASE_S, 120 s) outlives the hard limit, so a message never has two live senders.
@shared_task(name="integrations.deliver", ignore_result=True, soft_time_limit=80, time_limit=90)
def deliver(message_id: int) -> str:
    """Send one outbox message (skipped when it is not due, is held behind an earlier one, or is being sent)."""
    from .services.delivery import message_deliver

    return message_deliver(message_id=message_id)


@shared_task(name="integrations.deliver_due", ignore_result=True, soft_time_limit=50, time_limit=60)
def deliver_due() -> dict:
    """The periodic sweep (beat, every INTEGRATIONS_SWEEP_INTERVAL_S): retries due, dead workers' messages."""
    from .services.delivery import outbox_deliver_due

    return outbox_deliver_due()
