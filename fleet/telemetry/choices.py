from django.db import models


class EventKind(models.TextChoices):
    XID = "xid", "Xid"
    SXID = "sxid", "NVSwitch SXid"
    AER = "aer", "PCIe AER"
    GPU_LOST = "gpu_lost", "GPU lost"
    PREEMPTION_NOTICE = "preemption_notice", "Preemption notice"
    REBALANCE = "rebalance", "Rebalance recommendation"
    MAINTENANCE = "maintenance", "Maintenance event"
    AGENT_ERROR = "agent_error", "Agent error"
    DIAG = "diag", "DCGM diagnostic"
    # Recorded by the server, never accepted from an agent: a report named a GPU that belongs to another node.
    GPU_UUID_CONFLICT = "gpu_uuid_conflict", "GPU uuid claimed by another node"


# Kinds only the server records; an agent's report can never carry them (the shared schema refuses them).
SERVER_EVENT_KINDS = frozenset({EventKind.GPU_UUID_CONFLICT})

# The events the server acts on at once: the kinds the health rules read, so a batch carrying one has the node
# evaluated after commit. Not the agent's urgent set (`fleet_agent.protocol.URGENT_EVENT_KINDS`: what it sends
# without waiting for the interval): every SXid counts here, whatever severity the agent claimed, because the
# sxid rule judges fatality from the log text itself; rebalance and maintenance advisories do not, because no
# rule reads them (docs/decisions.md).
# A DCGM diagnostic's result (`diag`) counts too: the `dcgm_diag_failed` rule reads it, and the agent sends it with
# the outcome of the action that ran it, at once.
ACTIONABLE_EVENT_KINDS = frozenset({EventKind.XID, EventKind.SXID, EventKind.GPU_LOST, EventKind.PREEMPTION_NOTICE,
                                    EventKind.DIAG})


class EventSeverity(models.TextChoices):
    INFO = "info", "Info"
    WARNING = "warning", "Warning"
    CRITICAL = "critical", "Critical"


class NvmlStatus(models.TextChoices):
    OK = "ok", "OK"
    LIBRARY_NOT_FOUND = "library_not_found", "NVML library not found"
    DRIVER_NOT_LOADED = "driver_not_loaded", "Driver not loaded"
    NO_PERMISSION = "no_permission", "No permission"
    ERROR = "error", "Error"
