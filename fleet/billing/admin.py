from django.contrib import admin

from .models import (
    BillingPlan,
    CheckpointPolicy,
    CostDay,
    CostProfile,
    DailyCostSnapshot,
    PreemptionRecord,
    PriceListEntry,
)


@admin.register(BillingPlan)
class BillingPlanAdmin(admin.ModelAdmin):
    list_display = ("id", "pool", "node", "billing_mode", "rate", "rate_unit", "currency", "term_end", "auto_renew")
    list_filter = ("billing_mode", "currency", "auto_renew")
    list_select_related = ("pool", "node")
    raw_id_fields = ("node",)


@admin.register(PriceListEntry)
class PriceListEntryAdmin(admin.ModelAdmin):
    list_display = ("provider", "instance_type", "billing_mode", "term_months", "rate", "rate_unit", "upfront_cost",
                    "currency")
    list_filter = ("billing_mode", "provider", "currency")
    search_fields = ("instance_type",)


@admin.register(CostProfile)
class CostProfileAdmin(admin.ModelAdmin):
    list_display = ("id", "provider", "site", "currency", "storage_monthly_per_node", "ops_hourly_rate")


@admin.register(CheckpointPolicy)
class CheckpointPolicyAdmin(admin.ModelAdmin):
    list_display = ("pool", "max_checkpoint_age_s", "applies_to_all_billing_modes")


@admin.register(PreemptionRecord)
class PreemptionRecordAdmin(admin.ModelAdmin):
    list_display = ("node", "at", "source", "notice_lead_time_s", "checkpoint_fresh", "lost_gpu_hours")
    list_filter = ("source", "checkpoint_fresh", "billing_mode")
    search_fields = ("node__hostname", "instance_type")
    raw_id_fields = ("node", "notice_event", "recorded_by")
    date_hierarchy = "at"


@admin.register(CostDay)
class CostDayAdmin(admin.ModelAdmin):
    list_display = ("day", "estimated", "closed_at")
    list_filter = ("estimated",)
    date_hierarchy = "day"


@admin.register(DailyCostSnapshot)
class DailyCostSnapshotAdmin(admin.ModelAdmin):
    list_display = ("cost_day", "pool_name", "currency", "nodes", "gpu_count", "total")
    list_filter = ("currency",)
    list_select_related = ("cost_day",)
    search_fields = ("pool_name",)
    raw_id_fields = ("cost_day", "pool")
