"""Read-side queries for billing. Other apps import from here:
`from fleet.billing.selectors import checkpoint_policy_for_nodes`."""

from .compliance import ComplianceItem, compliance_filter, compliance_flags_for_nodes
from .costs import CostReport, NodeCost, cost_report, node_costs, node_utilisation
from .node_billing import NodeBilling, NodeBillingRow, node_billing, node_billing_rows
from .policies import checkpoint_max_age, checkpoint_policies_by_pool, checkpoint_policy_for_nodes
from .preemptions import (
    GaugeFamily,
    PoolPreemptionDays,
    PreemptionRate,
    node_preemptions,
    pool_preemptions_daily,
    preemption_rates,
    preemption_rates_for_metrics,
)
from .pricing import ResolvedPrice, resolve_prices
from .terms import ExpiringTerm, expiring_reserved_terms, term_status
from .what_if import PoolWhatIf, pool_what_if

__all__ = [
    "ComplianceItem",
    "CostReport",
    "ExpiringTerm",
    "GaugeFamily",
    "NodeBilling",
    "NodeBillingRow",
    "NodeCost",
    "PoolPreemptionDays",
    "PoolWhatIf",
    "PreemptionRate",
    "ResolvedPrice",
    "checkpoint_max_age",
    "checkpoint_policies_by_pool",
    "checkpoint_policy_for_nodes",
    "pool_preemptions_daily",
    "compliance_filter",
    "compliance_flags_for_nodes",
    "cost_report",
    "expiring_reserved_terms",
    "node_billing",
    "node_billing_rows",
    "node_costs",
    "node_preemptions",
    "node_utilisation",
    "pool_what_if",
    "preemption_rates",
    "preemption_rates_for_metrics",
    "resolve_prices",
    "term_status",
]
