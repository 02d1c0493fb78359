from django.urls import path
from rest_framework.routers import SimpleRouter

from .views import DeliveryViewSet, InboundView, IntegrationViewSet, RoutingRuleViewSet, TicketViewSet

router = SimpleRouter()
router.register("integrations", IntegrationViewSet, basename="integration")
router.register("integration-rules", RoutingRuleViewSet, basename="integration-rule")
router.register("deliveries", DeliveryViewSet, basename="delivery")
router.register("tickets", TicketViewSet, basename="ticket")

urlpatterns = [
    path("inbound/<str:inbound_id>/", InboundView.as_view(), name="integration-inbound"),
    *router.urls,
]
