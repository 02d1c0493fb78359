import secrets

from fleet.accounts.models import hash_secret

ENROLLMENT_PREFIX = "fe_"
NODE_CREDENTIAL_PREFIX = "fn_"


def new_secret(prefix: str) -> tuple[str, str, str]:
    """Return (plain key, display prefix, hash). Only the hash and prefix are stored."""
    key = prefix + secrets.token_urlsafe(32)
    return key, key[: len(prefix) + 4], hash_secret(key)


__all__ = ["ENROLLMENT_PREFIX", "NODE_CREDENTIAL_PREFIX", "hash_secret", "new_secret"]
