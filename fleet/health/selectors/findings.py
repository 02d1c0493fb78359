from django.db.models import Count, F, QuerySet

from ..choices import FindingState, Severity
from ..models import Finding


def finding_list() -> QuerySet[Finding]:
    """Findings with what their list and detail views show, newest first."""
    return Finding.objects.select_related("rule", "node", "node__provider", "gpu")


def findings_by_severity() -> dict[str, int]:
    """Open findings per severity, every severity present (the /metrics gauge)."""
    counts = {severity.value: 0 for severity in Severity}
    rows = (Finding.objects.filter(state=FindingState.OPEN).order_by().values_list("severity")
            .annotate(n=Count("pk")))
    for severity, count in rows:
        counts[severity] = count
    return counts


def open_findings_by_route() -> list[dict]:
    """Open findings counted per (node hostname, step, responsible party, provider name, severity): one query,
    for the routable /metrics gauge."""
    return list(Finding.objects.filter(state=FindingState.OPEN).order_by()
                .values("step", "responsible_party", "severity", node_name=F("node__hostname"),
                        provider=F("node__provider__name"))
                .annotate(count=Count("pk")).order_by("node_name", "step", "severity"))
