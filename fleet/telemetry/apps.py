from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    name = "fleet.telemetry"
    label = "telemetry"
    verbose_name = "Telemetry"

    def ready(self):
        from fleet.core.audit import audit_exempt, audit_register

        from . import authentication, models  # noqa: F401 (authentication connects the credential cache's receivers)

        audit_register(models.EnrollmentToken)
        audit_register(models.NodeCredential)
        # Hot-path tables (written set-based per report) and the server's own bookkeeping; a re-enrolment
        # approval is recorded as an action on its node.
        audit_exempt(models.AgentEpoch, models.NodeStatus, models.GPUStatus, models.NodeSample, models.GPUSample,
                     models.NodeSampleRollup, models.GPUSampleRollup, models.Event, models.ChangeLogEntry,
                     models.ReceivingState, models.ReenrollmentApproval)
