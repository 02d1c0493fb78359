from datetime import datetime

from django.db import transaction

from fleet.core.audit import audit_context
from fleet.core.secrets import new_secret
from fleet.core.services import revoke

from .models import APIToken, User

TOKEN_PREFIX = "fleet_"


def api_token_create(*, user: User, name: str, write_enabled: bool = True,
                     expires_at: datetime | None = None, actor=None) -> tuple[APIToken, str]:
    """Create a token and return it with its plain key, which is never stored or shown again."""
    key, prefix, key_hash = new_secret(TOKEN_PREFIX)
    with transaction.atomic(), audit_context(actor=actor or user):
        token = APIToken.objects.create(
            user=user, name=name, prefix=prefix, key_hash=key_hash,
            write_enabled=write_enabled, expires_at=expires_at,
        )
    return token, key


def api_token_revoke(*, token: APIToken, actor) -> APIToken:
    return revoke(instance=token, actor=actor)


def user_create(*, username: str, password: str | None, role: str, email: str = "", actor=None) -> User:
    with transaction.atomic(), audit_context(actor=actor):
        user = User(username=username, email=email, role=role, is_staff=role == "admin")
        if password:
            user.set_password(password)
        else:
            user.set_unusable_password()
        user.full_clean(exclude=["password"])
        user.save()
    return user
