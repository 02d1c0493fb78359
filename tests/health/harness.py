"""Drive one rule through its life: healthy → fault → (pending) → open → fault clears → (held) → resolved."""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from fleet.health.models import Finding, Rule
from fleet.health.services.evaluation import evaluate
from fleet.telemetry.models import GPUStatus, NodeStatus

from .factories import T0


def set_status(node, **fields) -> None:
    assert NodeStatus.objects.filter(node=node).update(**fields) == 1


def set_gpu(gpu, **fields) -> None:
    assert GPUStatus.objects.filter(gpu=gpu).update(**fields) == 1


def open_findings(slug: str, node=None):
    qs = Finding.objects.filter(rule__slug=slug, state="open")
    return qs.filter(node=node) if node is not None else qs


@dataclass
class Lifecycle:
    opened: Finding
    resolved: Finding
    opened_at: datetime
    resolved_at: datetime


def lifecycle(slug: str, node, *, fault: Callable[[datetime], None], clear: Callable[[datetime], None],
              start: datetime = T0 + timedelta(minutes=1)) -> Lifecycle:
    """Run the whole life of one finding and check the hysteresis at each edge; returns the finding as opened
    and as resolved."""
    rule = Rule.objects.get(slug=slug)
    evaluate(now=start - timedelta(seconds=30))
    assert not open_findings(slug, node).exists(), "the healthy node must not have this finding"

    fault(start)
    evaluate(now=start)
    if rule.duration_s > 0:
        assert not open_findings(slug, node).exists(), "must stay pending until the duration has passed"
        evaluate(now=start + timedelta(seconds=rule.duration_s - 1))
        assert not open_findings(slug, node).exists(), "must stay pending one second before the duration"
    opened_at = start + timedelta(seconds=rule.duration_s)
    evaluate(now=opened_at)
    opened = open_findings(slug, node).get()

    cleared_at = opened_at + timedelta(seconds=30)
    clear(cleared_at)
    evaluate(now=cleared_at)
    if rule.clear_hold_s > 0:
        assert open_findings(slug, node).exists(), "must stay open during the clear-hold period"
        evaluate(now=cleared_at + timedelta(seconds=rule.clear_hold_s - 1))
        assert open_findings(slug, node).exists(), "must stay open one second before the clear-hold ends"
    resolved_at = cleared_at + timedelta(seconds=rule.clear_hold_s)
    evaluate(now=resolved_at)
    assert not open_findings(slug, node).exists(), "must resolve after the clear-hold period"
    resolved = Finding.objects.get(pk=opened.pk)
    assert resolved.state == "resolved"
    assert resolved.resolved_at == resolved_at
    return Lifecycle(opened=opened, resolved=resolved, opened_at=opened_at, resolved_at=resolved_at)
