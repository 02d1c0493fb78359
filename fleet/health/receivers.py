"""Health's answers to what telemetry announces (connected in HealthConfig.ready())."""

from fleet.core import failopen

from .services.preemption import findings_close_for_preempted


def evaluate_after_urgent_events(*, node_id: int, **kwargs) -> None:
    """Evaluate the node now rather than at the next periodic pass (which still runs if the broker is down)."""
    failopen.enqueue("health.evaluate_nodes", node_ids=[node_id])


def close_findings_of_preempted_nodes(*, node_ids: list[int], record_ids: list[int], now, **kwargs) -> None:
    findings_close_for_preempted(node_ids=node_ids, record_ids=record_ids, now=now)
