from django.apps import AppConfig
from django.conf import settings

# OpenAPI enum names for choice sets this app's API shares with others ("state", owner/party fields).
# Without them drf-spectacular warns about name collisions, and the schema check runs with --fail-on-warn.
# Entries already in settings.SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"] win.
SCHEMA_ENUM_NAMES = {
    "FindingStateEnum": "fleet.health.choices.FindingState",
    "NodeStateEnum": "fleet.inventory.choices.NodeState",
    "OwnerEnum": "fleet.inventory.choices.Owner",
}


class HealthConfig(AppConfig):
    name = "fleet.health"
    label = "health"
    verbose_name = "Health"

    def ready(self):
        overrides = getattr(settings, "SPECTACULAR_SETTINGS", {}).setdefault("ENUM_NAME_OVERRIDES", {})
        registered = {str(v) for v in overrides.values()}
        for name, path in SCHEMA_ENUM_NAMES.items():
            if name not in overrides and path not in registered:
                overrides[name] = path
