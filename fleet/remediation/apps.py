from django.apps import AppConfig


class RemediationConfig(AppConfig):
    name = "fleet.remediation"
    label = "remediation"
    verbose_name = "Remediation"

    def ready(self):
        # Receivers: findings opened by the health engine, nodes enrolling (replacements), pools created.
        from importlib import import_module

        from django.conf import settings

        from fleet.core.audit import audit_exempt, audit_register
        from fleet.telemetry.metrics import gauge_source_register

        from . import models as m
        from . import receivers  # noqa: F401
        from .executors import register
        from .manual import ManualExecutor
        from .metrics import remediation_gauges

        # Configuration operators edit is audited on every write; an incident's own record of what happened is
        # its append-only timeline (with step runs, evidence and intake decisions), so those are not doubled.
        for model in (m.Workflow, m.RemediationPolicy, m.PoolRemediationSettings, m.NodeRemediationSettings,
                      m.CircuitBreaker, m.Override):
            audit_register(model)
        audit_exempt(m.Incident, m.IncidentFinding, m.StepRun, m.TimelineEntry, m.EvidenceBundle, m.FindingIntake)

        register(ManualExecutor())
        gauge_source_register(remediation_gauges)
        # Site-specific executors without an app of their own: modules that call `register()` when imported.
        for module in settings.REMEDIATION_EXECUTOR_MODULES:
            import_module(module)
