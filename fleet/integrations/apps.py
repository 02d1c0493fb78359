from django.apps import AppConfig


class IntegrationsConfig(AppConfig):
    name = "fleet.integrations"
    label = "integrations"
    verbose_name = "Integrations"

    def ready(self):
        from fleet.core.audit import audit_exempt, audit_register
        from fleet.core.crypto import encrypted_field_register
        from fleet.remediation.executors import register
        from fleet.telemetry.metrics import gauge_source_register

        from . import models as m
        from . import receivers  # noqa: F401  (connects the signal receivers)
        from .metrics import integration_metrics
        from .remediation import TicketExecutor, incident_content
        from .services.delivery import RENDERERS

        # Routing rules are plain configuration: the hooks audit them. An integration is audited by its services,
        # which leave its encrypted credentials out of the entry; tickets, the outbox and delivery attempts are
        # the delivery log itself.
        audit_register(m.RoutingRule)
        audit_exempt(m.Integration, m.Ticket, m.TicketUpdate, m.OutboxMessage, m.DeliveryAttempt, m.DeliveryCounter)
        encrypted_field_register(m.Integration, "secrets_encrypted")
        register(TicketExecutor())
        gauge_source_register(integration_metrics)
        for prefix in ("incident.", "circuit_breaker.", "ticket."):
            RENDERERS[prefix] = incident_content
