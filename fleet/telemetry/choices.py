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
    # Recorded by the server, never accepted from an agent: a report named a GPU that belongs to another node.
    GPU_UUID_CONFLICT = "gpu_uuid_conflict", "GPU uuid claimed by another node"


URGENT_EVENT_KINDS = {EventKind.XID, EventKind.SXID, EventKind.GPU_LOST, EventKind.PREEMPTION_NOTICE}


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
