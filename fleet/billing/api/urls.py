from django.urls import path
from rest_framework.routers import SimpleRouter

from .trends import CostHistoryView
from .views import (
    BillingPlanViewSet,
    CheckpointPolicyViewSet,
    CostProfileViewSet,
    CostReportView,
    ExpiringReservedTermView,
    NodeBillingListView,
    NodeBillingView,
    NodePreemptedView,
    PoolWhatIfView,
    PreemptionDailyView,
    PreemptionRateView,
    PreemptionRecordViewSet,
    PriceListEntryViewSet,
)

router = SimpleRouter()
router.register("billing-plans", BillingPlanViewSet)
router.register("price-list", PriceListEntryViewSet)
router.register("cost-profiles", CostProfileViewSet)
router.register("checkpoint-policies", CheckpointPolicyViewSet)
router.register("preemptions", PreemptionRecordViewSet)

urlpatterns = [
    path("nodes/<int:pk>/billing/", NodeBillingView.as_view(), name="node-billing"),
    path("nodes/<int:pk>/preempted/", NodePreemptedView.as_view(), name="node-preempted"),
    path("node-billing/", NodeBillingListView.as_view(), name="node-billing-list"),
    path("pools/<int:pk>/what-if/", PoolWhatIfView.as_view(), name="pool-what-if"),
    path("preemption-rates/", PreemptionRateView.as_view(), name="preemption-rates"),
    path("preemption-rates/daily/", PreemptionDailyView.as_view(), name="preemption-rates-daily"),
    path("expiring-reserved-terms/", ExpiringReservedTermView.as_view(), name="expiring-reserved-terms"),
    path("cost-history/", CostHistoryView.as_view(), name="cost-history"),
    path("cost-report/", CostReportView.as_view(), name="cost-report"),
    path("cost-report.csv", CostReportView.as_view(), {"format": "csv"}, name="cost-report-csv"),
    *router.urls,
]
