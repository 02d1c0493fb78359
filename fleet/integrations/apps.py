from django.apps import AppConfig


class IntegrationsConfig(AppConfig):
    name = "fleet.integrations"
    label = "integrations"
    verbose_name = "Integrations"

    def ready(self):
        from fleet.remediation.executors import register

        from . import receivers  # noqa: F401  (connects the signal receivers)
        from .remediation import TicketExecutor, incident_content
        from .services.delivery import RENDERERS

        register(TicketExecutor())
        for prefix in ("incident.", "circuit_breaker.", "ticket."):
            RENDERERS[prefix] = incident_content
