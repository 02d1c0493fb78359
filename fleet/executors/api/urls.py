from rest_framework.routers import SimpleRouter

from .views import (
    AgentActionViewSet,
    BootstrapRunViewSet,
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

urlpatterns = router.urls
