from django.contrib import admin

from .models import Finding, HealthCondition, Rule, RuleOverride, XidPolicy


@admin.register(Rule)
class RuleAdmin(admin.ModelAdmin):
    list_display = ("slug", "step", "layer", "severity", "duration_s", "clear_hold_s", "enabled")
    list_filter = ("step", "layer", "severity", "enabled")
    search_fields = ("slug", "title")
    readonly_fields = ("slug", "title", "description", "step", "layer", "scope", "updated_at")


@admin.register(RuleOverride)
class RuleOverrideAdmin(admin.ModelAdmin):
    list_display = ("rule", "pool", "enabled", "duration_s", "clear_hold_s", "updated_at")
    list_filter = ("rule",)


@admin.register(XidPolicy)
class XidPolicyAdmin(admin.ModelAdmin):
    list_display = ("code", "meaning", "severity", "action", "layer", "changed_in_version")
    list_filter = ("severity", "action", "layer")
    # Edits go through the API so they bump the table version and are audited.
    readonly_fields = ("code", "meaning", "severity", "action", "layer", "escalation", "changed_in_version",
                       "updated_at")


@admin.register(HealthCondition)
class HealthConditionAdmin(admin.ModelAdmin):
    list_display = ("rule", "node", "subject", "first_true_at", "first_false_at")
    raw_id_fields = ("node", "gpu")


@admin.register(Finding)
class FindingAdmin(admin.ModelAdmin):
    list_display = ("rule", "node", "subject", "state", "severity", "step", "layer", "responsible_party",
                    "opened_at", "resolved_at")
    list_filter = ("state", "severity", "step", "layer", "responsible_party")
    search_fields = ("summary", "node__hostname")
    raw_id_fields = ("node", "gpu")
