from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "fleet.billing"
    label = "billing"
    verbose_name = "Billing"

    def ready(self):
        from fleet.core.audit import audit_exempt, audit_register
        from fleet.telemetry import signals
        from fleet.telemetry.metrics import gauge_source_register

        from . import receivers
        from .metrics import preemption_gauges
        from .models import (
            BillingPlan,
            CheckpointPolicy,
            CostDay,
            CostProfile,
            DailyCostSnapshot,
            PreemptionRecord,
            PriceListEntry,
        )

        # Telemetry sits below billing and may not import it: billing subscribes to what telemetry announces.
        signals.urgent_events_stored.connect(receivers.record_announced_preemptions,
                                             dispatch_uid="billing.record_announced_preemptions")
        signals.nodes_went_silent.connect(receivers.preemptions_for_silent_nodes,
                                          dispatch_uid="billing.preemptions_for_silent_nodes")
        gauge_source_register(preemption_gauges)

        for model in (BillingPlan, PriceListEntry, CostProfile, CheckpointPolicy):
            audit_register(model)
        # Derived from the cloud's notices and the node's silence; the node's move to `preempted` is recorded
        # as an action on the node.
        audit_exempt(PreemptionRecord)
        # Written by the daily close and the backfill command from the prices and inventory (themselves audited).
        audit_exempt(CostDay, DailyCostSnapshot)
