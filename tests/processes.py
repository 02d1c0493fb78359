"""Real child processes for integration and e2e tests: environment, start-and-wait, and polling."""

import contextlib
import os
import subprocess
import sys
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
    """Start `command` (output to `log`; `env` on top of `process_env()`), wait until `ready()` holds, yield the
    process, stop it afterwards."""
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


def gunicorn(port: int, *options: str, log: Path, env: dict | None = None, what: str = "gunicorn"):
    """The web app under gunicorn on 127.0.0.1:`port` (`options`: workers, threads, …), ready once /healthz
    answers; see `running`."""
    command = [sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{port}", *options]
    return running(command, log=log, ready=lambda: http_ok(f"http://127.0.0.1:{port}/healthz"), what=what, env=env)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """A private redis-server on a free port that a test can stop and start again (same port), to see what the
    code under test does while Redis is really down rather than mocked. No persistence unless `aof`: then the
    append-only file with `appendfsync always`, as production runs it for the ingest queue (a restart or a
    SIGKILL keeps every acknowledged write)."""

    def __init__(self, workdir: Path, port: int | None = None, *, aof: bool = False):
        self.workdir = workdir
        self.aof = aof
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None

    def start(self) -> "RedisServer":
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = open(self.workdir / "redis.log", "ab")  # noqa: SIM115 (the child keeps it)
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             *(["--appendonly", "yes", "--appendfsync", "always"] if self.aof else ["--appendonly", "no"]),
             "--dir", str(self.workdir)], stdout=log, stderr=subprocess.STDOUT)
        log.close()
        wait_for(self.ping, timeout=10, what=f"redis-server on port {self.port}", interval=0.05)
        return self

    def ping(self) -> bool:
        import redis

        try:
            return bool(redis.Redis.from_url(self.url, socket_timeout=0.5).ping())
        except redis.RedisError:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    def __enter__(self) -> "RedisServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def child_pids(pid: int) -> list[int]:
    """The direct children of a process (e.g. gunicorn's workers); Linux /proc."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def http_ok(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 (loopback)
            return response.status == 200
    except OSError:
        return False
