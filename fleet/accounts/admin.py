from django.contrib import admin
from django.contrib.auth.admin import UserAdmin

from .models import APIToken, User


@admin.register(User)
class FleetUserAdmin(UserAdmin):
    list_display = ("username", "email", "role", "is_active", "is_superuser", "last_login")
    list_filter = ("role", "is_active", "is_superuser")
    fieldsets = UserAdmin.fieldsets + (("Fleet", {"fields": ("role",)}),)


@admin.register(APIToken)
class APITokenAdmin(admin.ModelAdmin):
    list_display = ("name", "user", "prefix", "write_enabled", "expires_at", "revoked_at", "last_used_at")
    list_filter = ("write_enabled",)
    search_fields = ("name", "user__username", "prefix")
    readonly_fields = ("prefix", "key_hash", "last_used_at", "created_at")
