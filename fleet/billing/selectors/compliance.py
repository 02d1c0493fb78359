"""Compliance flags per node: what a public endpoint obliges us to do where the node runs."""

from collections.abc import Iterable
from dataclasses import asdict, dataclass

from django.db.models import Q

from fleet.inventory.models import Node

from ..choices import ComplianceFlag


@dataclass(frozen=True)
class ComplianceItem:
    flag: str
    label: str
    reason: str

    def as_dict(self) -> dict:
        return asdict(self)


def _flags(*, public_endpoint: bool, icp_site: bool) -> list[ComplianceItem]:
    flags: list[ComplianceItem] = []
    if public_endpoint and icp_site:
        flags.append(ComplianceItem(
            ComplianceFlag.ICP_FILING_REQUIRED, ComplianceFlag.ICP_FILING_REQUIRED.label,
            "The node serves a public endpoint from a mainland-China site; the service needs an ICP filing "
            "(备案) before it may be reached from the internet."))
    if public_endpoint:
        flags.append(ComplianceItem(
            ComplianceFlag.DDOS_PROTECTION_RECOMMENDED, ComplianceFlag.DDOS_PROTECTION_RECOMMENDED.label,
            "The node serves a public endpoint; put it behind DDoS protection."))
    return flags


def compliance_flags_for_nodes(node_ids: Iterable[int]) -> dict[int, list[ComplianceItem]]:
    """{node_id: flags} in one query. The node's own site wins over its pool's."""
    rows = Node.objects.filter(pk__in=set(node_ids)).values_list(
        "pk", "public_endpoint", "site_id", "site__icp_filing_required", "pool__site__icp_filing_required")
    return {
        node_id: _flags(public_endpoint=public,
                        icp_site=bool(own_icp if site_id is not None else pool_icp))
        for node_id, public, site_id, own_icp, pool_icp in rows
    }


def compliance_filter(code: str) -> Q:
    """The nodes a flag applies to, as a queryset filter (for the fleet list's `compliance` filter)."""
    icp_site = Q(site__icp_filing_required=True) | Q(site__isnull=True, pool__site__icp_filing_required=True)
    if code == ComplianceFlag.ICP_FILING_REQUIRED:
        return Q(public_endpoint=True) & icp_site
    if code == ComplianceFlag.DDOS_PROTECTION_RECOMMENDED:
        return Q(public_endpoint=True)
    raise ValueError(f"unknown compliance flag {code!r}")
