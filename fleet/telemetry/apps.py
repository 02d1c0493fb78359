from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    name = "fleet.telemetry"
    label = "telemetry"
    verbose_name = "Telemetry"
