"""Real child processes for integration and e2e tests: environment, start-and-wait, and polling."""

import contextlib
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parents[1]


def child_database_url() -> str:
    db = settings.DATABASES["default"]
    if db["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def process_env() -> dict:
    """Environment for a child process that must see the test database and broker."""
    return {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test", "DATABASE_URL": child_database_url(),
            "FLEET_VAR_DIR": str(settings.VAR_DIR), "PYTHONUNBUFFERED": "1"}


def wait_for(predicate: Callable, *, timeout: float = 30.0, what: str = "condition", interval: float = 0.2):
    """Poll until `predicate()` returns something truthy and return it; fail the test after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


@contextlib.contextmanager
def running(command: list[str], *, log: Path, ready: Callable[[], bool], what: str, timeout: float = 60.0,
            env: dict | None = None):
    """Start `command` (output to `log`), wait until `ready()` holds, yield the process, stop it afterwards.
    `env` adds to (or overrides) `process_env()`."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, cwd=ROOT, env={**process_env(), **(env or {})}, stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while not ready():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start:\n{log.read_text()[-4000:]}")
            time.sleep(0.2)
        proc.log_path = log
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
