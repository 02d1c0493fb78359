"""Health's answers to what telemetry announces (connected in HealthConfig.ready())."""

from fleet.core import failopen


def evaluate_after_urgent_events(*, node_id: int, **kwargs) -> None:
    """Evaluate the node now rather than at the next periodic pass (which still runs if the broker is down)."""
    failopen.enqueue("health.evaluate_nodes", node_ids=[node_id])
