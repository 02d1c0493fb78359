from django.apps import AppConfig


class ExecutorsConfig(AppConfig):
    name = "fleet.executors"
    label = "executors"
    verbose_name = "Executors"

    def ready(self):
        from .backends import register_all

        register_all()
