from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "fleet.core"
    label = "core"
    verbose_name = "Core"

    def ready(self):
        from .audit import audit_exempt
        from .models import AuditEntry

        audit_exempt(AuditEntry)
