from django.contrib import admin

from .models import (
    AgentEpoch,
    ChangeLogEntry,
    EnrollmentToken,
    Event,
    GPUStatus,
    NodeCredential,
    NodeStatus,
    ReceivingState,
    ReenrollmentApproval,
)


@admin.register(EnrollmentToken)
class EnrollmentTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "prefix", "provider", "pool", "delivery_form", "billing_mode", "uses", "max_uses",
                    "expires_at", "revoked_at")
    readonly_fields = ("prefix", "key_hash", "uses", "created_at")


@admin.register(NodeCredential)
class NodeCredentialAdmin(admin.ModelAdmin):
    list_display = ("node", "prefix", "created_at", "revoked_at")
    readonly_fields = ("prefix", "key_hash", "created_at")
    raw_id_fields = ("node",)


@admin.register(ReenrollmentApproval)
class ReenrollmentApprovalAdmin(admin.ModelAdmin):
    """Read-only: approvals are granted and withdrawn through the API, which audits them."""

    list_display = ("node", "approved_by", "created_at", "expires_at", "used_at", "cancelled_at")
    raw_id_fields = ("node",)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(NodeStatus)
class NodeStatusAdmin(admin.ModelAdmin):
    list_display = ("node", "received_at", "silent", "nvml_status", "gpu_count_seen", "cpu_busy_pct")
    list_filter = ("silent", "nvml_status")
    raw_id_fields = ("node",)


@admin.register(GPUStatus)
class GPUStatusAdmin(admin.ModelAdmin):
    list_display = ("gpu", "node", "collected_at", "utilization_gpu_pct", "temperature_c", "lost")
    raw_id_fields = ("gpu", "node")


@admin.register(Event)
class EventAdmin(admin.ModelAdmin):
    list_display = ("at", "node", "kind", "code", "severity", "message")
    list_filter = ("kind", "severity")
    search_fields = ("node__hostname", "message")
    raw_id_fields = ("node", "gpu")


@admin.register(ChangeLogEntry)
class ChangeLogEntryAdmin(admin.ModelAdmin):
    list_display = ("at", "node", "field", "summary")
    search_fields = ("node__hostname", "field")
    raw_id_fields = ("node",)


@admin.register(AgentEpoch)
class AgentEpochAdmin(admin.ModelAdmin):
    list_display = ("node", "instance_id", "last_sequence", "first_seen", "updated_at")
    search_fields = ("node__hostname", "instance_id")
    raw_id_fields = ("node",)


class _ReadOnlyHistoryAdmin(admin.ModelAdmin):
    """History rows are written by ingestion and the rollup task only."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


# The history tables (NodeSample, GPUSample and their 5-minute rollups) have a composite primary key (owner,
# bucket), which the admin cannot show; the node and GPU charts in the console read them.


@admin.register(ReceivingState)
class ReceivingStateAdmin(_ReadOnlyHistoryAdmin):
    """Written by the silence sweep only."""

    list_display = ("swept_at", "newest_report_at", "gap_started_at", "gap_ended_at")
