from fleet.core.secrets import hash_secret, new_secret

ENROLLMENT_PREFIX = "fe_"
NODE_CREDENTIAL_PREFIX = "fn_"

__all__ = ["ENROLLMENT_PREFIX", "NODE_CREDENTIAL_PREFIX", "hash_secret", "new_secret"]
