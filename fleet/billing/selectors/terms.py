"""Reserved terms: their state today and the ones about to run out."""

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from django.utils import timezone

from fleet.inventory.choices import BillingMode, NodeState
from fleet.inventory.models import Node

from ..choices import PlanScope, TermStatus
from ..models import BillingPlan

EXPIRING_WITHIN_DAYS = 30


def today_at(now: datetime) -> date:
    return timezone.localtime(now).date()


def term_status(plan: BillingPlan, *, today: date, within_days: int = EXPIRING_WITHIN_DAYS) -> str | None:
    if plan.billing_mode != BillingMode.RESERVED or not plan.term_start or not plan.term_end:
        return None
    if today < plan.term_start:
        return TermStatus.NOT_STARTED
    if today >= plan.term_end:
        return TermStatus.EXPIRED
    if (plan.term_end - today).days <= within_days:
        return TermStatus.EXPIRING
    return TermStatus.ACTIVE


@dataclass
class ExpiringTerm:
    """A reserved term ending soon, and the nodes it prices (health turns each into a finding)."""

    plan_id: int
    scope: str
    pool_id: int | None
    pool_name: str | None
    node_id: int | None
    hostname: str | None
    term_start: date
    term_end: date
    days_left: int
    auto_renew: bool
    currency: str
    expiry_noticed_at: datetime | None
    node_ids: list[int] = field(default_factory=list)


def expiring_reserved_terms(*, now: datetime, within_days: int = EXPIRING_WITHIN_DAYS,
                            include_auto_renew: bool = False) -> list[ExpiringTerm]:
    """Reserved plans whose term ends within `within_days` of today (and has not ended yet), soonest first.

    Terms that renew by themselves are left out unless `include_auto_renew`. `node_ids` lists the nodes the
    plan prices today: the node of a node plan, or the pool's reserved nodes without a plan of their own.
    Two queries.
    """
    today = today_at(now)
    plans = (BillingPlan.objects
             .filter(billing_mode=BillingMode.RESERVED, term_end__gt=today,
                     term_end__lte=today + timedelta(days=within_days))
             .select_related("pool", "node")
             .order_by("term_end", "id"))
    if not include_auto_renew:
        plans = plans.filter(auto_renew=False)
    plans = list(plans)
    pool_ids = [p.pool_id for p in plans if p.pool_id]
    priced: dict[int, list[int]] = {}
    if pool_ids:
        members = (Node.objects.filter(pool_id__in=pool_ids, billing_mode=BillingMode.RESERVED)
                   .exclude(state=NodeState.RETIRED)
                   .exclude(billing_plan__billing_mode=BillingMode.RESERVED)
                   .order_by("pk").values_list("pool_id", "pk"))
        for pool_id, node_id in members:
            priced.setdefault(pool_id, []).append(node_id)
    return [
        ExpiringTerm(
            plan_id=plan.pk, scope=PlanScope.NODE if plan.node_id else PlanScope.POOL,
            pool_id=plan.pool_id, pool_name=plan.pool.name if plan.pool_id else None,
            node_id=plan.node_id, hostname=plan.node.hostname if plan.node_id else None,
            term_start=plan.term_start, term_end=plan.term_end, days_left=(plan.term_end - today).days,
            auto_renew=plan.auto_renew, currency=plan.currency, expiry_noticed_at=plan.expiry_noticed_at,
            node_ids=[plan.node_id] if plan.node_id else priced.get(plan.pool_id, []))
        for plan in plans
    ]
