"""The executors this app installs into the remediation engine's registry."""


def register_all() -> None:
    return None
