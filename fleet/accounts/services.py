import secrets
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from fleet.core.models import AuditEntry
from fleet.core.services import audit_record

from .models import APIToken, User, hash_secret

TOKEN_PREFIX = "fleet_"


def api_token_create(*, user: User, name: str, write_enabled: bool = True,
                     expires_at: datetime | None = None, actor=None) -> tuple[APIToken, str]:
    """Create a token and return it with its plain key, which is never stored or shown again."""
    key = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        token = APIToken.objects.create(
            user=user, name=name, prefix=key[: len(TOKEN_PREFIX) + 4], key_hash=hash_secret(key),
            write_enabled=write_enabled, expires_at=expires_at,
        )
        audit_record(actor=actor or user, action=AuditEntry.Action.CREATE, instance=token,
                     after={"name": name, "user": user.username, "write_enabled": write_enabled,
                            "expires_at": expires_at})
    return token, key


def api_token_revoke(*, token: APIToken, actor) -> APIToken:
    if token.revoked_at is None:
        with transaction.atomic():
            token.revoked_at = timezone.now()
            token.save(update_fields=["revoked_at"])
            audit_record(actor=actor, action=AuditEntry.Action.ACTION, instance=token, note="revoked")
    return token


def user_create(*, username: str, password: str | None, role: str, email: str = "", actor=None) -> User:
    with transaction.atomic():
        user = User(username=username, email=email, role=role, is_staff=role == "admin")
        if password:
            user.set_password(password)
        else:
            user.set_unusable_password()
        user.full_clean(exclude=["password"])
        user.save()
        audit_record(actor=actor, action=AuditEntry.Action.CREATE, instance=user,
                     after={"username": username, "role": role})
    return user
