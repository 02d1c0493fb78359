"""Secrets at rest, for every app: Fernet (AES-128-CBC + HMAC-SHA256) under the keys in `FLEET_ENCRYPTION_KEYS`.

One setting, one key ring: integration credentials, SSH private keys, bootstrap tokens and executor credentials
are all encrypted here. The first key encrypts; every key decrypts. To rotate: put a new key first (keep the old
one after it), run `manage.py reencrypt_secrets`, then drop the old key. The keys are deliberately not derived
from Django's SECRET_KEY: rotating that one must not make every stored secret unreadable.

`FLEET_SECRETS_KEY` (the executors' own setting before the two were merged) is still read: its keys join the
ring after `FLEET_ENCRYPTION_KEYS`, so secrets stored under it stay readable until `reencrypt_secrets` has moved
them to the first key; when `FLEET_ENCRYPTION_KEYS` is empty its first key also encrypts.

Apps register each encrypted column with `encrypted_field_register(model, field, kind)` (in their AppConfig's
`ready`), so one command re-encrypts all of them without this module knowing any app.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.db import transaction

from fleet.core.api.errors import DomainError


class EncryptionNotConfigured(DomainError):
    status_code = 503
    default_code = "encryption_not_configured"


class SecretsUnreadable(DomainError):
    status_code = 409
    default_code = "secrets_unreadable"


def _split(value) -> list[str]:
    if isinstance(value, str):
        value = value.split(",")
    return [str(part).strip() for part in (value or []) if str(part).strip()]


def encryption_keys() -> list[str]:
    """The key ring, newest first: FLEET_ENCRYPTION_KEYS, then any legacy FLEET_SECRETS_KEY keys not in it."""
    keys = _split(getattr(settings, "FLEET_ENCRYPTION_KEYS", []))
    for key in _split(getattr(settings, "FLEET_SECRETS_KEY", "")):
        if key not in keys:
            keys.append(key)
    return keys


def _fernet() -> MultiFernet:
    keys = encryption_keys()
    if not keys:
        raise EncryptionNotConfigured("Secrets cannot be stored or used: set FLEET_ENCRYPTION_KEYS (one or more "
                                      "Fernet keys, newest first; see .env.example) on every web and worker "
                                      "process.")
    try:
        return MultiFernet([Fernet(key.encode()) for key in keys])
    except (ValueError, TypeError):
        raise EncryptionNotConfigured("FLEET_ENCRYPTION_KEYS holds a value that is not a Fernet key (32 url-safe "
                                      "base64-encoded bytes each).", code="encryption_key_invalid") from None


def _unreadable() -> SecretsUnreadable:
    return SecretsUnreadable("A stored secret cannot be decrypted with FLEET_ENCRYPTION_KEYS (was a key removed "
                             "before `manage.py reencrypt_secrets` moved its secrets to the new one?); enter it "
                             "again.")


def encrypt(plain: str | bytes) -> bytes:
    return _fernet().encrypt(plain.encode() if isinstance(plain, str) else plain)


def decrypt(token: bytes | memoryview | str) -> bytes:
    try:
        return _fernet().decrypt(token.encode() if isinstance(token, str) else bytes(token))
    except InvalidToken:
        raise _unreadable() from None


def reencrypt(token: bytes | memoryview | str):
    """The same secret under the first (newest) key, in the type it came in (text columns stay text)."""
    if isinstance(token, str):
        return _fernet().rotate(token.encode()).decode() if token else ""
    return _fernet().rotate(bytes(token))


def encrypt_json(values: dict[str, str]) -> str:
    """A small dict of named secrets as one text token ('' for none)."""
    return encrypt(json.dumps(values, sort_keys=True)).decode() if values else ""


def decrypt_json(token: str) -> dict[str, str]:
    return json.loads(decrypt(token)) if token else {}


def new_key() -> str:
    return Fernet.generate_key().decode()


@dataclass(frozen=True)
class EncryptedField:
    model: type
    field: str


_FIELDS: list[EncryptedField] = []


def encrypted_field_register(model: type, field: str) -> None:
    """Declare a column that holds `encrypt`/`encrypt_json` output, for `reencrypt_all`."""
    entry = EncryptedField(model, field)
    if entry not in _FIELDS:
        _FIELDS.append(entry)


def encrypted_fields() -> list[EncryptedField]:
    return list(_FIELDS)


def reencrypt_all() -> dict[str, int]:
    """Every registered secret under the first key, in one transaction; rows per `app.model.field`."""
    counts: dict[str, int] = {}
    with transaction.atomic():
        for entry in _FIELDS:
            model, field = entry.model, entry.field
            count = 0
            rows = model.objects.select_for_update().exclude(**{f"{field}__isnull": True}).exclude(**{field: b""})
            for pk, token in rows.values_list("pk", field):
                if not token:
                    continue
                model.objects.filter(pk=pk).update(**{field: reencrypt(token)})
                count += 1
            counts[f"{model._meta.label_lower}.{field}"] = count
    return counts
