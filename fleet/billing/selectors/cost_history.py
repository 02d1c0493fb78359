"""What each calendar month cost, and the cost per utilised GPU-hour, over the last months, for the fleet cost chart.

A month's cost is the sum of its days' costs (the current month: so far, today up to now). A day recorded by the
daily close (`DailyCostSnapshot`, `services.cost_day_close`) counts at the prices of the time; a day nobody recorded
is costed now, at today's prices, like the close would (`selectors/daily_cost.py`: each node's monthly cost × the
hours it existed ÷ 730, the month's measured utilisation). A month with such a day before today that cost anything,
or with a day the backfill command recorded at the prices of when it ran, is `estimated`. Today itself is at
today's prices, which are its own. Currencies are never added together: one row per month and currency.
"""

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal

from django.db.models import Sum

from ..costing import ZERO, add_months, money, unit_price
from ..models import CostDay, DailyCostSnapshot
from .daily_cost import nodes_in, pool_costs


@dataclass
class MonthCost:
    month: str
    currency: str
    nodes: int
    gpu_count: int
    total: Decimal
    utilisation_pct: Decimal | None
    per_utilised_gpu_hour: Decimal | None
    estimated: bool


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


def _open_intervals(start: date, end: date, closed: set[date], now: datetime) -> list[tuple[datetime, datetime]]:
    """The stretches of [start, end) (days) not closed, merged, the last one cut at `now`."""
    intervals: list[tuple[datetime, datetime]] = []
    day = start
    while day < end:
        if day not in closed:
            begin, finish = _midnight(day), min(_midnight(day + timedelta(days=1)), now)
            if finish <= begin:
                break
            if intervals and intervals[-1][1] == begin:
                intervals[-1] = (intervals[-1][0], finish)
            else:
                intervals.append((begin, finish))
        day += timedelta(days=1)
    return intervals


def cost_history(*, months: int, now: datetime) -> list[MonthCost]:
    today = now.astimezone(UTC).date()
    first = add_months(today.replace(day=1), -(months - 1))
    closed_days = dict(CostDay.objects.filter(day__gte=first, day__lt=today).values_list("day", "estimated"))
    out: list[MonthCost] = []
    for offset in range(months):
        month_first, next_first = add_months(first, offset), add_months(first, offset + 1)
        last = min(next_first, today + timedelta(days=1))
        closed = {day for day in closed_days if month_first <= day < next_first}
        acc: dict[str, dict] = defaultdict(lambda: {"nodes": 0, "gpus": 0, "total": ZERO, "measured_total": ZERO,
                                                    "measured_gpu_hours": ZERO, "utilised_gpu_hours": ZERO})
        recorded = (DailyCostSnapshot.objects.filter(cost_day__day__gte=month_first, cost_day__day__lt=next_first)
                    .values("currency").annotate(total=Sum("total"), measured_total=Sum("measured_total"),
                                                 measured_gpu_hours=Sum("measured_gpu_hours"),
                                                 utilised_gpu_hours=Sum("utilised_gpu_hours")).order_by())
        for row in recorded:
            cur = acc[row["currency"]]
            for name in ("total", "measured_total", "measured_gpu_hours", "utilised_gpu_hours"):
                cur[name] += row[name] or ZERO
        # Nodes and GPUs: the largest day of the month (a count, not a sum over days).
        peaks = (DailyCostSnapshot.objects.filter(cost_day__day__gte=month_first, cost_day__day__lt=next_first)
                 .values("cost_day", "currency").annotate(nodes=Sum("nodes"), gpus=Sum("gpu_count")).order_by())
        for row in peaks:
            cur = acc[row["currency"]]
            cur["nodes"], cur["gpus"] = max(cur["nodes"], row["nodes"]), max(cur["gpus"], row["gpus"])
        # Days nobody recorded: costed now. Those before today are estimates when they cost anything; today's
        # prices are today's own.
        today_start = _midnight(today)
        intervals = _open_intervals(month_first, last, closed, now)
        past = [(begin, min(end, today_start)) for begin, end in intervals if begin < today_start]
        current = [(max(begin, today_start), end) for begin, end in intervals if end > today_start]
        estimated = any(closed_days[day] for day in closed)
        for stretch in (past, current):
            if not stretch:
                continue
            costs = pool_costs(nodes=nodes_in(stretch[0][0], stretch[-1][1]), intervals=stretch,
                               utilisation_from=_midnight(month_first), utilisation_to=intervals[-1][1])
            for cost in costs:
                cur = acc[cost.currency]
                for name in ("total", "measured_total", "measured_gpu_hours", "utilised_gpu_hours"):
                    cur[name] += getattr(cost, name)
                cur["nodes"] = max(cur["nodes"], cost.nodes)
                cur["gpus"] = max(cur["gpus"], cost.gpu_count)
            estimated = estimated or (stretch is past and bool(costs))
        for currency, cur in sorted(acc.items()):
            utilised = cur["utilised_gpu_hours"]
            out.append(MonthCost(
                month=month_first.strftime("%Y-%m"), currency=currency, nodes=cur["nodes"], gpu_count=cur["gpus"],
                total=money(cur["total"]),
                utilisation_pct=(round(utilised * 100 / cur["measured_gpu_hours"], 2)
                                 if cur["measured_gpu_hours"] else None),
                per_utilised_gpu_hour=unit_price(cur["measured_total"] / utilised) if utilised > 0 else None,
                estimated=estimated))
    return out
