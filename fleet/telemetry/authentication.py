"""Agent authentication: `Authorization: Node <credential>` identifies exactly one node."""

from dataclasses import dataclass, field
from functools import cache

from django.db.models.signals import post_delete, post_save
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions

from fleet.core import rowsets

from .models import NodeCredential
from .secrets import hash_secret
from .services.credentials import credential_cache_put, credential_cached, credentials_invalidate


@dataclass(frozen=True)
class NodePrincipal:
    """request.user for agent calls. Not a Django user: it can do nothing outside agent endpoints."""

    node_id: int
    credential_id: int
    # The action channel (docs/executors.md): whether the node has actions waiting, and the key they are signed
    # with, read in the same statement as the credential so that a report costs no extra round trip.
    actions_open: bool = False
    action_key: str = field(default="", repr=False)
    is_authenticated: bool = True
    is_active: bool = True
    is_superuser: bool = False
    username: str = ""

    def has_role(self, role: str) -> bool:
        return False

    def __str__(self) -> str:
        return f"node:{self.node_id}"


class NodeCredentialAuthentication(authentication.BaseAuthentication):
    keyword = "node"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower().decode(errors="replace") != self.keyword:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Malformed Authorization header: expected 'Node <credential>'.")
        # Every agent request passes here: the short-lived credential cache first (services/credentials.py), then
        # plain SQL, since compiling the equivalent queryset costs more CPU than running it.
        key_hash = hash_secret(header[1].decode(errors="replace"))
        row, generation = credential_cached(key_hash)
        if row is None:
            row = rowsets.fetch_one(_credential_sql(), key_hash)
            if row is not None:
                credential_cache_put(key_hash, row, generation)
        if row is None:
            raise exceptions.AuthenticationFailed("Unknown node credential.")
        if row[2] is not None:
            raise exceptions.AuthenticationFailed("Node credential has been revoked; enrol the node again.")
        principal = NodePrincipal(node_id=row[1], credential_id=row[0], actions_open=bool(row[4]), action_key=row[3],
                                  username=f"node:{row[1]}")
        return principal, principal

    def authenticate_header(self, request):
        return "Node"


# A higher app (the executors' action channel) may tell the credential statement how to see that a node has
# work waiting for it: an SQL condition over the credential row `c`, registered in its AppConfig.ready(). Telemetry
# never imports that app; the answer rides the one statement a report already pays for.
_PENDING_FOR_NODE_SQL: list[str] = []


def pending_for_node_sql_register(condition: str, *, model=None) -> None:
    """`model` (with a `node_id`): creating one of its rows drops the node's cached credential, whose answer to
    `condition` it changes, so the work is seen on the node's next report rather than after the cache's TTL."""
    if condition not in _PENDING_FOR_NODE_SQL:
        _PENDING_FOR_NODE_SQL.append(condition)
        _credential_sql.cache_clear()
        credential_rows_sql.cache_clear()
    if model is not None:
        post_save.connect(_pending_created, sender=model, dispatch_uid=f"pending-for-node:{model._meta.label}")


def _pending_created(sender, instance, created, **kwargs):
    if created:
        credentials_invalidate(node_id=instance.node_id)


def _credential_changed(sender, instance, **kwargs):
    """A credential saved (revoked in the admin) or deleted (with its node): no process may go on trusting it."""
    credentials_invalidate(key_hashes=[instance.key_hash])


post_save.connect(_credential_changed, sender=NodeCredential, dispatch_uid="credential-cache-save")
post_delete.connect(_credential_changed, sender=NodeCredential, dispatch_uid="credential-cache-delete")


@cache
def _credential_sql() -> str:
    return f"{_credential_select()} WHERE c.key_hash = %s"


@cache
def credential_rows_sql() -> str:
    """The live credentials with after < id <= last, as `_credential_sql` reads one (the cache's warm-up)."""
    return f"{_credential_select()} WHERE c.id > %s AND c.id <= %s AND c.revoked_at IS NULL ORDER BY c.id"


def _credential_select() -> str:
    pending = " OR ".join(f"({condition})" for condition in _PENDING_FOR_NODE_SQL) or "FALSE"
    return (f"SELECT c.id, c.node_id, c.revoked_at, c.key_hash, {pending} "
            f"FROM {NodeCredential._meta.db_table} c")


class IsNodeAgent(permissions.BasePermission):
    message = "This endpoint is for node agents (Authorization: Node <credential>)."

    def has_permission(self, request, view):
        return isinstance(request.user, NodePrincipal)



class NodeCredentialScheme(OpenApiAuthenticationExtension):
    target_class = "fleet.telemetry.authentication.NodeCredentialAuthentication"
    name = "nodeAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "header", "name": "Authorization",
                "description": "`Node <credential>` from enrolment."}
