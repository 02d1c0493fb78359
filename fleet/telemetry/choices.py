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


URGENT_EVENT_KINDS = {EventKind.XID, EventKind.SXID, EventKind.GPU_LOST, EventKind.PREEMPTION_NOTICE}

# Cloud notice kinds (`cloud.notice.kind`) that end the instance; rebalance and maintenance are advisories.
RECLAIM_NOTICE_KINDS = {"terminate", "stop", "hibernate", "preempt"}


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
