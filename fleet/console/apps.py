from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """Serves the ops console (frontend/, a Vite single-page app) at `/` and at its client-side routes."""

    name = "fleet.console"
    label = "console"
    verbose_name = "Ops console"
