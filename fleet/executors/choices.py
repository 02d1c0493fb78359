from django.db import models


class HostKeyState(models.TextChoices):
    """Where an SSH host's key stands. Only `trusted` hosts are ever connected to for commands."""

    UNKNOWN = "unknown", "Not scanned yet"
    PENDING = "pending", "Waiting for an operator to confirm the fingerprint"
    TRUSTED = "trusted", "Pinned (confirmed by an operator)"
    CHANGED = "changed", "Changed since it was pinned"


class BootstrapState(models.TextChoices):
    QUEUED = "queued", "Queued"
    CONNECTING = "connecting", "Connecting"
    CHECKING = "checking", "Checking what is installed"
    INSTALLING = "installing", "Running install.sh"
    DONE = "done", "Installed"
    UP_TO_DATE = "up_to_date", "Already installed"
    FAILED = "failed", "Failed"


BOOTSTRAP_FINISHED = frozenset({BootstrapState.DONE, BootstrapState.UP_TO_DATE, BootstrapState.FAILED})


class RunState(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    FINISHED = "finished", "Finished"


class SSHActionKind(models.TextChoices):
    """What an operator (or a remediation step) runs on a host over SSH."""

    DIAGNOSE = "diagnose", "Collect remote diagnostics"
    REBOOT = "reboot", "Reboot"
    GPU_RESET = "gpu_reset", "Reset a GPU"
    RUN_HOOK = "run_hook", "Run a hook"


class SSHActionState(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"


class AgentActionKind(models.TextChoices):
    """What the reports response may ask a node's agent to run (`fleet_agent.protocol.ACTION_KINDS`)."""

    COLLECT_EVIDENCE = "collect_evidence", "Collect evidence"
    VERIFY = "verify", "Run the smoke test"
    GPU_RESET = "gpu_reset", "Reset a GPU"
    REBOOT = "reboot", "Reboot"
    RUN_HOOK = "run_hook", "Run a hook"
    DCGM_DIAG = "dcgm_diag", "Run DCGM diagnostics"


class AgentActionState(models.TextChoices):
    PENDING = "pending", "Waiting for the node's next report"
    DELIVERED = "delivered", "Handed to the node"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
    REFUSED = "refused", "Refused by the node"
    EXPIRED = "expired", "Expired before it ran"
    INTERRUPTED = "interrupted", "Interrupted (not run again)"
    CANCELLED = "cancelled", "Cancelled"


AGENT_ACTION_OPEN = frozenset({AgentActionState.PENDING, AgentActionState.DELIVERED})


class ConfiguredExecutor(models.TextChoices):
    """Executors that need per-pool settings (the agent and SSH executors need none)."""

    SLURM = "slurm", "Slurm"
    KUBERNETES = "kubernetes", "Kubernetes"
    AWS = "aws", "AWS"
    WEBHOOK = "webhook", "Signed webhook"


class ExternalState(models.TextChoices):
    """A request an executor makes outside (a cloud API call, a webhook to the user's provisioning system)."""

    PENDING = "pending", "Recorded, not yet accepted"
    ACCEPTED = "accepted", "Accepted; waiting for the callback"
    DONE = "done", "Done"
    FAILED = "failed", "Failed"
