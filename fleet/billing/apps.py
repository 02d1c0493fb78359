from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "fleet.billing"
    label = "billing"
    verbose_name = "Billing"
