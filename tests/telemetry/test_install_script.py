"""Runs the served install.sh against a live test server into a temporary root (systemd skipped)."""

import json
import os
import stat
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from fleet.inventory.models import Node
from fleet.telemetry.services.enrollment import enrollment_token_create
from tests.factories import ProviderFactory, UserFactory

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def agent_wheels():
    wheel_dir = Path(settings.AGENT_WHEEL_DIR)
    if not list(wheel_dir.glob("nvidia_ml_py-*.whl")):
        pytest.skip(f"no nvidia-ml-py wheel in {wheel_dir}: `make setup` downloads it (tests never download)")
    call_command("build_agent_wheels")
    return wheel_dir


def test_install_script_installs_enrols_and_upgrades(agent_wheels, live_server, tmp_path):
    provider = ProviderFactory(kind="own", cloud="")
    _, token = enrollment_token_create(actor=UserFactory(role="operator"), name="install-test", provider=provider,
                                       delivery_form="bare_metal_owned", billing_mode="reserved")
    script = tmp_path / "install.sh"
    with urllib.request.urlopen(f"{live_server.url}/install.sh") as response:  # noqa: S310 (local test server)
        script.write_bytes(response.read())
    assert f'SERVER="{live_server.url}"' in script.read_text()

    root = tmp_path / "root"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV"))}
    args = ["sh", str(script), "--root", str(root), "--no-systemd", "--offline", "--python", sys.executable]
    first = subprocess.run([*args, "--token", token], capture_output=True, text=True, timeout=300, env=env)
    assert first.returncode == 0, first.stdout + first.stderr

    node = Node.objects.get()
    assert node.delivery_form == "bare_metal_owned"
    credential = root / "var/lib/fleet-agent/credential.json"
    assert stat.S_IMODE(credential.stat().st_mode) == 0o600
    assert json.loads(credential.read_text())["node_id"] == node.pk
    unit = (root / "etc/systemd/system/fleet-agent.service").read_text()
    assert "ExecStart=/opt/fleet-agent/venv/bin/fleet-agent run" in unit
    assert "User=fleet-agent" in unit and "AmbientCapabilities=CAP_SYSLOG" in unit
    assert f'server = "{live_server.url}"' in (root / "etc/fleet-agent/agent.toml").read_text()
    agent = root / "opt/fleet-agent/venv/bin/fleet-agent"
    version = subprocess.run([str(agent), "--version"], capture_output=True, text=True, timeout=60)
    assert version.stdout.startswith("fleet-agent ")

    again = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)  # upgrade, no token
    assert again.returncode == 0, again.stdout + again.stderr
    assert "already enrolled" in again.stdout
    assert Node.objects.count() == 1


def test_install_script_refuses_first_install_without_token(agent_wheels, live_server, tmp_path):
    script = tmp_path / "install.sh"
    with urllib.request.urlopen(f"{live_server.url}/install.sh") as response:  # noqa: S310
        script.write_bytes(response.read())
    result = subprocess.run(["sh", str(script), "--root", str(tmp_path / "r"), "--no-systemd", "--offline",
                             "--python", sys.executable], capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert "needs --token" in result.stderr
