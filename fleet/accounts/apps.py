from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "fleet.accounts"
    label = "accounts"
    verbose_name = "Accounts"

    def ready(self):
        from fleet.core.audit import audit_register

        from . import (
            schema,  # noqa: F401  (registers the OpenAPI auth extension)
            signals,  # noqa: F401  (connects the token revocation on credential changes)
        )
        from .models import APIToken, SavedView, User

        # Bookkeeping written on every sign-in or token use is no change worth an entry.
        audit_register(User, ignore=("last_login",))
        audit_register(APIToken, ignore=("last_used_at",))
        audit_register(SavedView)
