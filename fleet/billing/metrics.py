"""Billing's gauges on /metrics (registered with telemetry's exposition in BillingConfig.ready())."""

from prometheus_client.core import GaugeMetricFamily

from .selectors import preemption_rates_for_metrics


def preemption_gauges():
    for gauge in preemption_rates_for_metrics():
        family = GaugeMetricFamily(gauge.name, gauge.documentation, labels=list(gauge.labels))
        for labels, value in gauge.samples:
            family.add_metric(list(labels), value)
        yield family
