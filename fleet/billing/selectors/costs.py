"""Cost per node per month, TCO per GPU-hour and per utilised GPU-hour, and the fleet cost report."""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from django.db.models import ExpressionWrapper, F, FloatField, Max, Sum

from fleet.inventory.models import Node
from fleet.inventory.selectors import node_expected_gpu_counts
from fleet.telemetry.models import GPUSample, GPUSampleRollup

from ..costing import (
    HOURS_PER_MONTH,
    ZERO,
    money,
    per_gpu_hour,
    per_utilised_gpu_hour,
    percent,
    to_decimal,
    unit_price,
)
from .facts import effective_instance_type, effective_site
from .pricing import ResolvedPrice, node_profiles, resolve_prices

# Telemetry rolls raw samples up into 5-minute buckets (GPUSampleRollup); a bucket covers [bucket, bucket + 5 min).
ROLLUP_BUCKET = timedelta(minutes=5)
DEFAULT_PERIOD_DAYS = 30


def node_utilisation(*, node_ids: Iterable[int], start: datetime, end: datetime) -> dict[int, Decimal]:
    """Mean GPU utilisation (%) of each node's GPUs over [start, end), from measurements only.

    Rolled-up buckets are weighted by their sample counts; raw samples fill in after the newest bucket, so
    nothing is counted twice. A node without a single measurement is absent (unknown, not zero).
    """
    node_ids = set(node_ids)
    if not node_ids:
        return {}
    rollups = GPUSampleRollup.objects.filter(gpu__node_id__in=node_ids, bucket__gte=start, bucket__lt=end,
                                             utilization_gpu_pct__isnull=False, samples__gt=0)
    newest = rollups.aggregate(newest=Max("bucket"))["newest"]
    raw_from = max(start, newest + ROLLUP_BUCKET) if newest else start
    totals: dict[int, list[float]] = {}
    weighted = ExpressionWrapper(F("utilization_gpu_pct") * F("samples"), output_field=FloatField())
    for row in rollups.values("gpu__node_id").annotate(total=Sum(weighted), n=Sum("samples")):
        totals[row["gpu__node_id"]] = [row["total"], row["n"]]
    # Raw history rows are buckets too (one per GPU per TELEMETRY_HISTORY_RESOLUTION_S), weighted the same way.
    raw = GPUSample.objects.filter(gpu__node_id__in=node_ids, at__gte=raw_from, at__lt=end,
                                   utilization_gpu_pct__isnull=False, samples__gt=0)
    for row in raw.values("gpu__node_id").annotate(total=Sum(weighted), n=Sum("samples")):
        acc = totals.setdefault(row["gpu__node_id"], [0.0, 0])
        acc[0] += row["total"]
        acc[1] += row["n"]
    return {node_id: percent(to_decimal(round(total / n, 6)))
            for node_id, (total, n) in totals.items() if n}


@dataclass
class NodeCost:
    """One node's monthly cost. Money is rounded to cents per component; the total is their sum."""

    node_id: int
    hostname: str
    provider: str
    site: str | None
    pool: str | None
    instance_type: str
    billing_mode: str
    rate_source: str
    currency: str | None
    gpu_count: int
    compute: Decimal | None
    storage: Decimal | None
    egress: Decimal | None
    backup: Decimal | None
    ops: Decimal | None
    total: Decimal | None
    gpu_hours: Decimal
    tco_per_gpu_hour: Decimal | None
    utilisation_pct: Decimal | None
    tco_per_utilised_gpu_hour: Decimal | None
    warnings: list[str] = field(default_factory=list)
    resolved: ResolvedPrice | None = field(default=None, repr=False)

    @property
    def overhead(self) -> Decimal:
        return sum((v for v in (self.storage, self.egress, self.backup, self.ops) if v is not None), ZERO)


def node_costs(*, nodes: Sequence[Node], now: datetime, period_days: int = DEFAULT_PERIOD_DAYS
               ) -> dict[int, NodeCost]:
    """Monthly cost of each node (give nodes with provider, site, pool and pool__site selected).

    Utilisation for the per-utilised-GPU-hour figure is measured over the `period_days` before `now`.
    """
    nodes = list(nodes)
    prices = resolve_prices(nodes=nodes)
    profiles = node_profiles(nodes=nodes)
    utilisation = node_utilisation(node_ids=[n.pk for n in nodes], start=now - timedelta(days=period_days),
                                   end=now)
    gpu_counts = node_expected_gpu_counts(nodes=nodes)
    result: dict[int, NodeCost] = {}
    for node in nodes:
        resolved, profile = prices[node.pk], profiles[node.pk]
        warnings = list(resolved.warnings)
        compute = money(resolved.price.monthly_compute()) if resolved.price else None
        if resolved.price and compute is None:
            warnings.append("The price has an upfront cost but no term to spread it over.")
        currency = resolved.price.currency if resolved.price else (profile.currency if profile else None)
        overheads = profile.overheads() if profile else None
        if overheads is not None and overheads.currency != currency:
            warnings.append(f"The cost profile is in {overheads.currency}, the price in {currency}; running costs "
                            f"were left out (no exchange rates).")
            overheads = None
        parts = {name: money(getattr(overheads, name)) if overheads else None
                 for name in ("storage", "egress", "backup", "ops")}
        total = None if compute is None else compute + sum((v for v in parts.values() if v is not None), ZERO)
        gpus = gpu_counts[node.pk]
        site = effective_site(node)
        util = utilisation.get(node.pk)
        result[node.pk] = NodeCost(
            node_id=node.pk, hostname=node.hostname, provider=node.provider.name,
            site=site.name if site else None, pool=node.pool.name if node.pool_id else None,
            instance_type=effective_instance_type(node), billing_mode=node.billing_mode,
            rate_source=resolved.source, currency=currency, gpu_count=gpus, compute=compute, total=total,
            gpu_hours=HOURS_PER_MONTH * gpus, tco_per_gpu_hour=unit_price(per_gpu_hour(total, gpus)),
            utilisation_pct=util, tco_per_utilised_gpu_hour=unit_price(per_utilised_gpu_hour(total, gpus, util)),
            warnings=warnings, resolved=resolved, **parts)
    return result


@dataclass
class CostTotal:
    currency: str
    nodes: int = 0
    gpu_count: int = 0
    compute: Decimal = ZERO
    storage: Decimal = ZERO
    egress: Decimal = ZERO
    backup: Decimal = ZERO
    ops: Decimal = ZERO
    total: Decimal = ZERO

    @property
    def gpu_hours(self) -> Decimal:
        return HOURS_PER_MONTH * self.gpu_count

    @property
    def tco_per_gpu_hour(self) -> Decimal | None:
        return unit_price(per_gpu_hour(self.total, self.gpu_count))


@dataclass
class CostReport:
    generated_at: datetime
    period_days: int
    hours_per_month: Decimal
    rows: list[NodeCost]
    totals: list[CostTotal]
    unpriced_nodes: int


def cost_report(*, nodes: Iterable[Node], now: datetime, period_days: int = DEFAULT_PERIOD_DAYS) -> CostReport:
    """Every node's monthly cost plus totals per currency (currencies are never added together)."""
    costs = node_costs(nodes=list(nodes), now=now, period_days=period_days)
    totals: dict[str, CostTotal] = {}
    unpriced = 0
    for row in costs.values():
        if row.total is None or row.currency is None:
            unpriced += 1
            continue
        acc = totals.setdefault(row.currency, CostTotal(row.currency))
        acc.nodes += 1
        acc.gpu_count += row.gpu_count
        acc.compute += row.compute
        for name in ("storage", "egress", "backup", "ops"):
            setattr(acc, name, getattr(acc, name) + (getattr(row, name) or ZERO))
        acc.total += row.total
    return CostReport(generated_at=now, period_days=period_days, hours_per_month=HOURS_PER_MONTH,
                      rows=list(costs.values()), totals=sorted(totals.values(), key=lambda t: t.currency),
                      unpriced_nodes=unpriced)
