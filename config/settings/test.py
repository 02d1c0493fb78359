"""Test settings: the embedded default unless DATABASE_URL / REDIS_URL point at real servers (CI sets them)."""

import os

from .base import *  # noqa: F403
from .base import DATABASES, FLEET_ENCRYPTION_KEYS, VAR_DIR
from .env import env_bool, local_encryption_key

SECRET_KEY = "test-only-not-secret"  # noqa: S105
DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
if env_bool("FLEET_TEST_REAL_PASSWORD_HASHER", False):
    # A load test of the login path needs the real cost of a password check (PBKDF2 first, as in production).
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher", *PASSWORD_HASHERS]
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not :memory:, so a real Celery worker or gunicorn started by a test sees the same data.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}

# Throttle counters must not leak between tests (SQLite reuses primary keys after rollback). A server process
# started by a load test may ask for the shared cache production would use (Redis, or files under var/).
if not env_bool("FLEET_TEST_SHARED_CACHE", False):
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
FLEET_ENCRYPTION_KEYS = FLEET_ENCRYPTION_KEYS or [local_encryption_key(VAR_DIR)]
# The ingest queue and the credential cache need a writer process and a shared Redis: tests that exercise them
# turn them on themselves (override_settings, or these variables for the processes they start).
INGEST_QUEUE = env_bool("FLEET_TEST_INGEST_QUEUE", False)
AGENT_CREDENTIAL_CACHE_S = int(os.environ.get("FLEET_TEST_CREDENTIAL_CACHE_S", "0"))
