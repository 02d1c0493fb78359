from django.contrib import admin

from .models import GPU, Baseline, BoundaryOverride, Node, Pool, Provider, Site, SoftwareStack


@admin.register(Provider)
class ProviderAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "cloud", "support_contact")
    list_filter = ("kind", "cloud")
    search_fields = ("name", "slug")
    prepopulated_fields = {"slug": ("name",)}


@admin.register(Site)
class SiteAdmin(admin.ModelAdmin):
    list_display = ("name", "provider", "region_code", "country", "icp_filing_required")
    list_filter = ("country", "icp_filing_required")
    search_fields = ("name", "region_code")


@admin.register(Pool)
class PoolAdmin(admin.ModelAdmin):
    list_display = ("name", "provider", "site", "delivery_form", "billing_mode", "instance_type", "gpu_model")
    list_filter = ("delivery_form", "billing_mode", "provider")
    search_fields = ("name", "instance_type")


class GPUInline(admin.TabularInline):
    model = GPU
    extra = 0
    fields = ("index", "uuid", "model", "serial", "pci_bus_id", "present")
    readonly_fields = fields


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ("hostname", "provider", "pool", "delivery_form", "billing_mode", "state", "expected_gpu_count")
    list_filter = ("state", "delivery_form", "billing_mode", "provider")
    search_fields = ("hostname", "machine_id", "instance_id")
    list_select_related = ("provider", "pool")
    raw_id_fields = ("current_stack",)
    inlines = [GPUInline]


@admin.register(GPU)
class GPUAdmin(admin.ModelAdmin):
    list_display = ("uuid", "node", "index", "model", "serial", "present")
    list_filter = ("model", "present")
    search_fields = ("uuid", "serial", "node__hostname")
    raw_id_fields = ("node",)


@admin.register(SoftwareStack)
class SoftwareStackAdmin(admin.ModelAdmin):
    list_display = ("node", "collected_at", "driver_version", "cuda_driver_version", "kernel")
    search_fields = ("node__hostname", "driver_version")
    raw_id_fields = ("node",)


@admin.register(Baseline)
class BaselineAdmin(admin.ModelAdmin):
    list_display = ("name", "pool", "node", "driver_version", "cuda_driver_version")
    raw_id_fields = ("node",)


@admin.register(BoundaryOverride)
class BoundaryOverrideAdmin(admin.ModelAdmin):
    list_display = ("__str__", "provider", "delivery_form", "node", "layer", "owner")
    list_filter = ("layer", "owner")
    raw_id_fields = ("node",)
