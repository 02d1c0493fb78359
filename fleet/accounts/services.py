import hashlib
import logging
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.password_validation import validate_password
from django.contrib.auth.tokens import default_token_generator
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone
from django.utils.encoding import force_bytes, force_str
from django.utils.http import urlsafe_base64_decode, urlsafe_base64_encode

from fleet.core import ratelimit
from fleet.core.audit import SECRET_AFTER, SECRET_BEFORE, audit_context
from fleet.core.models import AuditEntry
from fleet.core.secrets import new_secret
from fleet.core.services import audit_record, revoke

from .choices import Role
from .models import APIToken, User

TOKEN_PREFIX = "fleet_"
_UNSET = object()


def api_token_default_expiry(*, now: datetime | None = None) -> datetime:
    return (now or timezone.now()) + timedelta(days=settings.API_TOKEN_DEFAULT_TTL_DAYS)


def api_token_create(*, user: User, name: str, write_enabled: bool = False,
                     expires_at: datetime | None | object = _UNSET, actor=None) -> tuple[APIToken, str]:
    """Create a token and return it with its plain key, which is never stored or shown again.

    Least privilege by default: read-only, expiring after API_TOKEN_DEFAULT_TTL_DAYS. Passing
    `expires_at=None` explicitly makes a token that never expires (the API does not offer that)."""
    if expires_at is _UNSET:
        expires_at = api_token_default_expiry()
    key, prefix, key_hash = new_secret(TOKEN_PREFIX)
    with transaction.atomic(), audit_context(actor=actor or user):
        token = APIToken.objects.create(
            user=user, name=name, prefix=prefix, key_hash=key_hash,
            write_enabled=write_enabled, expires_at=expires_at,
        )
    return token, key


def api_token_revoke(*, token: APIToken, actor) -> APIToken:
    # A superuser's key is the superuser's: an admin who could revoke it could lock the break-glass account's
    # automation out. Only a superuser (or the owner) may.
    if getattr(actor, "pk", None) != token.user_id:
        _require_may_change(user=token.user, actor=actor)
    return revoke(instance=token, actor=actor)


def api_tokens_revoke_for_user(*, user: User, actor, reason: str) -> int:
    """Revoke every live token of `user` (password changed, account deactivated): a key copied before the
    change must not outlive it. Each revocation is audited (by the model hooks) with its reason."""
    now = timezone.now()
    tokens = list(APIToken.objects.filter(user=user, revoked_at__isnull=True))
    with audit_context(actor=actor, note=f"revoked: {reason}"):
        for token in tokens:
            token.revoked_at = now
            token.save(update_fields=["revoked_at"])
    return len(tokens)


def _require_may_change(*, user: User, actor) -> None:
    # An admin could otherwise take over the superuser (new password, deactivation) and with it the
    # Django admin and every permission; only a superuser may touch one.
    if user.is_superuser and not getattr(actor, "is_superuser", False):
        raise PermissionDenied("Only a superuser may change or delete a superuser.")


def user_create(*, username: str, password: str | None, role: str = Role.VIEWER, email: str = "",
                is_active: bool = True, actor=None) -> User:
    with transaction.atomic(), audit_context(actor=actor):
        user = User(username=username, email=email, role=role, is_active=is_active, is_staff=role == Role.ADMIN)
        if password:
            user.set_password(password)
        else:
            user.set_unusable_password()
        user.full_clean(exclude=["password"])
        user.save()
    return user


_USER_FIELDS = ("username", "email", "role", "is_active")


def user_update(*, user: User, actor, password: str | None = None, **changes) -> User:
    """Change a user's profile fields and/or password, audited field by field.

    A new password or a deactivation revokes the user's API tokens (sessions end by themselves: Django ties
    a session to the password hash, and refuses inactive users)."""
    unknown = set(changes) - set(_USER_FIELDS)
    if unknown:
        raise TypeError(f"user_update() got unexpected fields: {', '.join(sorted(unknown))}")
    _require_may_change(user=user, actor=actor)
    if getattr(actor, "pk", None) == user.pk and (
            changes.get("is_active") is False or ("role" in changes and changes["role"] != user.role)):
        # The console hides these on your own row; the API refuses them too, so an admin cannot lock the
        # deployment out of user management by accident. Another admin can.
        raise PermissionDenied("You cannot deactivate yourself or change your own role; ask another admin.")
    before, after = {}, {}
    for field, value in changes.items():
        if getattr(user, field) != value:
            before[field], after[field] = getattr(user, field), value
            setattr(user, field, value)
    if password:
        before["password"], after["password"] = SECRET_BEFORE, SECRET_AFTER
        user.set_password(password)
    if not after:
        return user
    user.is_staff = user.role == Role.ADMIN or user.is_superuser
    reasons = []
    if password:
        reasons.append("password changed")
    if after.get("is_active") is False:
        reasons.append("user deactivated")
    with transaction.atomic():
        if reasons:
            # Before the save, so the revocations carry the actor (the post-save safety net then finds none).
            api_tokens_revoke_for_user(user=user, actor=actor, reason=" and ".join(reasons))
        user.full_clean(exclude=["password"])
        with audit_context(actor=actor, note="; ".join(reasons)):
            user.save()
    return user


def user_delete(*, user: User, actor) -> None:
    _require_may_change(user=user, actor=actor)
    if getattr(actor, "pk", None) == user.pk:
        raise PermissionDenied("You cannot delete your own account; ask another admin.")
    with transaction.atomic(), audit_context(actor=actor):
        user.delete()


# --- Password reset links ------------------------------------------------------------------------------
# An admin never sets or sees another user's password: they issue a link, hand it over (chat, phone), and the
# user picks the password. The link carries Django's signed token, which is bound to the user's password hash
# and last login, so it works once (setting the password, or a login, spends it) and for
# PASSWORD_RESET_TIMEOUT seconds. Nothing is stored; the console shows the link once.


class PasswordResetInvalid(Exception):
    """The link is malformed, expired, already used, or for a user who cannot log in."""


def user_password_reset_link(*, user: User, actor) -> dict:
    """A console path that lets `user` set a new password, and when it stops working (audited, never the token)."""
    _require_may_change(user=user, actor=actor)
    if not user.is_active:
        raise PermissionDenied("This user is deactivated; activate the account before resetting its password.")
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    token = default_token_generator.make_token(user)
    expires_at = timezone.now() + timedelta(seconds=settings.PASSWORD_RESET_TIMEOUT)
    audit_record(actor=actor, action=AuditEntry.Action.ACTION, instance=user,
                 note=f"password reset link issued (valid until {expires_at:%Y-%m-%d %H:%M} UTC)")
    # In the fragment, so the token never reaches a server log when the user opens the page.
    return {"path": f"/reset-password#uid={uid}&token={token}", "expires_at": expires_at}


def _user_from_uid(uid: str) -> User | None:
    try:
        pk = int(force_str(urlsafe_base64_decode(uid)))
    except (TypeError, ValueError, OverflowError, UnicodeDecodeError):
        return None
    return User.objects.filter(pk=pk, is_active=True).first()


def user_password_reset_confirm(*, uid: str, token: str, password: str) -> User:
    """Set the password of the link's user. Raises PasswordResetInvalid for a bad link and Django's
    ValidationError for a weak password; the user's API tokens are revoked as on any password change."""
    user = _user_from_uid(uid)
    if user is None or not default_token_generator.check_token(user, token):
        raise PasswordResetInvalid("This reset link is invalid, expired or already used; ask an admin for a new one.")
    validate_password(password, user=user)
    return user_update(user=user, actor=user, password=password)


# --- Login throttling -----------------------------------------------------------------------------
# Checked before a password is hashed, so a flood of wrong passwords costs a couple of cache round trips per
# request instead of a PBKDF2 run each (≈0.35 s of CPU that agents' ingest then waits for).
#
# * Per source address: at most LOGIN_RATE_LIMIT attempts (a fixed window, as the agents' limiter).
# * Per username, from any address: after LOGIN_LOCKOUT_FAILURES failures in a row, each further attempt
#   waits LOGIN_LOCKOUT_BASE_S, doubling with every failure after that, up to LOGIN_LOCKOUT_MAX_S. A success
#   clears it; so does `manage.py unlock_login`. Failures are forgotten an hour after the first.
#
# The counters live in the shared cache (Redis in production). If the cache is down, logins are let through
# and logged: the throttle protects capacity, it is not what keeps a wrong password out.

_FAILURE_MEMORY_S = 3600
_logger = logging.getLogger("fleet.accounts.login")


_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _parse_rate(rate: str) -> tuple[int | None, int]:
    """DRF's rate syntax (`20/min`, `100/hour`); blank turns the limit off."""
    if not rate:
        return None, 60
    num, period = rate.split("/")
    return int(num), _PERIODS[period.strip()[0]]


def _username_key(username: str) -> str:
    digest = hashlib.sha256(username.strip().lower().encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"login:user:{digest}"


def _cache_safely(what: str, call, default=None):
    try:
        return call()
    except Exception as exc:  # any cache outage: fail open, loudly
        _logger.warning("login throttle unavailable (%s): %s: %s", what, exc.__class__.__name__, exc)
        return default


def login_throttle_check(*, username: str, address: str) -> float | None:
    """Seconds the caller must wait before this login attempt may be checked, or None to go ahead.

    Counts the attempt against the address; a refusal that starts a throttled window is audited once."""
    num, window = _parse_rate(settings.LOGIN_RATE_LIMIT)
    if num is not None:
        count = _cache_safely("address", lambda: ratelimit.hit(f"login:addr:{address}", window), 0)
        if count > num:
            if count == num + 1:
                audit_record(actor=f"anonymous@{address}", action=AuditEntry.Action.ACTION,
                             object_type="accounts.login", object_id=address[:64],
                             note=f"login throttled: more than {num} attempts in {window} s from {address}")
            return max(1.0, ratelimit.seconds_left(window))
    locked_until = _cache_safely("username", lambda: cache.get(f"{_username_key(username)}:locked"))
    if locked_until is not None:
        wait = locked_until - time.time()
        if wait > 0:
            return wait
    return None


def login_failure_record(*, username: str, address: str) -> float | None:
    """Count a failed login for `username`; returns the lockout it started, if any (audited)."""
    key = _username_key(username)

    def count() -> int:
        if cache.add(f"{key}:failures", 1, timeout=_FAILURE_MEMORY_S):
            return 1
        try:
            return cache.incr(f"{key}:failures")
        except ValueError:  # expired between add and incr
            cache.add(f"{key}:failures", 1, timeout=_FAILURE_MEMORY_S)
            return 1

    failures = _cache_safely("failure", count, 0)
    _logger.info("failed login for %r from %s (%d in a row)", username[:150], address, failures)
    threshold = settings.LOGIN_LOCKOUT_FAILURES
    if threshold <= 0 or failures < threshold:
        return None
    duration = min(settings.LOGIN_LOCKOUT_BASE_S * 2 ** min(failures - threshold, 30), settings.LOGIN_LOCKOUT_MAX_S)
    _cache_safely("lock", lambda: cache.set(f"{key}:locked", time.time() + duration, timeout=int(duration) + 1))
    audit_record(actor=f"anonymous@{address}", action=AuditEntry.Action.ACTION, object_type="accounts.login",
                 object_id=username[:64],
                 note=f"login locked for {duration:g} s after {failures} failed attempts (last from {address})")
    return duration


def login_success_record(*, username: str) -> None:
    key = _username_key(username)
    _cache_safely("success", lambda: cache.delete_many([f"{key}:failures", f"{key}:locked"]))


def login_lockout_clear(*, username: str, actor) -> None:
    login_success_record(username=username)
    audit_record(actor=actor, action=AuditEntry.Action.ACTION, object_type="accounts.login",
                 object_id=username[:64], note="login lockout cleared")
