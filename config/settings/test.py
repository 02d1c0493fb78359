"""Test settings: the embedded default unless DATABASE_URL / REDIS_URL point at real servers (CI sets them)."""

import os


def _isolate_xdist_worker() -> None:
    """Under pytest-xdist each worker gets its own var/ folder (its SQLite file, file-system broker, cache) and
    its own Redis database, so two workers never share a queue or a file. Set once in the environment, before
    the base settings read it, so the processes a test starts (they inherit it) land in the same place."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker or os.environ.get("FLEET_TEST_WORKER") == worker:
        return
    os.environ["FLEET_TEST_WORKER"] = worker
    base = os.environ.get("FLEET_VAR_DIR") or os.path.join(os.path.dirname(__file__), "..", "..", "var")
    os.environ["FLEET_VAR_DIR"] = os.path.join(os.path.abspath(base), worker)
    redis_url = os.environ.get("REDIS_URL", "")
    if redis_url:
        from urllib.parse import urlsplit

        parts = urlsplit(redis_url)
        db = parts.path.strip("/")
        number = int(worker.removeprefix("gw") or 0)
        os.environ["REDIS_URL"] = parts._replace(path=f"/{(int(db) if db.isdigit() else 15) - number}").geturl()


_isolate_xdist_worker()

from .base import *  # noqa: E402, F403
from .base import DATABASES, FLEET_ENCRYPTION_KEYS, VAR_DIR  # noqa: E402
from .env import env_bool, env_list, local_encryption_key  # noqa: E402

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
# The suite's stand-ins for Jira, ServiceNow, PagerDuty, Opsgenie, SMTP and webhook receivers listen on loopback:
# allowed here as a lab would allow its own sink (tests/integrations/test_outbound_guard.py runs with none).
OUTBOUND_ALLOWED_NETWORKS = env_list("FLEET_OUTBOUND_ALLOWED_NETWORKS", ["127.0.0.0/8", "::1/128"])
# The ingest queue and the credential cache need a writer process and a shared Redis: tests that exercise them
# turn them on themselves (override_settings, or these variables for the processes they start).
INGEST_QUEUE = env_bool("FLEET_TEST_INGEST_QUEUE", False)
AGENT_CREDENTIAL_CACHE_S = int(os.environ.get("FLEET_TEST_CREDENTIAL_CACHE_S", "0"))
