"""Celery entry points: thin wrappers around the remediation services."""

from celery import shared_task
from django.db import OperationalError


@shared_task(name="remediation.run_step", ignore_result=False, autoretry_for=(OperationalError,), retry_backoff=1,
             retry_backoff_max=30, max_retries=5)
def run_step(incident_id: int, step_index: int, attempt: int) -> str:
    """One step attempt, keyed by (incident, step index, attempt); safe to deliver any number of times."""
    from .services.engine import step_execute

    return step_execute(incident_id=incident_id, step_index=step_index, attempt=attempt)


@shared_task(name="remediation.intake", ignore_result=False, autoretry_for=(OperationalError,), retry_backoff=1,
             retry_backoff_max=10, max_retries=5)
def intake(finding_ids: list[int]) -> dict:
    """Decide what to do with newly opened findings (the health engine's cycle triggers it)."""
    from .services.intake import findings_intake

    return findings_intake(finding_ids=[int(f) for f in finding_ids])


@shared_task(name="remediation.sweep", ignore_result=False, soft_time_limit=60, time_limit=90)
def sweep() -> dict:
    """Beat, every REMEDIATION_SWEEP_INTERVAL_S: undecided findings, SLA timeouts, due and abandoned steps,
    admission."""
    from .services.sweep import remediation_sweep

    return remediation_sweep()
