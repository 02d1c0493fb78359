from django.urls import path
from rest_framework.routers import SimpleRouter

from .views import (
    EnrollmentTokenViewSet,
    EnrollView,
    EventViewSet,
    FleetSummaryView,
    GPUTelemetryViewSet,
    NodeTelemetryViewSet,
    ReportsView,
)

router = SimpleRouter()
router.register("enrollment-tokens", EnrollmentTokenViewSet)
router.register("events", EventViewSet)
router.register("nodes", NodeTelemetryViewSet, basename="node-telemetry")
router.register("gpus", GPUTelemetryViewSet, basename="gpu-telemetry")

urlpatterns = [
    path("agent/enroll", EnrollView.as_view(), name="agent-enroll"),
    path("agent/reports", ReportsView.as_view(), name="agent-reports"),
    path("fleet/summary/", FleetSummaryView.as_view(), name="fleet-summary"),
    *router.urls,
]
