from django.apps import AppConfig


class RemediationConfig(AppConfig):
    name = "fleet.remediation"
    label = "remediation"
    verbose_name = "Remediation"

    def ready(self):
        # Receivers: findings opened by the health engine, nodes enrolling (replacements), pools created.
        from . import receivers  # noqa: F401
        from .executors import register
        from .manual import ManualExecutor

        register(ManualExecutor())
