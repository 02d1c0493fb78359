"""Health's gauges on /metrics (registered with telemetry's exposition in HealthConfig.ready())."""

from prometheus_client.core import GaugeMetricFamily

from .selectors import findings_by_severity


def findings_gauges():
    findings = GaugeMetricFamily("fleet_findings_open", "Open findings", labels=["severity"])
    for severity, count in findings_by_severity().items():
        findings.add_metric([severity], count)
    yield findings
