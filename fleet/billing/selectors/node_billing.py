"""A node's billing as the console shows it: price, monthly cost, preemptions and compliance flags."""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.db.models import Count

from fleet.inventory.models import Node

from ..models import BillingPlan, PreemptionRecord, PriceListEntry
from .compliance import ComplianceItem, compliance_flags_for_nodes
from .costs import DEFAULT_PERIOD_DAYS, NodeCost, node_costs
from .policies import checkpoint_policy_for_nodes
from .preemptions import node_preemptions
from .terms import term_status, today_at


@dataclass
class NodeBillingInfo:
    billing_mode: str
    rate_source: str
    plan: BillingPlan | None
    price_list_entry: PriceListEntry | None
    checkpoint_max_age_s: int | None


@dataclass
class NodeBilling:
    node_id: int
    hostname: str
    billing: NodeBillingInfo
    cost: NodeCost
    preemptions: list[PreemptionRecord]
    compliance_flags: list[ComplianceItem]


@dataclass
class NodeBillingRow:
    node_id: int
    hostname: str
    cost: NodeCost
    preemptions_30d: int
    term_end: date | None
    term_status: str | None
    compliance_flags: list[ComplianceItem]


def node_billing(*, node: Node, now: datetime, period_days: int = DEFAULT_PERIOD_DAYS) -> NodeBilling:
    cost = node_costs(nodes=[node], now=now, period_days=period_days)[node.pk]
    resolved = cost.resolved
    info = NodeBillingInfo(billing_mode=node.billing_mode, rate_source=cost.rate_source,
                           plan=resolved.plan if resolved else None,
                           price_list_entry=resolved.entry if resolved else None,
                           checkpoint_max_age_s=checkpoint_policy_for_nodes([node.pk]).get(node.pk))
    return NodeBilling(node_id=node.pk, hostname=node.hostname, billing=info, cost=cost,
                       preemptions=list(node_preemptions(node=node)),
                       compliance_flags=compliance_flags_for_nodes([node.pk]).get(node.pk, []))


def node_billing_rows(*, nodes: Sequence[Node], now: datetime) -> list[NodeBillingRow]:
    """One summary row per node, in the order given, with a fixed number of queries."""
    nodes = list(nodes)
    ids = [n.pk for n in nodes]
    costs = node_costs(nodes=nodes, now=now)
    flags = compliance_flags_for_nodes(ids)
    counts = dict(PreemptionRecord.objects.filter(node_id__in=ids, at__gte=now - timedelta(days=30), at__lte=now)
                  .values("node_id").annotate(n=Count("id")).values_list("node_id", "n"))
    today = today_at(now)
    rows = []
    for node in nodes:
        cost = costs[node.pk]
        plan = cost.resolved.plan if cost.resolved else None
        rows.append(NodeBillingRow(
            node_id=node.pk, hostname=node.hostname, cost=cost, preemptions_30d=counts.get(node.pk, 0),
            term_end=plan.term_end if plan else None,
            term_status=term_status(plan, today=today) if plan else None,
            compliance_flags=flags.get(node.pk, [])))
    return rows
