"""A live control plane for the browser tests: the built console, gunicorn on the test database."""

import os
import shutil
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.processes import process_env, running

ROOT = Path(__file__).resolve().parents[2]
FRONTEND = ROOT / "frontend"
ARTIFACTS = ROOT / "test-artifacts" / "e2e"
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")


def _missing_tool_reason() -> str | None:
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} is missing: apt-get install -y chromium (Debian's build; no browser downloads)"
    if shutil.which("node") is None or shutil.which("npm") is None:
        return "node and npm are needed to build the console and drive the browser"
    return None


def _skip_or_fail(reason: str):
    # In CI a missing browser must fail loudly, not turn the e2e suite into a silent skip.
    if os.environ.get("FLEET_E2E_REQUIRED") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def console_dist():
    """frontend/dist, built if it is missing (`npm ci` first when node_modules is missing or older than the
    lockfile, as in the Makefile)."""
    reason = _missing_tool_reason()
    if reason:
        _skip_or_fail(reason)
    installed = FRONTEND / "node_modules" / ".package-lock.json"
    if not installed.exists() or installed.stat().st_mtime < (FRONTEND / "package-lock.json").stat().st_mtime:
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=FRONTEND, check=True, timeout=600)
    if _dist_is_stale():
        subprocess.run(["npm", "run", "build"], cwd=FRONTEND, check=True, timeout=300)
    return FRONTEND / "dist"


def _dist_is_stale() -> bool:
    """True when dist/ is missing or older than any source that goes into it (a stale build tests old code)."""
    index = FRONTEND / "dist" / "index.html"
    if not index.exists():
        return True
    sources = [FRONTEND / name for name in ("index.html", "package-lock.json", "vite.config.ts", "tsconfig.json")]
    sources += [path for folder in ("src", "public") for path in (FRONTEND / folder).rglob("*") if path.is_file()]
    return max(path.stat().st_mtime for path in sources if path.exists()) > index.stat().st_mtime


@pytest.fixture
def committed_db(transactional_db, seeded_remediation):
    """Rows the live server can see (committed, not in a test transaction), with the seeded rule catalog and the
    remediation workflows and policies (a transactional test's flush empties what migrations seeded)."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=2) as response:  # noqa: S310 (loopback)
            return response.status == 200
    except OSError:
        return False


@pytest.fixture(scope="session")
def live_server_url(console_dist, django_db_setup, tmp_path_factory):
    """gunicorn serving the API and the built console from the test database."""
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"], cwd=ROOT,
                   env=process_env(), check=True, timeout=120)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("gunicorn") / "gunicorn.log"
    command = [sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "1",
               "--threads", "8", "--worker-class", "gthread", "--timeout", "60", "--access-logfile", "-"]
    with running(command, log=log, ready=lambda: _healthy(url), what="gunicorn"):
        yield url


def run_console_script(*, base_url: str, artifacts: Path, env: dict, timeout: int = 120,
                       script: str = "console.mjs") -> subprocess.CompletedProcess:
    """Run a browser script (console.mjs by default); its screenshots replace what an earlier run left."""
    shutil.rmtree(artifacts, ignore_errors=True)
    artifacts.mkdir(parents=True)
    return subprocess.run(
        ["node", str(ROOT / "tests" / "e2e" / script)],
        cwd=ROOT, env={**os.environ, "E2E_BASE_URL": base_url, "E2E_ARTIFACTS": str(artifacts),
                       "CHROMIUM_PATH": CHROMIUM, **env},
        capture_output=True, text=True, timeout=timeout,
    )
