"""Credentials at rest: Fernet (AES-128-CBC + HMAC-SHA256) under keys from `FLEET_ENCRYPTION_KEYS`.

The first key encrypts; every key decrypts. To rotate: put a new key first (keep the old one after it), run
`manage.py integrations_reencrypt`, then drop the old key."""

from __future__ import annotations

import json

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

from fleet.core.api.errors import DomainError


class EncryptionNotConfigured(DomainError):
    status_code = 503
    default_code = "encryption_not_configured"


class SecretsUnreadable(DomainError):
    status_code = 409
    default_code = "secrets_unreadable"


def _fernet() -> MultiFernet:
    keys = [k for k in getattr(settings, "FLEET_ENCRYPTION_KEYS", []) if k]
    if not keys:
        raise EncryptionNotConfigured("Credentials cannot be stored: set FLEET_ENCRYPTION_KEYS (a Fernet key, "
                                      "see .env.example) on every web and worker process.")
    try:
        return MultiFernet([Fernet(key.encode() if isinstance(key, str) else key) for key in keys])
    except (ValueError, TypeError):
        raise EncryptionNotConfigured("FLEET_ENCRYPTION_KEYS holds a value that is not a Fernet key (32 url-safe "
                                      "base64-encoded bytes).") from None


def secrets_encrypt(values: dict[str, str]) -> str:
    if not values:
        return ""
    return _fernet().encrypt(json.dumps(values, sort_keys=True).encode()).decode()


def secrets_decrypt(token: str) -> dict[str, str]:
    if not token:
        return {}
    try:
        return json.loads(_fernet().decrypt(token.encode()))
    except InvalidToken:
        raise SecretsUnreadable("The stored credentials cannot be decrypted with FLEET_ENCRYPTION_KEYS (was the "
                                "key changed without keeping the old one?); enter them again.") from None


def secrets_reencrypt(token: str) -> str:
    """The same secrets under the first (newest) key."""
    return _fernet().rotate(token.encode()).decode() if token else ""
