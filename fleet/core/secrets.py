"""Secrets shown once and stored only as a hash: API tokens, enrolment tokens, node credentials."""

import hashlib
import secrets


def hash_secret(secret: str) -> str:
    # Keys are 32 random bytes, so a fast hash is enough (no dictionary to attack) and keeps auth cheap.
    return hashlib.sha256(secret.encode()).hexdigest()


def new_secret(prefix: str) -> tuple[str, str, str]:
    """Return (plain key, display prefix, hash). Only the display prefix and the hash are stored."""
    key = prefix + secrets.token_urlsafe(32)
    return key, key[: len(prefix) + 4], hash_secret(key)
