from django.db import models


class TriageStep(models.TextChoices):
    """The fixed triage order (docs/concepts.md); every rule and finding sits in exactly one step."""

    VISIBILITY = "visibility", "Visibility"
    SOFTWARE_CHAIN = "software_chain", "Software chain"
    CAPACITY = "capacity", "Capacity & data path"
    PLATFORM_HARDWARE = "platform_hardware", "Platform / hardware"


STEP_ORDER: list[str] = [step.value for step in TriageStep]


def step_number(step: str) -> int:
    return STEP_ORDER.index(step) + 1


class Severity(models.TextChoices):
    CRITICAL = "critical", "Critical"
    WARNING = "warning", "Warning"
    INFO = "info", "Info"


SEVERITY_RANK = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2}


class Scope(models.TextChoices):
    NODE = "node", "Node"
    GPU = "gpu", "GPU"


class FindingState(models.TextChoices):
    OPEN = "open", "Open"
    RESOLVED = "resolved", "Resolved"


class ActionKind(models.TextChoices):
    """What the recommended next action asks of us."""

    PROVIDER_TICKET = "provider_ticket", "Open a ticket with the provider"
    VENDOR_RMA = "vendor_rma", "Drain, reboot once, RMA with the hardware vendor if it repeats"
    INTERNAL_FIX = "internal_fix", "Fix on our side"
    JOINT = "joint_investigation", "Investigate together with the provider"


class XidAction(models.TextChoices):
    """First action for an Xid, from the Xid policy table."""

    RESTART_APP = "restart_app", "Restart the application"
    RESET_GPU = "reset_gpu", "Reset the GPU"
    REBOOT = "reboot", "Reboot the machine"
    HARDWARE = "hardware", "Hardware inspection"
    WATCH = "watch", "Watch"
    IGNORE = "ignore", "Ignore (follow the earlier Xid)"
    FOLLOW_REFERENCED = "follow_referenced", "Follow the referenced recovery action"


# An Xid whose first action is a reset or reboot: returning after repeated reboots escalates to hardware.
REBOOT_FIXABLE_ACTIONS = {XidAction.RESET_GPU, XidAction.REBOOT}


class CheckStatus(models.TextChoices):
    """One triage step's verdict for one node."""

    PASSED = "passed", "Passed"
    FAILED = "failed", "Failed"
    UNKNOWN = "unknown", "Unknown"
    # A condition is true but still inside its hold time: no finding yet, but not a pass either.
    PENDING = "pending", "Forming"
