"""Read-side queries of the health engine."""

from .findings import finding_list, findings_by_severity, open_findings_by_route
from .triage import node_triage

__all__ = ["finding_list", "findings_by_severity", "node_triage", "open_findings_by_route"]
