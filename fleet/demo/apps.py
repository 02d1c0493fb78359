from django.apps import AppConfig


class DemoConfig(AppConfig):
    """The demo fleet and the one-terminal stack behind `make run`: the only app that may import every other."""

    name = "fleet.demo"
    label = "demo"
    verbose_name = "Demo fleet"
