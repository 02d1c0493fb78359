from django.apps import AppConfig


class RemediationConfig(AppConfig):
    name = "fleet.remediation"
    label = "remediation"
    verbose_name = "Remediation"

    def ready(self):
        # Receivers: findings opened by the health engine, nodes enrolling (replacements), pools created.
        from importlib import import_module

        from django.conf import settings

        from . import receivers  # noqa: F401
        from .executors import register
        from .manual import ManualExecutor

        register(ManualExecutor())
        # Site-specific executors without an app of their own: modules that call `register()` when imported.
        for module in settings.REMEDIATION_EXECUTOR_MODULES:
            import_module(module)
