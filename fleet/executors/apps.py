from django.apps import AppConfig


class ExecutorsConfig(AppConfig):
    name = "fleet.executors"
    label = "executors"
    verbose_name = "Executors"

    def ready(self):
        from fleet.core.audit import audit_exempt
        from fleet.core.crypto import encrypted_field_register

        from . import models as m
        from .backends import register_all

        register_all()
        for model, field in ((m.SSHKey, "private_key_encrypted"), (m.BootstrapRun, "token_encrypted"),
                             (m.ExecutorConfig, "secret_encrypted")):
            encrypted_field_register(model, field)
        # The action channel rides the agents' report answers: telemetry calls these, never imports this app.
        from fleet.telemetry.api.views import report_answer_register
        from fleet.telemetry.authentication import pending_for_node_sql_register

        from .services.agent_actions import agent_action_exchange

        report_answer_register(agent_action_exchange)
        table = m.AgentAction._meta.db_table  # from model metadata, never from input
        pending_for_node_sql_register(
            f"EXISTS (SELECT 1 FROM {table} a WHERE a.node_id = c.node_id "  # noqa: S608
            "AND a.state IN ('pending', 'delivered'))", model=m.AgentAction)
        # Audited by this app's services, which keep encrypted keys and secrets out of the entry and record the
        # operator's actions (fingerprint confirmed, bootstrap started, reboot asked); the rest is their log.
        audit_exempt(m.SSHKey, m.SSHHost, m.BootstrapRun, m.BootstrapHost, m.SSHAction, m.AgentAction,
                     m.ExecutorConfig, m.ExternalRequest)
