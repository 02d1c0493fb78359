"""Prometheus gauges of remediation, read at scrape time: incidents open by state and cause, MTTR per provider
and cause (incidents resolved in the last 30 days), remediations per node (last 7 days), breakers and queues."""

from prometheus_client.core import GaugeMetricFamily

from .selectors import (
    breakers_open,
    incidents_open_by_state_and_cause,
    mttr_by_provider_and_cause,
    pools_overview,
    remediations_per_node,
)


class RemediationCollector:
    def collect(self):
        open_incidents = GaugeMetricFamily("fleet_incidents_open", "Open remediation incidents",
                                           labels=["state", "cause"])
        for (state, cause), count in sorted(incidents_open_by_state_and_cause().items()):
            open_incidents.add_metric([state, cause], count)
        yield open_incidents

        mttr = GaugeMetricFamily("fleet_incident_mttr_seconds",
                                 "Mean time from opening to resolution, incidents resolved in the last 30 days",
                                 labels=["provider", "cause"])
        resolved = GaugeMetricFamily("fleet_incidents_resolved_30d", "Incidents resolved in the last 30 days",
                                     labels=["provider", "cause"])
        for (provider, cause), (mean, count) in sorted(mttr_by_provider_and_cause().items()):
            mttr.add_metric([provider, cause], round(mean, 1))
            resolved.add_metric([provider, cause], count)
        yield mttr
        yield resolved

        per_node = GaugeMetricFamily("fleet_node_remediations_7d", "Remediations started on the node in the last "
                                                                   "7 days (5 send it to RMA / replacement)",
                                     labels=["node"])
        for node, count in sorted(remediations_per_node().items()):
            per_node.add_metric([node], count)
        yield per_node

        breakers = GaugeMetricFamily("fleet_circuit_breaker_open", "1 while the breaker pauses automation",
                                     labels=["scope", "name"])
        for scope, name, value in breakers_open():
            breakers.add_metric([scope, name], value)
        yield breakers

        queue = GaugeMetricFamily("fleet_remediation_queue_depth", "Incidents waiting for a remediation slot",
                                  labels=["pool"])
        slots = GaugeMetricFamily("fleet_remediation_active_nodes", "Nodes being remediated (against "
                                                                    "max_concurrent_replacements)", labels=["pool"])
        for row in pools_overview():
            queue.add_metric([row["name"]], row["queued"])
            slots.add_metric([row["name"]], row["active_nodes"])
        yield queue
        yield slots
