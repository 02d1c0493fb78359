from django.apps import AppConfig


class HealthConfig(AppConfig):
    name = "fleet.health"
    label = "health"
    verbose_name = "Health"
