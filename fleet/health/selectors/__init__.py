"""Read-side queries of the health engine."""

from .findings import finding_list, findings_by_severity
from .triage import node_triage

__all__ = ["finding_list", "findings_by_severity", "node_triage"]
