from django.db.models import Count, QuerySet

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
