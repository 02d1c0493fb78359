"""Read-only admin: every write to remediation goes through the API, so it is validated, versioned and audited."""

from django.contrib import admin

from .models import (
    CircuitBreaker,
    EvidenceBundle,
    FindingIntake,
    Incident,
    IncidentFinding,
    NodeRemediationSettings,
    Override,
    PoolRemediationSettings,
    RemediationPolicy,
    StepRun,
    TimelineEntry,
    Workflow,
)


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Incident)
class IncidentAdmin(ReadOnlyAdmin):
    list_display = ("key", "node", "cause", "state", "waiting_on", "workflow", "current_step", "responsible_party",
                    "opened_at", "closed_at")
    list_filter = ("state", "cause_kind", "responsible_party", "dry_run")
    search_fields = ("key", "title", "node__hostname")


@admin.register(StepRun)
class StepRunAdmin(ReadOnlyAdmin):
    list_display = ("idempotency_key", "kind", "executor", "status", "waiting_on", "started_at", "finished_at")
    list_filter = ("status", "kind", "executor")
    search_fields = ("idempotency_key",)


@admin.register(TimelineEntry)
class TimelineEntryAdmin(ReadOnlyAdmin):
    list_display = ("incident", "at", "kind", "actor_label", "step_index", "message")
    list_filter = ("kind",)


@admin.register(Workflow)
class WorkflowAdmin(ReadOnlyAdmin):
    list_display = ("slug", "name", "version", "enabled", "urgent", "built_in")


@admin.register(RemediationPolicy)
class RemediationPolicyAdmin(ReadOnlyAdmin):
    list_display = ("priority", "name", "workflow", "enabled", "changed_in_version")


@admin.register(CircuitBreaker)
class CircuitBreakerAdmin(ReadOnlyAdmin):
    list_display = ("scope", "pool", "site", "state", "threshold_pct", "window_s", "min_nodes", "tripped_at")
    list_filter = ("scope", "state")


for model in (IncidentFinding, EvidenceBundle, FindingIntake, Override, PoolRemediationSettings,
              NodeRemediationSettings):
    admin.site.register(model, ReadOnlyAdmin)
