from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "fleet.accounts"
    label = "accounts"
    verbose_name = "Accounts"

    def ready(self):
        from . import (
            schema,  # noqa: F401  (registers the OpenAPI auth extension)
            signals,  # noqa: F401  (connects the token revocation on credential changes)
        )
