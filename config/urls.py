from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.routers import SimpleRouter

from fleet.core.api.views import AuditEntryViewSet
from fleet.core.views import healthz, readyz

core_router = SimpleRouter()
core_router.register("audit", AuditEntryViewSet)

api_v1 = [
    path("", include("fleet.accounts.api.urls")),
    path("", include("fleet.inventory.api.urls")),
    path("", include("fleet.telemetry.api.urls")),
    path("", include("fleet.health.api.urls")),
    path("", include("fleet.billing.api.urls")),
    path("", include(core_router.urls)),
]

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("admin/", admin.site.urls),
    path("api/v1/", include(api_v1)),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
]
