"""What the fleet cost over a stretch of time, per pool and currency, at the prices in force now.

The daily close (`services.cost_day_close`) records one UTC day with this right after the day ends, so the prices
are those of the time; `cost_history` uses it for the days nobody recorded (estimated at today's prices).

A node costs its monthly cost (`node_costs`: plan or price list, plus its cost profile) × the hours it existed in
the stretch ÷ 730. It exists from its creation; a retired or preempted node is taken to have left at its last
update (the inventory keeps no retirement date). Currencies are never added together.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from fleet.inventory.choices import NodeState
from fleet.inventory.models import Node

from ..costing import HOURS_PER_MONTH, ZERO
from .costs import node_costs
from .facts import NODE_RELATED

SECONDS_PER_HOUR = Decimal(3600)
GONE_STATES = (NodeState.RETIRED, NodeState.PREEMPTED)


@dataclass
class PoolCost:
    """The cost of one pool's nodes in one currency over a stretch of time."""

    pool_id: int | None
    pool_name: str
    currency: str
    nodes: int = 0
    gpu_count: int = 0
    total: Decimal = ZERO
    gpu_hours: Decimal = ZERO
    measured_total: Decimal = ZERO
    measured_gpu_hours: Decimal = ZERO
    utilised_gpu_hours: Decimal = ZERO


def node_hours(node: Node, intervals: Iterable[tuple[datetime, datetime]]) -> Decimal:
    """Hours `node` existed inside the intervals (half-open, not overlapping)."""
    left = node.updated_at if node.state in GONE_STATES else None
    seconds = 0.0
    for start, end in intervals:
        since = max(start, node.created_at)
        until = min(end, left) if left is not None else end
        if until > since:
            seconds += (until - since).total_seconds()
    return Decimal(str(seconds)) / SECONDS_PER_HOUR


def nodes_in(start: datetime, end: datetime) -> list[Node]:
    """Nodes that may have existed in [start, end), with what costing needs selected."""
    return list(Node.objects.filter(created_at__lt=end)
                .exclude(state__in=GONE_STATES, updated_at__lte=start)
                .select_related(*NODE_RELATED).order_by("id"))


def pool_costs(*, nodes: Sequence[Node], intervals: Sequence[tuple[datetime, datetime]],
               utilisation_from: datetime, utilisation_to: datetime) -> list[PoolCost]:
    """Per pool and currency: what `nodes` cost in `intervals` at today's prices, with the GPU utilisation measured
    in [utilisation_from, utilisation_to). Nodes without a price are left out."""
    period_days = max(1, round((utilisation_to - utilisation_from).total_seconds() / 86400))
    costs = node_costs(nodes=nodes, now=utilisation_to, period_days=period_days)
    out: dict[tuple[int | None, str], PoolCost] = {}
    for node in nodes:
        row = costs[node.pk]
        hours = node_hours(node, intervals)
        if row.total is None or row.currency is None or hours <= 0:
            continue
        key = (node.pool_id, row.currency)
        acc = out.get(key)
        if acc is None:
            acc = out[key] = PoolCost(node.pool_id, node.pool.name if node.pool_id else "", row.currency)
        total = row.total * hours / HOURS_PER_MONTH
        gpu_hours = row.gpu_count * hours
        acc.nodes += 1
        acc.gpu_count += row.gpu_count
        acc.total += total
        acc.gpu_hours += gpu_hours
        if row.utilisation_pct is not None and row.gpu_count:
            acc.measured_total += total
            acc.measured_gpu_hours += gpu_hours
            acc.utilised_gpu_hours += gpu_hours * row.utilisation_pct / 100
    return sorted(out.values(), key=lambda c: (c.pool_name, c.pool_id or 0, c.currency))
