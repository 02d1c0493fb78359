from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "fleet.billing"
    label = "billing"
    verbose_name = "Billing"

    def ready(self):
        # Telemetry sits below billing and may not import it: billing subscribes to what telemetry announces.
        from fleet.telemetry import signals
        from fleet.telemetry.metrics import gauge_source_register

        from . import receivers
        from .metrics import preemption_gauges

        signals.urgent_events_stored.connect(receivers.record_announced_preemptions,
                                             dispatch_uid="billing.record_announced_preemptions")
        signals.nodes_went_silent.connect(receivers.preemptions_for_silent_nodes,
                                          dispatch_uid="billing.preemptions_for_silent_nodes")
        gauge_source_register(preemption_gauges)
