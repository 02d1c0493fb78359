"""Health's gauges on /metrics (registered with telemetry's exposition in HealthConfig.ready()).

`fleet_findings_open{node, step, responsible_party, provider, severity}` lets Alertmanager route by who acts
(a provider's support desk, the hardware vendor, our own team) and by node. One series per combination that has
open findings, so the series count is bounded by the open findings themselves (at most nodes × 4 steps × owners
× 3 severities; in practice a few per sick node) and a series disappears when its findings resolve.
`fleet_findings_open_by_severity{severity}` is the old fleet-wide total, every severity present (0 included),
for dashboards that summed by severity.
"""

from prometheus_client.core import GaugeMetricFamily

from .selectors import findings_by_severity, open_findings_by_route

ROUTE_LABELS = ["node", "step", "responsible_party", "provider", "severity"]


def findings_gauges():
    findings = GaugeMetricFamily(
        "fleet_findings_open", "Open findings by node, triage step, responsible party, provider and severity",
        labels=ROUTE_LABELS)
    for row in open_findings_by_route():
        findings.add_metric([row["node_name"], row["step"], row["responsible_party"], row["provider"] or "",
                            row["severity"]], row["count"])
    yield findings
    totals = GaugeMetricFamily("fleet_findings_open_by_severity", "Open findings per severity, fleet-wide",
                               labels=["severity"])
    for severity, count in findings_by_severity().items():
        totals.add_metric([severity], count)
    yield totals
