"""Real processes for integration tests: a Celery worker bound to the test database."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]


def test_database_url() -> str:
    db = settings.DATABASES["default"]
    if db["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def process_env() -> dict:
    """Environment for a child process that must see the test database and broker."""
    return {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test", "DATABASE_URL": test_database_url(),
            "FLEET_VAR_DIR": str(settings.VAR_DIR), "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="session")
def celery_worker(django_db_setup, django_db_blocker, tmp_path_factory):
    """A real `celery worker` process, consuming the real broker, writing to the test database."""
    log = tmp_path_factory.mktemp("worker") / "worker.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo", "--loglevel", "INFO",
             "--without-gossip", "--without-mingle", "--without-heartbeat", "--purge", "-n", "test@%h"],
            cwd=ROOT, env=process_env(), stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while b"ready." not in log.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"celery worker did not start:\n{log.read_text()[-4000:]}")
            time.sleep(0.2)
        proc.log_path = log
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
