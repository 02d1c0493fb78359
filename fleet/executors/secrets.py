"""Secrets this app must be able to use again (SSH private keys, cloud and webhook credentials): encrypted at
rest with Fernet (AES-128-CBC + HMAC-SHA256) under keys from the environment, never stored or shown in clear.

`FLEET_SECRETS_KEY` holds one or more Fernet keys separated by commas: the first encrypts, every one decrypts,
so a key is rotated by putting the new one first and re-saving (`manage.py fleet_ssh rotate-secrets`). It is
deliberately not derived from Django's SECRET_KEY: rotating that one must not make every stored key unreadable.
"""

from __future__ import annotations

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

from fleet.core.api.errors import DomainError


class SecretsUnavailable(DomainError):
    status_code = 409
    default_code = "secrets_key_missing"


def _fernet() -> MultiFernet:
    raw = [part.strip() for part in (settings.FLEET_SECRETS_KEY or "").split(",") if part.strip()]
    if not raw:
        raise SecretsUnavailable("This server has no FLEET_SECRETS_KEY, so it cannot store or use secrets; set it "
                                 "(see docs/executors.md).", code="secrets_key_missing")
    try:
        return MultiFernet([Fernet(key.encode()) for key in raw])
    except ValueError:
        raise SecretsUnavailable("FLEET_SECRETS_KEY is not a list of Fernet keys (32 url-safe base64 bytes "
                                 "each).", code="secrets_key_invalid") from None


def encrypt(plain: str | bytes) -> bytes:
    data = plain.encode() if isinstance(plain, str) else plain
    return _fernet().encrypt(data)


def decrypt(token: bytes | memoryview) -> bytes:
    try:
        return _fernet().decrypt(bytes(token))
    except InvalidToken:
        raise SecretsUnavailable("A stored secret cannot be decrypted with FLEET_SECRETS_KEY (a key was removed "
                                 "before its secrets were re-encrypted).", code="secrets_key_mismatch") from None


def reencrypt(token: bytes | memoryview) -> bytes:
    """The same secret under the first (newest) key."""
    return _fernet().rotate(bytes(token))


def new_key() -> str:
    return Fernet.generate_key().decode()
