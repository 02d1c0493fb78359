from django.apps import AppConfig


class HealthConfig(AppConfig):
    name = "fleet.health"
    label = "health"
    verbose_name = "Health"

    def ready(self):
        # Telemetry sits below health and may not import it: health subscribes to what telemetry announces.
        from fleet.telemetry import signals
        from fleet.telemetry.metrics import gauge_source_register

        from . import receivers
        from .metrics import findings_gauges

        signals.urgent_events_stored.connect(receivers.evaluate_after_urgent_events,
                                             dispatch_uid="health.evaluate_after_urgent_events")
        gauge_source_register(findings_gauges)
