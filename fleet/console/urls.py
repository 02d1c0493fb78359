"""A catch-all for the console's client-side routes. Mounted last in config/urls.py; it never answers
for the API, the admin, static files, ops endpoints or the agent's install and download paths."""

from django.urls import re_path

from . import views

# Paths owned by the server, not the console: a prefix followed by "/" or the end of the path.
SERVER_PATHS = ("api", "admin", "static", "agent", "healthz", "readyz", "metrics", r"install\.sh")
_EXCLUDED = "|".join(SERVER_PATHS)

urlpatterns = [
    re_path(rf"^(?!(?:{_EXCLUDED})(?:/|$))(?P<path>.*)$", views.console, name="console"),
]
