from django.apps import AppConfig


class IntegrationsConfig(AppConfig):
    name = "fleet.integrations"
    label = "integrations"
    verbose_name = "Integrations"

    def ready(self):
        from . import receivers  # noqa: F401  (connects the signal receivers)
