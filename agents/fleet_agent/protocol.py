"""The facts the agent and the control plane share, as code: the vocabulary inside a report.

The JSON Schema (``fleet_agent/schema``) says what a report may look like; this module says what its words
mean to both sides. The server imports these from the installed package rather than keeping copies, and the
tests check the schema's enums against them. The Xid catalog is ``fleet_agent.xid``. Policy that only the
server applies (which clock reasons count as throttling, which events a health rule reads) lives in the
server's apps, built from the names here.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re

# --- events ------------------------------------------------------------------------------------------------
EVENT_KINDS = ("xid", "sxid", "aer", "gpu_lost", "preemption_notice", "rebalance", "maintenance", "agent_error",
               "diag")
EVENT_SEVERITIES = ("info", "warning", "critical")

# Sent at once in a report of their own rather than at the next interval: a lost GPU or an Xid stops a job, and
# what a cloud notice announces can follow within a minute or two (GCP gives 60 s before maintenance, AWS 2 min
# before a reclaim). SXids only when fatal (see `is_urgent`): a non-fatal one can wait.
URGENT_EVENT_KINDS = frozenset({"xid", "gpu_lost", "preemption_notice", "rebalance", "maintenance"})


def is_urgent(event: dict) -> bool:
    """Whether the agent sends this event at once (xid, fatal sxid, gpu_lost and every cloud notice)."""
    kind = event.get("kind")
    return kind in URGENT_EVENT_KINDS or (kind == "sxid" and event.get("severity") == "critical")


# --- cloud notices -----------------------------------------------------------------------------------------
NOTICE_KINDS = ("terminate", "stop", "hibernate", "preempt", "rebalance", "maintenance")
# Notices that end the instance; the others are advisories (the instance keeps running).
RECLAIM_NOTICE_KINDS = frozenset({"terminate", "stop", "hibernate", "preempt"})
ADVISORY_NOTICE_KINDS = frozenset(NOTICE_KINDS) - RECLAIM_NOTICE_KINDS
# The events that announce a notice: every reclaim is a `preemption_notice`, an advisory has its own kind.
NOTICE_EVENT_KINDS = frozenset({"preemption_notice", *ADVISORY_NOTICE_KINDS})


def notice_event_kind(notice_kind: str | None) -> str:
    """The event kind announcing a notice of this kind (anything not an advisory counts as a reclaim)."""
    return notice_kind if notice_kind in ADVISORY_NOTICE_KINDS else "preemption_notice"


# --- NVML clock event reasons (nvml.h ``nvmlClocksEventReason*``) --------------------------------------------
CLOCK_REASON_GPU_IDLE = 0x1
CLOCK_REASON_APPLICATIONS_CLOCKS_SETTING = 0x2
CLOCK_REASON_SW_POWER_CAP = 0x4
CLOCK_REASON_HW_SLOWDOWN = 0x8
CLOCK_REASON_SYNC_BOOST = 0x10
CLOCK_REASON_SW_THERMAL_SLOWDOWN = 0x20
CLOCK_REASON_HW_THERMAL_SLOWDOWN = 0x40
CLOCK_REASON_HW_POWER_BRAKE_SLOWDOWN = 0x80
CLOCK_REASON_DISPLAY_CLOCK_SETTING = 0x100

# A report carries the mask and these names for its set bits (`clock_event_reasons`).
CLOCK_EVENT_REASONS: tuple[tuple[int, str], ...] = (
    (CLOCK_REASON_GPU_IDLE, "GpuIdle"),
    (CLOCK_REASON_APPLICATIONS_CLOCKS_SETTING, "ApplicationsClocksSetting"),
    (CLOCK_REASON_SW_POWER_CAP, "SwPowerCap"),
    (CLOCK_REASON_HW_SLOWDOWN, "HwSlowdown"),
    (CLOCK_REASON_SYNC_BOOST, "SyncBoost"),
    (CLOCK_REASON_SW_THERMAL_SLOWDOWN, "SwThermalSlowdown"),
    (CLOCK_REASON_HW_THERMAL_SLOWDOWN, "HwThermalSlowdown"),
    (CLOCK_REASON_HW_POWER_BRAKE_SLOWDOWN, "HwPowerBrakeSlowdown"),
    (CLOCK_REASON_DISPLAY_CLOCK_SETTING, "DisplayClockSetting"),
)
CLOCK_REASON_NAMES: dict[int, str] = dict(CLOCK_EVENT_REASONS)


def decode_clock_event_reasons(mask: int | None) -> list[str] | None:
    """The names of the set bits, in bit order (unknown bits are left out)."""
    if mask is None:
        return None
    return [name for bit, name in CLOCK_EVENT_REASONS if mask & bit]


# --- software stack (the inventory's ``stack`` section) ----------------------------------------------------
STACK_FIELDS = ("driver_version", "cuda_driver_version", "cuda_toolkits", "python", "frameworks",
                "container_runtime", "nvidia_container_toolkit", "os", "kernel")
STACK_LIST_FIELDS = frozenset({"cuda_toolkits", "frameworks"})

# --- PCI addresses -----------------------------------------------------------------------------------------
_PCI_ID = re.compile(
    r"^(?:PCI:)?(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})(?:\.([0-7]))?$"
)


def normalize_pci_bus_id(text: str | None) -> str | None:
    """``PCI:0000:3b:00`` / ``0000:3b:00.0`` / ``3b:00.0`` → NVML's ``00000000:3B:00.0`` (the form a report
    carries); None when ``text`` is no PCI address."""
    if not isinstance(text, str):
        return None
    match = _PCI_ID.match(text.strip())
    if not match:
        return None
    domain, bus, device, function = match.groups()
    return f"{int(domain or '0', 16):08X}:{int(bus, 16):02X}:{int(device, 16):02X}.{function or '0'}"


# --- actions (the control plane asks, the node decides) ----------------------------------------------------
# What the reports response may ask a node to run. A node runs only the kinds its own config allows
# (`[actions] allow`), and nothing by default; see docs/executors.md.
ACTION_KINDS = ("collect_evidence", "verify", "gpu_reset", "reboot", "run_hook", "dcgm_diag")
DIAG_LEVELS = (1, 2, 3)  # dcgmi diag -r LEVEL (fleet_agent.dcgm)
# The kinds that need root through the narrow sudoers rule `install.sh --allow-actions` writes.
PRIVILEGED_ACTION_KINDS = frozenset({"gpu_reset", "reboot"})
# How an action ended, as the node reports it with its next report.
ACTION_RESULTS = ("done", "failed", "refused", "expired", "interrupted")
# A hook is a file name in the hooks directory: no path, no leading dot.
HOOK_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
MAX_GPU_INDEX = 63


def action_signing_key(credential: str) -> bytes:
    """The key both sides sign actions with: the SHA-256 of the node's credential, which the server stores (as
    the credential's hash) and the node derives, so no new secret is handed out and none travels."""
    return hashlib.sha256(credential.encode()).hexdigest().encode()


def action_signature(key: bytes, action: dict) -> str:
    """HMAC-SHA256 over the canonical JSON of what the node will act on: id, node, kind, params, not-after."""
    body = {name: action.get(name) for name in ("id", "node_id", "kind", "params", "not_after")}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hmac.new(key, canonical.encode(), hashlib.sha256).hexdigest()
