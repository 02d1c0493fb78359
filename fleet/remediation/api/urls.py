from django.urls import path
from rest_framework.routers import SimpleRouter

from .scorecard import ProviderScorecardView
from .views import (
    CircuitBreakerViewSet,
    ExecutorListView,
    FindingIntakeViewSet,
    IncidentViewSet,
    NodeIncidentsView,
    NodeRemediationSettingsViewSet,
    OverrideViewSet,
    PoolRemediationSettingsViewSet,
    RemediationPolicyViewSet,
    WorkflowViewSet,
)

router = SimpleRouter()
router.register("incidents", IncidentViewSet, basename="incident")
router.register("workflows", WorkflowViewSet)
router.register("remediation-policies", RemediationPolicyViewSet)
router.register("pool-remediation", PoolRemediationSettingsViewSet)
router.register("node-remediation", NodeRemediationSettingsViewSet)
router.register("circuit-breakers", CircuitBreakerViewSet)
router.register("overrides", OverrideViewSet)
router.register("finding-intakes", FindingIntakeViewSet)

urlpatterns = [
    path("provider-scorecard/", ProviderScorecardView.as_view(), name="provider-scorecard"),
    path("executors/", ExecutorListView.as_view(), name="executor-list"),
    path("nodes/<int:node_id>/incidents/", NodeIncidentsView.as_view(), name="node-incidents"),
    *router.urls,
]
