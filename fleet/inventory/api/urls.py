from rest_framework.routers import SimpleRouter

from .views import (
    BaselineViewSet,
    BoundaryOverrideViewSet,
    GPUViewSet,
    NodeViewSet,
    PoolViewSet,
    ProviderViewSet,
    SiteViewSet,
)

router = SimpleRouter()
router.register("providers", ProviderViewSet)
router.register("sites", SiteViewSet)
router.register("pools", PoolViewSet)
router.register("nodes", NodeViewSet)
router.register("gpus", GPUViewSet)
router.register("baselines", BaselineViewSet)
router.register("boundary-overrides", BoundaryOverrideViewSet)

urlpatterns = router.urls
