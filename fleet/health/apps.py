from django.apps import AppConfig


class HealthConfig(AppConfig):
    name = "fleet.health"
    label = "health"
    verbose_name = "Health"

    def ready(self):
        from fleet.billing import signals as billing_signals
        from fleet.core.audit import audit_exempt, audit_register
        from fleet.telemetry import signals
        from fleet.telemetry.metrics import gauge_source_register

        from . import receivers
        from .metrics import findings_gauges
        from .models import Finding, HealthCondition, Rule, RuleOverride, XidPolicy

        # Telemetry sits below health and may not import it: health subscribes to what telemetry announces.
        signals.urgent_events_stored.connect(receivers.evaluate_after_urgent_events,
                                             dispatch_uid="health.evaluate_after_urgent_events")
        billing_signals.nodes_preempted.connect(receivers.close_findings_of_preempted_nodes,
                                                dispatch_uid="health.close_findings_of_preempted_nodes")
        gauge_source_register(findings_gauges)

        for model in (Rule, RuleOverride, XidPolicy):
            audit_register(model)
        # The engine's output, rewritten on every evaluation pass.
        audit_exempt(HealthCondition, Finding)
