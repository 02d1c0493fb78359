from django.urls import path
from rest_framework.routers import SimpleRouter

from .trends import FindingTrendView
from .views import (
    FindingViewSet,
    NodeEvidenceView,
    NodeTriageView,
    RuleOverrideViewSet,
    RuleViewSet,
    XidPolicyViewSet,
)

router = SimpleRouter()
router.register("findings", FindingViewSet, basename="finding")
router.register("rules", RuleViewSet)
router.register("rule-overrides", RuleOverrideViewSet)
router.register("xid-policies", XidPolicyViewSet)

urlpatterns = [
    path("fleet/findings-trend/", FindingTrendView.as_view(), name="fleet-findings-trend"),
    path("nodes/<int:node_id>/triage/", NodeTriageView.as_view(), name="node-triage"),
    path("nodes/<int:node_id>/evidence/", NodeEvidenceView.as_view(), name="node-evidence"),
    *router.urls,
]
