"""The Xid policy: what each code means, how bad it is, what to do first and on which layer it sits.

One home for both sides: the agent ranks urgency from it, the server seeds its editable Xid policy table from it
(``fleet.health.xid_seed``); neither re-decides it. Every code NVIDIA's catalog lists (``fleet_agent.xid_nvidia``)
has an entry, derived from NVIDIA's immediate and investigatory resolutions by the rules below; the few places
where the product deliberately differs from NVIDIA are in ``_DIFFERENCES`` with the reason, and docs/health.md's
table (generated from here) shows them. A code NVIDIA does not list is "unknown: look it up", never "hardware".

Bump ``CATALOG_VERSION`` whenever an entry changes so the server can tell which policy classified an event.
"""

from __future__ import annotations

import re

from fleet_agent.xid_nvidia import NVIDIA_XIDS, SOURCE, UNUSED

CATALOG_VERSION = "2026.12-3"

SEVERITIES = ("critical", "warning", "info")
ACTIONS = ("restart_app", "reset_gpu", "reboot", "hardware", "watch", "ignore", "follow_referenced")
LAYERS = ("application", "gpu_driver", "virtualization", "hardware")

# Escalation rules operators apply on top of the first action (docs/concepts.md, docs/health.md).
REBOOTS_BEFORE_HARDWARE = 2
FATAL_XID_SUPPORT_THRESHOLD = (5, 24 * 3600)  # the same fatal Xid ≥ 5 times in 24 h on one GPU
NODE_REMEDIATIONS_RMA_THRESHOLD = (5, 7 * 24 * 3600)  # ≥ 5 remediations in 7 days on one node

# NVIDIA's immediate resolution → (our first action, severity). Fatal = the GPU (or the machine) must be reset or
# restarted before it is trusted again: severity critical.
_IMMEDIATE = {
    "RESTART_APP": ("restart_app", "warning"),
    "RESET_GPU": ("reset_gpu", "critical"),
    "RESTART_VM": ("reboot", "critical"),
    "RESTART_BM": ("reboot", "critical"),
    "CHECK_MECHANICALS": ("hardware", "critical"),
    "UPDATE_SWFW": ("watch", "warning"),
    "CHECK_UVM": ("restart_app", "warning"),
    "WORKFLOW_XID_45": ("ignore", "info"),
    "WORKFLOW_XID_48": ("reset_gpu", "critical"),
    "WORKFLOW_NVLINK_ERR": ("reset_gpu", "critical"),
    "XID_154": ("follow_referenced", "warning"),
}
# Investigatory resolutions that point at the application (or the user's software) rather than the GPU: the codes
# NVIDIA sends to the application. Restarting the application alone does not make a code the application's (a
# contained ECC error, Xid 94, restarts it too; the memory is the fault).
APPLICATION_INVESTIGATIONS = {"CHECK_APP/CUDA", "WORKFLOW_XID_13", "WORKFLOW_XID_31", "XID_137_FLOW",
                               "INVESTIGATE_SW_USER"}

# Layers NVIDIA's resolutions do not settle: the driver and its firmware (GSP), and the hypervisor.
_LAYER = {
    38: "gpu_driver", 44: "gpu_driver", 46: "gpu_driver", 66: "gpu_driver", 67: "gpu_driver",
    60: "gpu_driver", 110: "gpu_driver", 119: "gpu_driver", 120: "gpu_driver", 141: "gpu_driver", 151: "gpu_driver",
    154: "gpu_driver", 159: "gpu_driver", 160: "gpu_driver", 161: "gpu_driver", 166: "gpu_driver",
    170: "gpu_driver", 43: "application", 45: "application", 78: "virtualization",
}

# Our words for what a code means and what to do when it repeats, where NVIDIA's short description is not enough.
_MEANING = {
    13: "graphics engine exception", 31: "GPU memory page fault (MMU)", 43: "GPU stopped processing",
    45: "preemptive cleanup after earlier errors", 46: "GPU stopped processing (timeout)",
    48: "double-bit ECC error", 62: "internal micro-controller halt", 63: "row-remap / page-retirement event",
    64: "row-remap / page-retirement failure", 74: "NVLink error", 79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate", 94: "contained ECC error", 95: "uncontained ECC error",
    119: "GSP RPC timeout", 120: "GSP error", 136: "link training failed", 140: "unrecovered ECC error",
    143: "GPU initialisation failure", 154: "GPU recovery action changed (refers to another Xid)",
    **{code: "NVLink5 error" for code in range(144, 151)},
}
_ESCALATION = {
    13: "check the application; repeated on one GPU → run diagnostics",
    31: "check the application; repeated → run diagnostics",
    43: "the channel was reset already; repeated → contact support",
    45: "ignore on its own; act on the earlier Xid it follows",
    46: "reset the GPU or reboot; repeated → hardware",
    48: "reset the GPU or reboot; repeated → hardware",
    63: "benign: the next GPU reset activates the remap; Xid 64 is the failure",
    64: "reset the GPU; likely hardware",
    79: "reboot the machine; repeated → hardware (RMA / replace the instance)",
    92: "watch the ECC counters; repeated → contact support",
    94: "restart the application; the GPU stays usable",
    119: "reset the GPU; repeated → reboot, then hardware",
    120: "reset the GPU; repeated → reboot, then hardware",
    62: "reset the GPU or reboot; repeated → contact support",
    74: "reset the GPU; repeated → hardware",
    95: "reset the GPU; repeated → hardware",
    136: "reset the GPU; investigate the link",
    140: "reset the GPU; repeated → contact support",
    143: "reset the GPU; repeated → hardware",
    154: "follow the recovery action the message states",
    **{code: "read the line's sub-code: a non-fatal one needs nothing, a fatal one resets the GPU (NVIDIA's NVLink5 "
             "decode)" for code in range(144, 151)},
}

# Where the product deliberately differs from NVIDIA's resolution: code → (action, severity, layer, reason).
_DIFFERENCES: dict[int, tuple[str, str, str, str]] = {
    **{code: ("watch", "warning", "hardware",
              "NVIDIA decodes 144–150 per sub-code; the line says fatal or non-fatal (xid_decode): a fatal line "
              "resets the GPU, a non-fatal one, NVIDIA's usual case, is watched — this entry is that default")
       for code in range(144, 151)},
    162: ("ignore", "info", "hardware", "no resolution published yet: power smoothing is back"),
    163: ("watch", "warning", "hardware", "no resolution published yet: power smoothing is off until it returns"),
    164: ("watch", "warning", "hardware", "no resolution published yet: plan the board's service"),
    165: ("hardware", "warning", "hardware", "no resolution published yet: the power smoothing circuitry is worn "
                                             "out, the board needs service"),
    166: ("watch", "warning", "gpu_driver", "no resolution published yet: a confidential-computing link "
                                            "configuration problem"),
    167: ("reboot", "critical", "hardware", "no resolution published yet: a fatal PCIe timeout is handled like "
                                           "Xid 79"),
    168: ("reset_gpu", "critical", "hardware", "no resolution published yet: memory lost to WPR errors"),
    169: ("reset_gpu", "critical", "hardware", "no resolution published yet: a micro-controller halt, as Xid 62"),
    170: ("watch", "warning", "gpu_driver", "no resolution published yet: an interrupt in confidential-computing "
                                           "mode"),
    171: ("reset_gpu", "critical", "hardware", "no resolution published yet: it details an Xid 48, acted on as one"),
    172: ("reset_gpu", "critical", "hardware", "no resolution published yet: it details an Xid 48, acted on as one"),
}


UNUSED_MEANING = "listed by NVIDIA as unused by current drivers"


def _derived(code: int) -> dict:
    mnemonic, description, immediate, investigatory = NVIDIA_XIDS[code]
    reason = ""
    if code in _DIFFERENCES:
        action, severity, layer, reason = _DIFFERENCES[code]
    elif description == UNUSED:
        # Listed, but no current driver raises it: if one does, NVIDIA wants to hear about it.
        layer = _LAYER.get(code, "application" if investigatory in APPLICATION_INVESTIGATIONS else "gpu_driver")
        action, severity = "watch", "warning"
    elif immediate == "IGNORE":
        # Nothing to do now; a code whose investigation goes anywhere but IGNORE is worth watching.
        quiet = investigatory in ("", "IGNORE")
        action, severity = ("ignore", "info") if quiet else ("watch", "warning")
        layer = _LAYER.get(code, "application" if investigatory in APPLICATION_INVESTIGATIONS else "hardware")
    elif immediate == "CONTACT_SUPPORT":
        action, severity, layer = "watch", "warning", _LAYER.get(code, "hardware")
    else:
        action, severity = _IMMEDIATE[immediate]
        layer = _LAYER.get(code, "application" if investigatory in APPLICATION_INVESTIGATIONS else "hardware")
    meaning = _MEANING.get(code) or (UNUSED_MEANING if description == UNUSED else description)
    escalation = _ESCALATION.get(code) or _default_escalation(action, investigatory)
    return {"meaning": meaning, "severity": severity, "action": action, "escalation": escalation, "layer": layer,
            "fatal": severity == "critical",
            "nvidia": {"mnemonic": mnemonic, "description": description, "immediate": immediate,
                       "investigatory": investigatory},
            "differs": reason}


def _default_escalation(action: str, investigatory: str) -> str:
    then = {"CONTACT_SUPPORT": "contact NVIDIA support (nvidia-bug-report)", "CHECK_APP/CUDA":
            "check the application and its CUDA stack", "INVESTIGATE_SW": "investigate the driver and firmware",
            "INVESTIGATE_LINK_SI": "investigate the link's signal integrity", "IGNORE": "no further action",
            "IGNORE (sympathetic)": "it follows another error: act on that one",
            "XID_137_FLOW": "check how the application uses NVLink (NVIDIA's Xid 137 procedure)",
            "INVESTIGATE_SW_USER": "investigate the user's software",
            "SYMPATHETIC_REPORT_SOLO": "alone, report it to NVIDIA; with other Xids, act on those",
            "WORKFLOW_NVLINK5_ERR": "decode the sub-code (NVIDIA's NVLink5 procedure)",
            "UPDATE_SWFW": "update the driver and vGPU software",
            "": "look the code up in NVIDIA's Xid catalog"}.get(investigatory, investigatory.lower())
    first = {"restart_app": "restart the application", "reset_gpu": "reset the GPU", "reboot": "reboot the machine",
             "hardware": "take the GPU out of service for hardware inspection", "watch": "watch for repeats",
             "ignore": "no action", "follow_referenced": "follow the action the message states"}[action]
    return f"{first}; repeated → {then}"[:300]


XID_CATALOG: dict[int, dict] = {code: _derived(code) for code in sorted(NVIDIA_XIDS)}

# What an Xid NVIDIA's catalog does not list gets: looked up, on our side of the boundary (the driver that raised
# it is newer than the catalog), never sent to the hardware vendor on a guess.
UNKNOWN_XID = {"meaning": f"unknown Xid: not in NVIDIA's catalog of {SOURCE['as_of']}; look it up",
               "severity": "warning", "action": "watch", "layer": "gpu_driver", "fatal": False,
               "escalation": "look the code up in NVIDIA's Xid catalog (a newer driver); repeated → run diagnostics",
               "nvidia": None, "differs": ""}


def xid_info(code: int | None) -> dict:
    """Catalog entry for ``code`` (a copy, with ``code``, ``known`` and ``catalog_version`` added)."""
    entry = XID_CATALOG.get(code) if isinstance(code, int) else None
    info = dict(entry if entry is not None else UNKNOWN_XID)
    info.update(code=code, known=entry is not None, catalog_version=CATALOG_VERSION)
    return info


# --- What a line says beyond its code -----------------------------------------------------------------------------
# NVLink5 (144–150): the driver prints the unit and whether this sub-code is fatal, e.g.
#   "NVRM: Xid (PCI:0000:b9:00): 145, RLW, nonfatal, cross-contain=0, injected=0, Link 3 (0x00000004 …)";
# NVIDIA's decode table resets the GPU for the fatal ones and ignores most non-fatal ones.
# Xid 154 states the recovery action the driver now wants: "GPU recovery action changed from 0x0 (None) to 0x1
# (GPU Reset Required)"; the values are NVML's nvmlDeviceGpuRecoveryAction_t.
NVLINK5_XIDS = frozenset(range(144, 151))
_NONFATAL = re.compile(r"\bnon-?fatal\b", re.IGNORECASE)
_FATAL = re.compile(r"\bfatal\b", re.IGNORECASE)
_LINK = re.compile(r"\bLink\s+(\d+)\b")
_RECOVERY_TO = re.compile(r"recovery action changed from\s+0x[0-9a-fA-F]+.*?\bto\s+0x([0-9a-fA-F]+)(?:\s*\(([^)]*)\))?",
                          re.IGNORECASE)
RECOVERY_ACTIONS = {  # NVML_GPU_RECOVERY_ACTION_*: (our action, severity, words)
    0: ("ignore", "info", "no recovery needed any more"),
    1: ("reset_gpu", "critical", "the driver asks for a GPU reset"),
    2: ("reboot", "critical", "the driver asks for a node reboot"),
    3: ("watch", "warning", "the driver asks to drain peer-to-peer traffic"),
    4: ("reset_gpu", "critical", "the driver asks to drain the GPU, then reset it"),
}


def xid_decode(code: int | None, text: str) -> dict | None:
    """What an Xid line says beyond its code, as the policy fields it changes (``severity``, ``action``,
    ``fatal``) and ``detail`` in words; None when the line adds nothing the code's entry does not say."""
    if code in NVLINK5_XIDS:
        link = _LINK.search(text or "")
        where = f" on link {link.group(1)}" if link else ""
        if _NONFATAL.search(text or ""):
            return {"severity": "warning", "action": "watch", "fatal": False, "detail": f"non-fatal{where}"}
        if _FATAL.search(text or ""):
            return {"severity": "critical", "action": "reset_gpu", "fatal": True, "detail": f"fatal{where}"}
        return None
    if code == 154:
        match = _RECOVERY_TO.search(text or "")
        if match is None:
            return None
        action, severity, words = RECOVERY_ACTIONS.get(int(match.group(1), 16),
                                                       ("watch", "warning", "an unknown recovery action"))
        return {"severity": severity, "action": action, "fatal": severity == "critical", "detail": words}
    return None
