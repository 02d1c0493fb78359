from django.apps import AppConfig


class InventoryConfig(AppConfig):
    name = "fleet.inventory"
    label = "inventory"
    verbose_name = "Inventory"

    def ready(self):
        from fleet.core.audit import audit_exempt, audit_register

        from .models import GPU, Baseline, BoundaryOverride, Node, Pool, Provider, Site, SoftwareStack

        for model in (Provider, Site, Pool, Node, GPU, Baseline, BoundaryOverride):
            audit_register(model)
        # A node's stack history is the report itself; its changes are in the node's change log.
        audit_exempt(SoftwareStack)
