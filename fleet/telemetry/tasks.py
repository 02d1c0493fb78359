from celery import shared_task
from django.utils import timezone


@shared_task(name="telemetry.mark_silent_nodes")
def mark_silent_nodes() -> dict:
    from .services.silence import mark_silent_nodes as service

    return {"silent": service(now=timezone.now())["silent"]}


@shared_task(name="telemetry.rollup_history")
def rollup_history() -> dict:
    from .services.history import rollup_history as service

    return service(now=timezone.now())


@shared_task(name="telemetry.prune_history")
def prune_history() -> dict:
    from .services.history import prune_history as service

    return service(now=timezone.now())


@shared_task(name="telemetry.create_history_partitions")
def create_history_partitions() -> dict:
    from .services.history import create_history_partitions as service

    return service(now=timezone.now())
