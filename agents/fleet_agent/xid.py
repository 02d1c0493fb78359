"""NVIDIA Xid catalog: what each code means, how bad it is and what to do first.

NVIDIA's own catalog and field tools (GPUd) disagree on a few codes, so this is a versioned policy
table rather than a fact sheet: bump ``CATALOG_VERSION`` whenever an entry changes so the server can
tell which policy classified an event. The agent, the simulator and the server all read it from here: the
server seeds its editable Xid policy table from it (``fleet.health.xid_seed``).
"""

from __future__ import annotations

CATALOG_VERSION = "2026.12-2"

SEVERITIES = ("critical", "warning", "info")
ACTIONS = ("restart_app", "reset_gpu", "reboot", "hardware", "watch", "ignore", "follow_referenced")

# Escalation rules operators apply on top of the first action (docs/concepts.md, docs/health.md).
REBOOTS_BEFORE_HARDWARE = 2
FATAL_XID_SUPPORT_THRESHOLD = (5, 24 * 3600)  # the same fatal Xid ≥ 5 times in 24 h on one GPU
NODE_REMEDIATIONS_RMA_THRESHOLD = (5, 7 * 24 * 3600)  # ≥ 5 remediations in 7 days on one node


def _entry(meaning: str, severity: str, action: str, escalation: str) -> dict:
    return {"meaning": meaning, "severity": severity, "action": action, "escalation": escalation}


_NVLINK5 = "NVLink5 error"

XID_CATALOG: dict[int, dict] = {
    13: _entry("graphics engine exception", "warning", "restart_app",
               "check the application; repeated on one GPU → run diagnostics"),
    31: _entry("GPU memory page fault (MMU)", "warning", "restart_app",
               "check the application; repeated → run diagnostics"),
    43: _entry("GPU stopped processing", "warning", "restart_app",
               "usually the application; repeated → contact support"),
    45: _entry("preemptive cleanup after earlier errors", "info", "ignore",
               "ignore on its own; act on the earlier Xid it follows"),
    46: _entry("GPU stopped processing (timeout)", "critical", "reset_gpu",
               "reset the GPU or reboot; repeated → hardware"),
    48: _entry("double-bit ECC error", "critical", "reset_gpu",
               "reset the GPU or reboot; repeated → hardware"),
    61: _entry("internal micro-controller breakpoint", "critical", "reset_gpu",
               "reset the GPU or reboot; repeated → contact support"),
    62: _entry("internal micro-controller halt", "critical", "reset_gpu",
               "reset the GPU or reboot; repeated → contact support"),
    63: _entry("row-remap / page-retirement event", "warning", "reset_gpu",
               "reset the GPU at a convenient time to activate the remap"),
    64: _entry("row-remap / page-retirement failure", "critical", "reset_gpu",
               "reset the GPU; likely hardware"),
    74: _entry("NVLink error", "critical", "reset_gpu", "reset the GPU; repeated → hardware"),
    79: _entry("GPU has fallen off the bus", "critical", "reboot",
               "reboot the machine; repeated → hardware (RMA / replace the instance)"),
    92: _entry("high single-bit ECC error rate", "warning", "watch", "watch the ECC counters"),
    94: _entry("contained ECC error", "warning", "restart_app",
               "restart the application; the GPU stays usable"),
    95: _entry("uncontained ECC error", "critical", "reset_gpu", "reset the GPU; repeated → hardware"),
    119: _entry("GSP RPC timeout", "critical", "reset_gpu",
                "reset the GPU; repeated → reboot, then hardware"),
    120: _entry("GSP error", "critical", "reset_gpu", "reset the GPU; repeated → reboot, then hardware"),
    136: _entry("link training failed", "critical", "reset_gpu", "reset the GPU; investigate the link"),
    140: _entry("unrecovered ECC error", "critical", "reset_gpu", "reset the GPU; repeated → contact support"),
    143: _entry("GPU initialisation failure", "critical", "hardware",
                "take the GPU out of service for hardware inspection"),
    **{code: _entry(_NVLINK5, "critical", "reset_gpu", "reset the GPU; repeated → hardware")
       for code in range(144, 151)},
    154: _entry("GPU recovery action changed (refers to another Xid)", "warning", "follow_referenced",
                "follow the recovery action the message states"),
}

# What an Xid the catalog does not list gets.
UNKNOWN_XID = _entry("unknown Xid", "warning", "watch",
                  "look the code up in NVIDIA's Xid catalog; repeated → run diagnostics")


def xid_info(code: int | None) -> dict:
    """Catalog entry for ``code`` (a copy, with ``code``, ``known`` and ``catalog_version`` added)."""
    entry = XID_CATALOG.get(code) if isinstance(code, int) else None
    info = dict(entry if entry is not None else UNKNOWN_XID)
    info.update(code=code, known=entry is not None, catalog_version=CATALOG_VERSION)
    return info
