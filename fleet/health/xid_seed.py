"""The Xid policy table as first seeded: each code's meaning and first action as in the agent's Xid catalog
2026.12-1 (`fleet_agent/xid.py`). After seeding, the database is the source of truth; operators edit it via the API.

Layer placement (our decision, documented in docs/health.md): application faults (13, 31, 43, 45) sit on the
application layer; GPU hangs and GSP firmware timeouts (46, 119, 120) on the GPU driver; the rest on hardware.
"""

from fleet.inventory.choices import Layer

from .choices import Severity, XidAction

C, W, INFO = Severity.CRITICAL, Severity.WARNING, Severity.INFO
A = XidAction

_NVLINK5 = ("NVLink5 error", C, A.RESET_GPU, Layer.HARDWARE, "reset the GPU; repeated → hardware")

XID_SEED: dict[int, tuple[str, str, str, str, str]] = {
    # code: (meaning, severity, first action, layer, escalation)
    13: ("graphics engine exception", W, A.RESTART_APP, Layer.APPLICATION,
         "check the application; repeated on one GPU → run diagnostics"),
    31: ("GPU memory page fault (MMU)", W, A.RESTART_APP, Layer.APPLICATION,
         "check the application; repeated → run diagnostics"),
    43: ("GPU stopped processing", W, A.RESTART_APP, Layer.APPLICATION,
         "usually the application; repeated → contact support"),
    45: ("preemptive cleanup after earlier errors", INFO, A.IGNORE, Layer.APPLICATION,
         "ignore on its own; act on the earlier Xid it follows"),
    46: ("GPU stopped processing (timeout)", C, A.RESET_GPU, Layer.GPU_DRIVER,
         "reset the GPU or reboot; repeated → hardware"),
    48: ("double-bit ECC error", C, A.RESET_GPU, Layer.HARDWARE, "reset the GPU or reboot; repeated → hardware"),
    61: ("internal micro-controller breakpoint", C, A.RESET_GPU, Layer.HARDWARE,
         "reset the GPU or reboot; repeated → contact support"),
    62: ("internal micro-controller halt", C, A.RESET_GPU, Layer.HARDWARE,
         "reset the GPU or reboot; repeated → contact support"),
    63: ("row-remap / page-retirement event", W, A.RESET_GPU, Layer.HARDWARE,
         "reset the GPU at a convenient time to activate the remap"),
    64: ("row-remap / page-retirement failure", C, A.RESET_GPU, Layer.HARDWARE, "reset the GPU; likely hardware"),
    74: ("NVLink error", C, A.RESET_GPU, Layer.HARDWARE, "reset the GPU; repeated → hardware"),
    79: ("GPU has fallen off the bus", C, A.REBOOT, Layer.HARDWARE,
         "reboot the machine; repeated → hardware (RMA / replace the instance)"),
    92: ("high single-bit ECC error rate", W, A.WATCH, Layer.HARDWARE, "watch the ECC counters"),
    94: ("contained ECC error", W, A.RESTART_APP, Layer.HARDWARE, "restart the application; the GPU stays usable"),
    95: ("uncontained ECC error", C, A.RESET_GPU, Layer.HARDWARE, "reset the GPU; repeated → hardware"),
    119: ("GSP RPC timeout", C, A.RESET_GPU, Layer.GPU_DRIVER, "reset the GPU; repeated → reboot, then hardware"),
    120: ("GSP error", C, A.RESET_GPU, Layer.GPU_DRIVER, "reset the GPU; repeated → reboot, then hardware"),
    136: ("link training failed", C, A.RESET_GPU, Layer.HARDWARE, "reset the GPU; investigate the link"),
    140: ("unrecovered ECC error", C, A.RESET_GPU, Layer.HARDWARE, "reset the GPU; repeated → contact support"),
    143: ("GPU initialisation failure", C, A.HARDWARE, Layer.HARDWARE,
          "take the GPU out of service for hardware inspection"),
    **{code: _NVLINK5 for code in range(144, 151)},
    154: ("GPU recovery action changed (refers to another Xid)", W, A.FOLLOW_REFERENCED, Layer.HARDWARE,
          "follow the recovery action the message states"),
}


def seed_xid_policies(policy_model) -> int:
    """Create the seeded rows that do not exist yet (version 1). Takes the model class for data migrations."""
    existing = set(policy_model.objects.values_list("code", flat=True))
    rows = [policy_model(code=code, meaning=meaning, severity=severity, action=action, layer=layer,
                         escalation=escalation, changed_in_version=1)
            for code, (meaning, severity, action, layer, escalation) in sorted(XID_SEED.items())
            if code not in existing]
    policy_model.objects.bulk_create(rows)
    return len(rows)
