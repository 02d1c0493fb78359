from django.contrib.auth import authenticate, login, logout
from django.middleware.csrf import get_token
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import ensure_csrf_cookie
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, permissions, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.core.api.mixins import AuditedModelViewSet
from fleet.core.models import AuditEntry

from ..choices import Role
from ..models import APIToken, User
from ..services import api_token_create, api_token_revoke
from .serializers import (
    APITokenCreatedSerializer,
    APITokenSerializer,
    AuditEntrySerializer,
    LoginSerializer,
    MeSerializer,
    SessionSerializer,
    UserSerializer,
)


class AuditEntryViewSet(viewsets.ReadOnlyModelViewSet):
    """The audit log of writes. Operators and admins may read it."""

    # Served here rather than by core, which keeps the log but knows no roles.

    queryset = AuditEntry.objects.all()
    serializer_class = AuditEntrySerializer
    read_role = Role.OPERATOR
    filterset_fields = ["action", "object_type", "object_id", "actor"]
    search_fields = ["object_repr", "actor_label"]


class UserViewSet(AuditedModelViewSet):
    """User management: admins only."""

    queryset = User.objects.order_by("username")
    serializer_class = UserSerializer
    read_role = Role.ADMIN
    write_role = Role.ADMIN
    filterset_fields = ["role", "is_active"]
    search_fields = ["username", "email"]


class APITokenViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
                      viewsets.GenericViewSet):
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


class MeView(APIView):
    @extend_schema(responses=MeSerializer)
    def get(self, request):
        return Response(MeSerializer(request.user).data)


@method_decorator(ensure_csrf_cookie, name="dispatch")
class SessionView(APIView):
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
        serializer = LoginSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        user = authenticate(request, **serializer.validated_data)
        if user is None:
            raise AuthenticationFailed("Wrong username or password.")
        login(request, user)
        return Response({"authenticated": True, "user": MeSerializer(user).data})

    @extend_schema(request=None, responses={204: None})
    def delete(self, request):
        logout(request)
        return Response(status=status.HTTP_204_NO_CONTENT)
