"""Who is responsible for each open finding and what to do: `fleet.health.routing.route` over the nodes'
effective responsibility boundaries, loaded in bulk for the nodes that have a finding to route.
"""

from __future__ import annotations

from fleet.inventory.choices import ProviderKind
from fleet.inventory.models import Node, Provider
from fleet.inventory.selectors import boundary_matrices

from ..models import Finding
from ..routing import route
from ..rules.base import RuleDefinition
from ..rules.facts import NodeFacts


def findings_route(*, findings: list[tuple[Finding, RuleDefinition]], facts: dict[int, NodeFacts]) -> None:
    """Set each finding's party, action and `evidence["routing"]`; recomputed every cycle, so a boundary override
    changes open findings at the next cycle. Two queries (boundaries, provider names) whatever the count."""
    if not findings:
        return
    node_ids = {finding.node_id for finding, _ in findings}
    nodes = [Node(pk=n, provider_id=facts[n].provider_id, delivery_form=facts[n].delivery_form) for n in node_ids]
    rows = list(Provider.objects.filter(pk__in={n.provider_id for n in nodes}).values_list("pk", "name", "kind"))
    providers = {pk: name for pk, name, _ in rows}
    matrices = boundary_matrices(nodes=nodes, own_datacenters={pk for pk, _, kind in rows if kind == ProviderKind.OWN})
    for finding, definition in findings:
        node = facts[finding.node_id]
        routing = route(layer=finding.layer, cells=matrices[node.id], delivery_form=node.delivery_form,
                        provider_name=providers.get(node.provider_id, ""),
                        remedy=(finding.evidence.get("remedy_msg") or finding.evidence.get("remedy")
                                or definition.remedy),
                        provider_initiated=definition.provider_initiated,
                        escalated=bool(finding.evidence.get("escalated")))
        finding.responsible_party = routing.party
        finding.responsibility_source = routing.source
        finding.action_kind = routing.action_kind
        finding.recommended_action = routing.action
        finding.action_msg = routing.as_dict()["action_msg"]
        finding.evidence["routing"] = routing.as_dict()
