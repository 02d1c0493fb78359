"""Embedded default: SQLite under var/, a file-system Celery broker, a per-checkout secret key."""

from .base import *  # noqa: F403
from .base import FLEET_ENCRYPTION_KEYS, VAR_DIR
from .env import env_bool, env_str, local_encryption_key, local_secret_key

DEBUG = env_bool("DEBUG", True)
SECRET_KEY = env_str("SECRET_KEY") or local_secret_key(VAR_DIR)
API_DOCS_PUBLIC = env_bool("API_DOCS_PUBLIC", True)
FLEET_ENCRYPTION_KEYS = FLEET_ENCRYPTION_KEYS or [local_encryption_key(VAR_DIR)]
