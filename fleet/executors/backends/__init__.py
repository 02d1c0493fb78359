"""The executors this app installs into the remediation engine's registry (from `ExecutorsConfig.ready`)."""


def register_all() -> None:
    from ..interface import register
    from .ssh import SSHExecutor

    register(SSHExecutor())
