from django.urls import path
from rest_framework.routers import SimpleRouter

from .trends import FleetUtilisationView, XidDailyView
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

# Every agent calls these every interval: config.urls lists them before all other API routes, so resolving
# them costs a couple of pattern matches instead of walking every viewset's routes.
agent_urlpatterns = [
    path("agent/reports", ReportsView.as_view(), name="agent-reports"),
    path("agent/enroll", EnrollView.as_view(), name="agent-enroll"),
]

urlpatterns = [
    path("fleet/summary/", FleetSummaryView.as_view(), name="fleet-summary"),
    path("fleet/utilisation/", FleetUtilisationView.as_view(), name="fleet-utilisation"),
    path("fleet/xid-daily/", XidDailyView.as_view(), name="fleet-xid-daily"),
    *router.urls,
]
