from django.contrib.auth import authenticate, login, logout, update_session_auth_hash
from django.core.exceptions import ValidationError as DjangoValidationError
from django.middleware.csrf import get_token
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import ensure_csrf_cookie
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, permissions, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import AuthenticationFailed, Throttled, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.core.api.mixins import StrictQueryParamsMixin
from fleet.core.models import AuditEntry

from ..choices import Role
from ..http import client_address, enforce_csrf
from ..models import APIToken, SavedView, User
from ..services import (
    PasswordResetInvalid,
    api_token_create,
    api_token_revoke,
    login_failure_record,
    login_success_record,
    login_throttle_check,
    user_delete,
    user_password_reset_confirm,
    user_password_reset_link,
)
from .serializers import (
    APITokenCreatedSerializer,
    APITokenSerializer,
    AuditEntrySerializer,
    LoginSerializer,
    MeSerializer,
    PasswordResetConfirmSerializer,
    PasswordResetLinkSerializer,
    SavedViewSerializer,
    SessionSerializer,
    UserSerializer,
)


class AuditEntryViewSet(StrictQueryParamsMixin, viewsets.ReadOnlyModelViewSet):
    """The audit log of writes. Operators and admins may read it."""

    # Served here rather than by core, which keeps the log but knows no roles.

    queryset = AuditEntry.objects.all()
    serializer_class = AuditEntrySerializer
    read_role = Role.OPERATOR
    filterset_fields = ["action", "object_type", "object_id", "actor"]
    search_fields = ["object_repr", "actor_label"]


class UserViewSet(StrictQueryParamsMixin, viewsets.ModelViewSet):
    """User management: admins only; only a superuser may change or delete a superuser. The services
    write the audit entries (a password change shows as "[previous]" → "[changed]", never a hash)."""

    queryset = User.objects.order_by("username")
    serializer_class = UserSerializer
    read_role = Role.ADMIN
    write_role = Role.ADMIN
    filterset_fields = ["role", "is_active"]
    search_fields = ["username", "email"]

    def perform_update(self, serializer):
        user = serializer.save()
        if (user.pk == self.request.user.pk and "password" in serializer.validated_data
                and self.request.auth is None):
            # Changing your own password must not log you out of the session you did it from.
            update_session_auth_hash(self.request, user)

    def perform_destroy(self, instance):
        user_delete(user=instance, actor=self.request.user)

    @extend_schema(request=None, responses=PasswordResetLinkSerializer,
                   description="A single-use link that lets the user set a new password (valid for "
                               "PASSWORD_RESET_TIMEOUT_S, 24 h by default). The admin never sees a password; the "
                               "current one keeps working until the user sets a new one. Audited.")
    @action(detail=True, methods=["post"], url_path="password-reset")
    def password_reset(self, request, pk=None):
        link = user_password_reset_link(user=self.get_object(), actor=request.user)
        return Response(PasswordResetLinkSerializer(link).data)


class APITokenViewSet(StrictQueryParamsMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                      mixins.CreateModelMixin, viewsets.GenericViewSet):
    """Your own API tokens (admins see all). Any role may manage its own tokens."""

    serializer_class = APITokenSerializer
    write_role = Role.VIEWER

    queryset = APIToken.objects.none()  # for the schema; get_queryset scopes to the caller

    def get_queryset(self):
        qs = APIToken.objects.select_related("user")
        if getattr(self, "swagger_fake_view", False):
            return qs
        if not self.request.user.has_role(Role.ADMIN):
            qs = qs.filter(user=self.request.user)
        return qs

    @extend_schema(responses={201: APITokenCreatedSerializer})
    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        token, key = api_token_create(user=request.user, actor=request.user, **serializer.validated_data)
        token.key = key
        return Response(APITokenCreatedSerializer(token).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=APITokenSerializer)
    @action(detail=True, methods=["post"])
    def revoke(self, request, pk=None):
        token = api_token_revoke(token=self.get_object(), actor=request.user)
        return Response(APITokenSerializer(token).data)


class MeView(StrictQueryParamsMixin, APIView):
    @extend_schema(responses=MeSerializer)
    def get(self, request):
        return Response(MeSerializer(request.user).data)


@method_decorator(ensure_csrf_cookie, name="dispatch")
class SessionView(StrictQueryParamsMixin, APIView):
    """Session login for the console: GET sets the CSRF cookie, POST logs in, DELETE logs out."""

    permission_classes = [permissions.AllowAny]
    serializer_class = SessionSerializer

    @extend_schema(responses=SessionSerializer)
    def get(self, request):
        get_token(request)
        if request.user.is_authenticated:
            return Response({"authenticated": True, "user": MeSerializer(request.user).data})
        return Response({"authenticated": False, "user": None})

    @extend_schema(request=LoginSerializer, responses=SessionSerializer)
    def post(self, request):
        # APIView exempts every view from Django's CSRF middleware and DRF checks CSRF only for requests a
        # session already authenticates, so without this any web page could log a visitor in to an account
        # of the page's choosing (login CSRF). Django's check also refuses a foreign Origin header.
        enforce_csrf(request)
        serializer = LoginSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        username, password = serializer.validated_data["username"], serializer.validated_data["password"]
        address = client_address(request)
        wait = login_throttle_check(username=username, address=address)
        if wait is not None:
            raise Throttled(wait=wait, detail="Too many login attempts.")
        user = authenticate(request, username=username, password=password)
        if user is None:
            login_failure_record(username=username, address=address)
            raise AuthenticationFailed("Wrong username or password.")
        login_success_record(username=username)
        login(request, user)
        return Response({"authenticated": True, "user": MeSerializer(user).data})

    @extend_schema(request=None, responses={204: None})
    def delete(self, request):
        logout(request)
        return Response(status=status.HTTP_204_NO_CONTENT)


class PasswordResetView(StrictQueryParamsMixin, APIView):
    """Set a new password from an admin-issued reset link (no session needed). The link works once; the user's
    API tokens are revoked, as on any password change."""

    permission_classes = [permissions.AllowAny]
    serializer_class = PasswordResetConfirmSerializer

    @extend_schema(request=PasswordResetConfirmSerializer, responses={204: None})
    def post(self, request):
        enforce_csrf(request)  # as the login: no other site may post here in a visitor's name
        serializer = PasswordResetConfirmSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        wait = login_throttle_check(username=f"reset:{data['uid']}", address=client_address(request))
        if wait is not None:
            raise Throttled(wait=wait, detail="Too many attempts.")
        try:
            user_password_reset_confirm(uid=data["uid"], token=data["token"], password=data["password"])
        except PasswordResetInvalid as exc:
            raise ValidationError({"token": [str(exc)]}) from exc
        except DjangoValidationError as exc:
            raise ValidationError({"password": exc.messages}) from exc
        return Response(status=status.HTTP_204_NO_CONTENT)


class SavedViewViewSet(StrictQueryParamsMixin, viewsets.ModelViewSet):
    """Your saved views: named filter sets for the nodes and findings lists. Each user sees and changes only
    their own; any role may keep them (they change nothing in the fleet)."""

    serializer_class = SavedViewSerializer
    queryset = SavedView.objects.none()
    write_role = Role.VIEWER
    filterset_fields = ["page"]
    pagination_class = None

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return SavedView.objects.none()
        return SavedView.objects.filter(user=self.request.user)

    def perform_create(self, serializer):
        serializer.save(user=self.request.user)
