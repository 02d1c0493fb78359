"""What a pool would cost a month as on-demand, reserved, spot or bare metal, next to what it costs now."""

from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from fleet.inventory.choices import BillingMode, NodeState
from fleet.inventory.models import Node, Pool
from fleet.inventory.selectors import node_expected_gpu_counts

from ..choices import RateScope, RateUnit, WhatIfScenario
from ..costing import (
    HOURS_PER_MONTH,
    ZERO,
    Overheads,
    Price,
    expected_preemption_loss,
    money,
    per_gpu_hour,
    unit_price,
)
from ..models import BillingPlan, CheckpointPolicy, PriceListEntry
from .costs import node_costs
from .facts import NODE_RELATED, effective_instance_type
from .preemptions import preemption_rates
from .pricing import effective_profiles, price_from_entry, price_from_plan, price_list_index

SECONDS_PER_HOUR = Decimal(3600)


@dataclass
class Scenario:
    scenario: str
    label: str
    available: bool
    source: str = ""
    currency: str | None = None
    term_months: Decimal | None = None
    compute_per_node: Decimal | None = None
    overhead_per_node: Decimal | None = None
    preemption_loss_per_node: Decimal | None = None
    total_per_node: Decimal | None = None
    total_monthly: Decimal | None = None
    tco_per_gpu_hour: Decimal | None = None
    difference_vs_current: Decimal | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class PoolWhatIf:
    pool_id: int
    pool_name: str
    generated_at: datetime
    node_count: int
    gpus_per_node: int
    instance_type: str
    preemptions_per_node_day: Decimal | None
    preemption_rate_basis: str
    lost_gpu_hours_per_preemption: Decimal | None
    lost_work_basis: str
    scenarios: list[Scenario]


@dataclass(frozen=True)
class _Risk:
    rate: Decimal | None
    rate_basis: str
    lost: Decimal | None
    lost_basis: str


def _spot_risk(*, pool: Pool, nodes: list[Node], instance_type: str, gpus: int, now: datetime,
               given_rate: Decimal | None) -> _Risk:
    pool_stats = preemption_rates(now=now, scope=RateScope.POOL, key=str(pool.pk))
    window = pool_stats[0].last_30d if pool_stats else None
    is_spot = pool.billing_mode == BillingMode.SPOT or any(n.billing_mode == BillingMode.SPOT for n in nodes)
    if given_rate is not None:
        rate, rate_basis = given_rate, "given with the request"
    elif is_spot and window is not None and window.rate_per_node_day is not None:
        rate, rate_basis = window.rate_per_node_day, "measured on this pool over 30 days"
    else:
        by_type = preemption_rates(now=now, scope=RateScope.INSTANCE_TYPE, billing_mode=BillingMode.SPOT,
                                   key=instance_type) if instance_type else []
        type_rate = by_type[0].last_30d.rate_per_node_day if by_type else None
        if type_rate is not None:
            rate, rate_basis = type_rate, f"measured on spot {instance_type} nodes over 30 days"
        else:
            rate, rate_basis = None, "no spot history for this pool or instance type"
    if window is not None and window.mean_lost_gpu_hours is not None:
        return _Risk(rate, rate_basis, window.mean_lost_gpu_hours,
                     f"mean of {window.preemptions_with_lost_work} preemptions of this pool over 30 days")
    policy = CheckpointPolicy.objects.filter(pool=pool).first()
    if policy is not None and gpus:
        # With checkpoints written every `max age`, a preemption lands on average half-way between two.
        lost = Decimal(policy.max_checkpoint_age_s) / 2 / SECONDS_PER_HOUR * gpus
        return _Risk(rate, rate_basis, lost, "half the checkpoint policy's maximum age × GPUs per node")
    return _Risk(rate, rate_basis, None, "no measured lost work and no checkpoint policy")


def _scenario(kind: str, label: str, *, price: Price | None, source: str, overheads: Overheads | None,
              node_count: int, gpus: int, risk: _Risk | None = None, unavailable: str = "") -> Scenario:
    if price is None:
        return Scenario(kind, label, available=False, notes=[unavailable])
    notes: list[str] = []
    compute_exact = price.monthly_compute()
    if compute_exact is None:
        return Scenario(kind, label, available=False, source=source, currency=price.currency,
                        notes=["The price has an upfront cost but no term to spread it over."])
    compute = money(compute_exact)
    overhead = None
    if overheads is not None and overheads.currency == price.currency:
        overhead = money(overheads.total)
    elif overheads is not None:
        notes.append(f"Running costs are in {overheads.currency}, the price in {price.currency}; left out.")
    loss = None
    if risk is not None:
        if risk.rate == 0:
            loss = money(ZERO)
        elif risk.rate is None or risk.lost is None or not gpus:
            notes.append("Expected preemption losses are unknown (" + (
                risk.rate_basis if risk.rate is None else risk.lost_basis) + "); the total leaves them out.")
        else:
            cost_per_gpu_hour = compute_exact / (HOURS_PER_MONTH * gpus)
            loss = money(expected_preemption_loss(preemptions_per_node_day=risk.rate,
                                                  lost_gpu_hours_per_preemption=risk.lost,
                                                  cost_per_gpu_hour=cost_per_gpu_hour))
    per_node = compute + (overhead or ZERO) + (loss or ZERO)
    return Scenario(kind, label, available=True, source=source, currency=price.currency,
                    term_months=price.term_months, compute_per_node=compute, overhead_per_node=overhead,
                    preemption_loss_per_node=loss, total_per_node=per_node, total_monthly=per_node * node_count,
                    tco_per_gpu_hour=unit_price(per_gpu_hour(per_node, gpus)), notes=notes)


def _current(nodes: list[Node], *, now: datetime, gpus: int) -> Scenario:
    label = WhatIfScenario.CURRENT.label
    if not nodes:
        return Scenario(WhatIfScenario.CURRENT, label, available=False, notes=["The pool has no nodes."])
    costs = list(node_costs(nodes=nodes, now=now).values())
    currencies = {c.currency for c in costs}
    if any(c.total is None for c in costs) or len(currencies) != 1:
        note = ("Some nodes have no price." if any(c.total is None for c in costs)
                else "The nodes are priced in several currencies.")
        return Scenario(WhatIfScenario.CURRENT, label, available=False, notes=[note])
    count = Decimal(len(costs))
    total = sum((c.total for c in costs), ZERO)
    per_node = money(total / count)
    return Scenario(WhatIfScenario.CURRENT, label, available=True, source="billing plans and price list",
                    currency=currencies.pop(), compute_per_node=money(sum((c.compute for c in costs), ZERO) / count),
                    overhead_per_node=money(sum((c.overhead for c in costs), ZERO) / count),
                    total_per_node=per_node, total_monthly=total,
                    tco_per_gpu_hour=unit_price(per_gpu_hour(per_node, gpus)))


def pool_what_if(*, pool: Pool, now: datetime, spot_preemption_rate: Decimal | None = None,
                 bare_metal_entry: PriceListEntry | None = None) -> PoolWhatIf:
    """The pool's monthly cost today and in each other form, from its plan, the price list and cost profiles.

    Spot includes the expected cost of redoing lost work: preemptions per node-day (measured, or given)
    × days in a month × GPU-hours lost per preemption × the spot price of a GPU-hour. Bare metal comes from
    `bare_metal_entry` (a price-list entry) or else the cost profile's bare-metal price per GPU.
    """
    nodes = list(Node.objects.filter(pool=pool).exclude(state=NodeState.RETIRED).select_related(*NODE_RELATED))
    gpus = pool.gpus_per_node or max(node_expected_gpu_counts(nodes=nodes).values(), default=0)
    instance_type = pool.instance_type or next((effective_instance_type(n) for n in nodes if n.instance_type), "")
    profile_scopes = [(pool.provider_id, pool.site_id)]
    if bare_metal_entry is not None:
        profile_scopes.append((bare_metal_entry.provider_id, None))
    profiles = effective_profiles(scopes=profile_scopes)
    profile = profiles[(pool.provider_id, pool.site_id)]
    overheads = profile.overheads() if profile else None
    plan = BillingPlan.objects.filter(pool=pool).first()
    catalog = price_list_index(provider_ids=[pool.provider_id], instance_types=[instance_type]) \
        if pool.provider_id else {}

    def offers(mode: str) -> list[tuple[Price, str]]:
        found = [(price_from_plan(plan), "pool billing plan")] if plan and plan.billing_mode == mode else []
        for entry in catalog.get((pool.provider_id, instance_type, mode), []):
            found.append((price_from_entry(entry), f"price list entry {entry.pk}"))
        return found

    count = len(nodes)
    risk = _spot_risk(pool=pool, nodes=nodes, instance_type=instance_type, gpus=gpus, now=now,
                      given_rate=spot_preemption_rate)
    missing = f"No billing plan or price-list entry for {instance_type or 'this pool'} in this mode."
    scenarios = [_current(nodes, now=now, gpus=gpus)]
    on_demand = offers(BillingMode.ON_DEMAND)[:1] or [(None, "")]
    for price, source in on_demand:
        scenarios.append(_scenario(WhatIfScenario.ON_DEMAND, WhatIfScenario.ON_DEMAND.label, price=price,
                                   source=source, overheads=overheads, node_count=count, gpus=gpus,
                                   unavailable=missing))
    for price, source in offers(BillingMode.RESERVED) or [(None, "")]:
        scenarios.append(_scenario(WhatIfScenario.RESERVED, WhatIfScenario.RESERVED.label, price=price,
                                   source=source, overheads=overheads, node_count=count, gpus=gpus,
                                   unavailable=missing))
    for price, source in offers(BillingMode.SPOT)[:1] or [(None, "")]:
        scenarios.append(_scenario(WhatIfScenario.SPOT, WhatIfScenario.SPOT.label, price=price, source=source,
                                   overheads=overheads, node_count=count, gpus=gpus, risk=risk, unavailable=missing))
    scenarios.append(_bare_metal(bare_metal_entry, profiles, profile, overheads, count, gpus))
    current = scenarios[0]
    for scenario in scenarios[1:]:
        if current.available and scenario.available and scenario.currency == current.currency:
            scenario.difference_vs_current = scenario.total_monthly - current.total_monthly
    return PoolWhatIf(pool_id=pool.pk, pool_name=pool.name, generated_at=now, node_count=count, gpus_per_node=gpus,
                      instance_type=instance_type, preemptions_per_node_day=risk.rate,
                      preemption_rate_basis=risk.rate_basis, lost_gpu_hours_per_preemption=risk.lost,
                      lost_work_basis=risk.lost_basis, scenarios=scenarios)


def _bare_metal(entry: PriceListEntry | None, profiles: dict, profile, overheads: Overheads | None, count: int,
                gpus: int) -> Scenario:
    label = WhatIfScenario.BARE_METAL.label
    if entry is not None:
        own = profiles.get((entry.provider_id, None))
        return _scenario(WhatIfScenario.BARE_METAL, label, price=price_from_entry(entry),
                         source=f"price list entry {entry.pk}", overheads=own.overheads() if own else None,
                         node_count=count, gpus=gpus)
    per_gpu = profile.values.get("bare_metal_monthly_per_gpu") if profile else None
    if per_gpu is None or not gpus:
        return _scenario(WhatIfScenario.BARE_METAL, label, price=None, source="", overheads=None, node_count=count,
                         gpus=gpus, unavailable="Give a bare-metal price-list entry or set the cost profile's "
                                                "bare-metal price per GPU.")
    price = Price(billing_mode=BillingMode.ON_DEMAND, rate=per_gpu * gpus, rate_unit=RateUnit.MONTH,
                  currency=profile.currency)
    return _scenario(WhatIfScenario.BARE_METAL, label, price=price, source="cost profile (bare-metal price per GPU)",
                     overheads=overheads, node_count=count, gpus=gpus)
