"""Which price and which running costs apply to a node: set-based lookups, one query per kind of row."""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

from django.db.models import Q

from fleet.inventory.choices import BillingMode
from fleet.inventory.models import Node

from ..choices import RateSource
from ..costing import ZERO, Overheads, Price, term_months
from ..models import BillingPlan, CostProfile, PriceListEntry
from .facts import effective_instance_type, effective_site_id


@dataclass(frozen=True)
class ResolvedPrice:
    source: str
    price: Price | None
    plan: BillingPlan | None = None
    entry: PriceListEntry | None = None
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class EffectiveProfile:
    """A provider's cost profile with one site's values laid over it."""

    currency: str
    values: dict[str, Decimal | None] = field(default_factory=dict)

    def value(self, name: str) -> Decimal:
        return self.values.get(name) or ZERO

    def overheads(self) -> Overheads:
        return Overheads(
            currency=self.currency,
            storage=self.value("storage_monthly_per_node"),
            egress=self.value("egress_gb_per_node_month") * self.value("egress_price_per_gb"),
            backup=self.value("backup_monthly_per_node"),
            ops=self.value("ops_hours_per_node_month") * self.value("ops_hourly_rate"),
        )


def price_from_plan(plan: BillingPlan) -> Price:
    months = None
    if plan.billing_mode == BillingMode.RESERVED and plan.term_start and plan.term_end \
            and plan.term_end > plan.term_start:
        months = term_months(plan.term_start, plan.term_end)
    return Price(billing_mode=plan.billing_mode, rate=plan.rate, rate_unit=plan.rate_unit, currency=plan.currency,
                 upfront_cost=plan.upfront_cost or ZERO, term_months=months)


def price_from_entry(entry: PriceListEntry) -> Price:
    return Price(billing_mode=entry.billing_mode, rate=entry.rate, rate_unit=entry.rate_unit, currency=entry.currency,
                 upfront_cost=entry.upfront_cost or ZERO,
                 term_months=Decimal(entry.term_months) if entry.term_months else None)


def price_list_index(*, provider_ids: Iterable[int], instance_types: Iterable[str]
                     ) -> dict[tuple[int, str, str], list[PriceListEntry]]:
    """{(provider, instance type, mode): entries, shortest term first}."""
    index: dict[tuple[int, str, str], list[PriceListEntry]] = {}
    types = {t for t in instance_types if t}
    if not types:
        return index
    entries = PriceListEntry.objects.filter(provider_id__in=set(provider_ids), instance_type__in=types)
    for entry in entries.order_by("term_months", "id"):
        index.setdefault((entry.provider_id, entry.instance_type, entry.billing_mode), []).append(entry)
    return index


def resolve_prices(*, nodes: Sequence[Node]) -> dict[int, ResolvedPrice]:
    """The price of each node: its own plan → its pool's plan (same mode) → the price list (shortest term)."""
    if not nodes:
        return {}
    node_ids = [n.pk for n in nodes]
    pool_ids = {n.pool_id for n in nodes if n.pool_id}
    plans = BillingPlan.objects.filter(Q(node_id__in=node_ids) | Q(pool_id__in=pool_ids))
    node_plans = {p.node_id: p for p in plans if p.node_id}
    pool_plans = {p.pool_id: p for p in plans if p.pool_id}
    catalog = price_list_index(provider_ids={n.provider_id for n in nodes},
                               instance_types={effective_instance_type(n) for n in nodes})
    result: dict[int, ResolvedPrice] = {}
    for node in nodes:
        warnings: list[str] = []
        found: ResolvedPrice | None = None
        for source, plan in ((RateSource.NODE_PLAN, node_plans.get(node.pk)),
                             (RateSource.POOL_PLAN, pool_plans.get(node.pool_id))):
            if plan is None:
                continue
            if plan.billing_mode != node.billing_mode:
                warnings.append(f"The {source.label.lower()} prices {plan.billing_mode} capacity but the node is "
                                f"billed as {node.billing_mode}; it was not used.")
                continue
            found = ResolvedPrice(source, price_from_plan(plan), plan=plan)
            break
        if found is None:
            entries = catalog.get((node.provider_id, effective_instance_type(node), node.billing_mode))
            if entries:
                found = ResolvedPrice(RateSource.PRICE_LIST, price_from_entry(entries[0]), entry=entries[0])
        if found is None:
            warnings.append(f"No billing plan or price-list entry prices this node ({node.billing_mode}).")
            found = ResolvedPrice(RateSource.NONE, None)
        result[node.pk] = ResolvedPrice(found.source, found.price, found.plan, found.entry,
                                        found.warnings + tuple(warnings))
    return result


def effective_profiles(*, scopes: Iterable[tuple[int | None, int | None]]) -> dict[tuple, EffectiveProfile | None]:
    """{(provider_id, site_id): profile}. Blank site values fall back to the provider's, when in one currency."""
    scopes = set(scopes)
    provider_ids = {p for p, _ in scopes if p}
    site_ids = {s for _, s in scopes if s}
    rows = CostProfile.objects.filter(Q(provider_id__in=provider_ids) | Q(site_id__in=site_ids))
    by_provider = {r.provider_id: r for r in rows if r.provider_id}
    by_site = {r.site_id: r for r in rows if r.site_id}
    result: dict[tuple, EffectiveProfile | None] = {}
    for provider_id, site_id in scopes:
        base, local = by_provider.get(provider_id), by_site.get(site_id)
        if local is None and base is None:
            result[(provider_id, site_id)] = None
            continue
        layers = [p for p in (base, local) if p is not None]
        if local is not None and base is not None and local.currency != base.currency:
            layers = [local]  # no exchange rates here: a site priced in another currency stands alone
        values: dict[str, Decimal | None] = {}
        for profile in layers:
            for name in CostProfile.COST_FIELDS:
                value = getattr(profile, name)
                if value is not None:
                    values[name] = value
        result[(provider_id, site_id)] = EffectiveProfile(layers[-1].currency, values)
    return result


def node_profiles(*, nodes: Sequence[Node]) -> dict[int, EffectiveProfile | None]:
    scopes = {n.pk: (n.provider_id, effective_site_id(n)) for n in nodes}
    profiles = effective_profiles(scopes=scopes.values())
    return {node_id: profiles[scope] for node_id, scope in scopes.items()}
