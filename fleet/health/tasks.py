"""Celery entry points: thin wrappers around `services.evaluation.evaluate`."""

from celery import shared_task
from django.db import OperationalError

from .exceptions import EvaluationConflict
from .signals import findings_opened


def _announce(result: dict) -> dict:
    if result.get("opened_ids"):
        findings_opened.send(sender=evaluate_fleet, finding_ids=result["opened_ids"])
    return result


@shared_task(name="health.evaluate_fleet", ignore_result=False, soft_time_limit=60, time_limit=90)
def evaluate_fleet() -> dict:
    """The periodic cycle over the whole fleet (beat, every HEALTH_EVAL_INTERVAL_S). Skips while another runs."""
    from .services.evaluation import evaluate

    return _announce(evaluate().as_dict())


@shared_task(name="health.evaluate_nodes", ignore_result=False, soft_time_limit=60, time_limit=90,
             autoretry_for=(OperationalError, EvaluationConflict), retry_backoff=1, retry_backoff_max=10, max_retries=3)
def evaluate_nodes(node_ids: list[int]) -> dict:
    """Immediate evaluation of a few nodes after urgent events (Xid, SXid, GPU lost, preemption notice)."""
    from .services.evaluation import evaluate

    return _announce(evaluate(node_ids=list(node_ids)).as_dict())
