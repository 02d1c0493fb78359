from django.urls import path
from rest_framework.routers import SimpleRouter

from .views import (
    AgentActionViewSet,
    BootstrapRunViewSet,
    ExecutorCallbackView,
    ExecutorConfigViewSet,
    SSHActionViewSet,
    SSHHostViewSet,
    SSHKeyViewSet,
)

router = SimpleRouter()
router.register("agent-actions", AgentActionViewSet)
router.register("executor-configs", ExecutorConfigViewSet)
router.register("ssh-keys", SSHKeyViewSet)
router.register("ssh-hosts", SSHHostViewSet)
router.register("ssh-actions", SSHActionViewSet)
router.register("ssh-bootstraps", BootstrapRunViewSet)

urlpatterns = [
    path("executor-callbacks/<str:public_id>", ExecutorCallbackView.as_view(), name="executor-callback"),
    *router.urls,
]
