from django.contrib import admin
from django.urls import include, path

from fleet.accounts.views import admin_login
from fleet.core.api.docs import APIDocsView, APISchemaView
from fleet.core.views import healthz, readyz
from fleet.telemetry.api.urls import agent_urlpatterns
from fleet.telemetry.views import agent_file, agent_index, install_script, metrics_view

api_v1 = [
    path("", include(agent_urlpatterns)),
    path("", include("fleet.accounts.api.urls")),
    path("", include("fleet.inventory.api.urls")),
    path("", include("fleet.telemetry.api.urls")),
    path("", include("fleet.health.api.urls")),
    path("", include("fleet.billing.api.urls")),
    path("", include("fleet.remediation.api.urls")),
    path("", include("fleet.integrations.api.urls")),
    path("", include("fleet.executors.api.urls")),
]

urlpatterns = [
    path("api/v1/", include(api_v1)),
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("metrics", metrics_view, name="metrics"),
    path("install.sh", install_script, name="install-script"),
    path("agent/files/", agent_index, name="agent-index"),
    path("agent/files/<str:name>", agent_file, name="agent-file"),
    path("admin/login/", admin_login, name="admin-login"),
    path("admin/", admin.site.urls),
    path("api/schema/", APISchemaView.as_view(), name="schema"),
    path("api/docs/", APIDocsView.as_view(url_name="schema"), name="api-docs"),
    path("", include("fleet.console.urls")),
]

# Under /api/ these answer in the API's error shape; elsewhere Django's own pages.
handler400 = "fleet.core.api.http.bad_request"
handler404 = "fleet.core.api.http.not_found"
