from django.urls import path
from rest_framework.routers import SimpleRouter

from .views import (
    APITokenViewSet,
    AuditEntryViewSet,
    MeView,
    PasswordResetView,
    SavedViewViewSet,
    SessionView,
    UserViewSet,
)

router = SimpleRouter()
router.register("users", UserViewSet, basename="user")
router.register("tokens", APITokenViewSet, basename="apitoken")
router.register("audit", AuditEntryViewSet)
router.register("saved-views", SavedViewViewSet, basename="savedview")

urlpatterns = [
    path("me/", MeView.as_view(), name="me"),
    path("auth/session/", SessionView.as_view(), name="session"),
    path("auth/password-reset/", PasswordResetView.as_view(), name="password-reset"),
    *router.urls,
]
