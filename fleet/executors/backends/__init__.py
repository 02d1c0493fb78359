"""The executors this app installs into the remediation engine's registry (from `ExecutorsConfig.ready`)."""


def register_all() -> None:
    from ..interface import register
    from .agent import AgentExecutor
    from .aws import AWSExecutor
    from .kubernetes import KubernetesExecutor
    from .slurm import SlurmExecutor
    from .ssh import SSHExecutor
    from .webhook import WebhookExecutor

    register(AgentExecutor())
    register(SSHExecutor())
    register(SlurmExecutor())
    register(AWSExecutor())
    register(WebhookExecutor())
    register(KubernetesExecutor())
