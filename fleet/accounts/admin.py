from django.contrib import admin
from django.contrib.auth.admin import UserAdmin

from .models import APIToken, SavedView, User


@admin.register(User)
class FleetUserAdmin(UserAdmin):
    list_display = ("username", "email", "role", "is_active", "is_superuser", "last_login")
    list_filter = ("role", "is_active", "is_superuser")
    fieldsets = UserAdmin.fieldsets + (("Fleet", {"fields": ("role",)}),)

    # Only a superuser may change or delete a superuser, here as in the API.
    def has_change_permission(self, request, obj=None):
        if obj is not None and obj.is_superuser and not request.user.is_superuser:
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        if obj is not None and obj.is_superuser and not request.user.is_superuser:
            return False
        return super().has_delete_permission(request, obj)


@admin.register(APIToken)
class APITokenAdmin(admin.ModelAdmin):
    list_display = ("name", "user", "prefix", "write_enabled", "expires_at", "revoked_at", "last_used_at")
    list_filter = ("write_enabled",)
    search_fields = ("name", "user__username", "prefix")
    readonly_fields = ("prefix", "key_hash", "last_used_at", "created_at")


@admin.register(SavedView)
class SavedViewAdmin(admin.ModelAdmin):
    list_display = ("name", "user", "page", "query", "updated_at")
    list_filter = ("page",)
    search_fields = ("name", "user__username")
    readonly_fields = ("created_at", "updated_at")
