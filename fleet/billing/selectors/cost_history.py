"""Cost per calendar month and per utilised GPU-hour over the last months, for the fleet cost chart.

Each month is costed like the cost report (`node_costs`): the nodes that existed by the month's end (retired
ones left out — the inventory keeps no retirement date), today's prices (no price history is kept, so a price
change shows in every month), and the GPU utilisation measured in that month (the current month: so far).
Currencies are never added together: one row per month and currency.
"""

from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from decimal import Decimal

from fleet.inventory.models import Node

from ..costing import HOURS_PER_MONTH, ZERO, add_months, money, unit_price
from .costs import node_costs
from .facts import NODE_RELATED


@dataclass
class MonthCost:
    month: str
    currency: str
    nodes: int
    gpu_count: int
    total: Decimal
    utilisation_pct: Decimal | None
    per_utilised_gpu_hour: Decimal | None


def _month_start(day: date) -> datetime:
    return datetime.combine(day.replace(day=1), time.min, tzinfo=UTC)


def cost_history(*, months: int, now: datetime) -> list[MonthCost]:
    first = add_months(now.astimezone(UTC).date().replace(day=1), -(months - 1))
    out: list[MonthCost] = []
    for offset in range(months):
        start = _month_start(add_months(first, offset))
        end = _month_start(add_months(first, offset + 1))
        until = min(end, now)
        nodes = list(Node.objects.filter(created_at__lt=until).exclude(state="retired")
                     .select_related(*NODE_RELATED).order_by("id"))
        days = max(1, round((until - start).total_seconds() / 86400))
        costs = node_costs(nodes=nodes, now=until, period_days=days)
        acc: dict[str, dict] = {}
        for row in costs.values():
            if row.total is None or row.currency is None:
                continue
            cur = acc.setdefault(row.currency, {"nodes": 0, "gpus": 0, "total": ZERO, "measured_total": ZERO,
                                                "utilised_hours": ZERO, "gpu_hours": ZERO})
            cur["nodes"] += 1
            cur["gpus"] += row.gpu_count
            cur["total"] += row.total
            if row.utilisation_pct is not None and row.gpu_count:
                hours = HOURS_PER_MONTH * row.gpu_count
                cur["measured_total"] += row.total
                cur["gpu_hours"] += hours
                cur["utilised_hours"] += hours * row.utilisation_pct / 100
        for currency, cur in sorted(acc.items()):
            utilised = cur["utilised_hours"]
            out.append(MonthCost(
                month=start.strftime("%Y-%m"), currency=currency, nodes=cur["nodes"], gpu_count=cur["gpus"],
                total=money(cur["total"]),
                utilisation_pct=(round(utilised * 100 / cur["gpu_hours"], 2) if cur["gpu_hours"] else None),
                per_utilised_gpu_hour=unit_price(cur["measured_total"] / utilised) if utilised > 0 else None))
    return out
