"""install.sh --allow-actions: the [actions] block the agent reads, the narrow sudoers rule for reboot and GPU reset
only, the systemd drop-in sudo needs, and a re-run that narrows or clears all of it. The served script runs for
real against a temporary root, with the agent already installed and enrolled (so no virtualenv is built)."""

import subprocess
import tomllib

import pytest

from fleet_agent.config import load_config

WHEEL = "fleet_agent-0.1.0-py3-none-any.whl"


@pytest.fixture
def installer(tmp_path, settings, client):
    served = tmp_path / "served"
    (served / "agent" / "files").mkdir(parents=True)
    (served / "agent" / "files" / WHEEL).write_bytes(b"wheel")
    settings.AGENT_WHEEL_DIR = str(served / "agent" / "files")
    settings.FLEET_PUBLIC_URL = f"file://{served}"
    script = tmp_path / "install.sh"
    script.write_bytes(client.get("/install.sh").content)
    root = tmp_path / "root"
    venv_python = root / "opt/fleet-agent/venv/bin/python"
    venv_python.parent.mkdir(parents=True)
    venv_python.write_text("#!/bin/sh\nexit 0\n")  # pip install of the already-installed agent: nothing to do
    venv_python.chmod(0o755)
    (root / "var/lib/fleet-agent").mkdir(parents=True)
    (root / "var/lib/fleet-agent/credential.json").write_text("{}")
    (root / "etc/fleet-agent").mkdir(parents=True)
    (root / "etc/fleet-agent/agent.toml").write_text('server = "https://fleet.example"\n')  # kept by install.sh

    def run(*args):
        return subprocess.run(["sh", str(script), "--root", str(root), "--no-systemd", *args], capture_output=True,
                              text=True, timeout=60)

    run.root = root
    return run


def test_privileged_actions_get_exactly_their_sudoers_rule(installer):
    result = installer("--allow-actions", "reboot,gpu_reset,collect_evidence")
    assert result.returncode == 0, result.stdout + result.stderr
    root = installer.root
    conf = root / "etc/fleet-agent/agent.toml"
    actions = tomllib.loads(conf.read_text())["actions"]
    assert actions["allow"] == ["reboot", "gpu_reset", "collect_evidence"]
    config = load_config(config_file=str(conf), environ={})
    assert config.actions_allow == ["reboot", "gpu_reset", "collect_evidence"]
    assert config.actions_reboot_command[-1] == "reboot" and config.actions_reboot_command[:2] == ["sudo", "-n"]
    sudoers = (root / "etc/sudoers.d/fleet-agent").read_text().splitlines()
    rules = [line for line in sudoers if not line.startswith("#")]
    assert len(rules) == 2
    assert rules[0].startswith("fleet-agent ALL=(root) NOPASSWD: /") and rules[0].endswith("systemctl reboot")
    assert rules[1].endswith("nvidia-smi -r -i [0-9][0-9]") and "ALL=(root) NOPASSWD: ALL" not in rules[1]
    assert oct((root / "etc/sudoers.d/fleet-agent").stat().st_mode & 0o777) == "0o440"
    # sudo's and the reset's paths in agent.toml are the ones the rule names.
    assert f"{config.actions_reboot_command[2]} reboot" in rules[0]
    dropin = (root / "etc/systemd/system/fleet-agent.service.d/actions.conf").read_text()
    assert "NoNewPrivileges=false" in dropin and "CAP_SYS_ADMIN" in dropin


def test_rerun_replaces_the_block_and_narrows(installer):
    assert installer("--allow-actions", "reboot").returncode == 0
    assert installer("--allow-actions", "verify,run_hook:drain").returncode == 0
    root = installer.root
    text = (root / "etc/fleet-agent/agent.toml").read_text()
    assert text.count("[actions]") == 1
    assert tomllib.loads(text)["actions"]["allow"] == ["verify", "run_hook:drain"]
    assert not (root / "etc/sudoers.d/fleet-agent").exists()  # nothing privileged any more
    assert not (root / "etc/systemd/system/fleet-agent.service.d/actions.conf").exists()
    assert installer().returncode == 0  # without the option a re-run leaves the block alone
    assert tomllib.loads((root / "etc/fleet-agent/agent.toml").read_text())["actions"]["allow"] == \
        ["verify", "run_hook:drain"]
    assert installer("--allow-actions", "none").returncode == 0
    assert tomllib.loads((root / "etc/fleet-agent/agent.toml").read_text())["actions"]["allow"] == []


def test_unknown_kinds_and_a_hand_written_table_stop_the_installer(installer):
    bad = installer("--allow-actions", "reboot,rm_rf")
    assert bad.returncode != 0 and "unknown action kind 'rm_rf'" in bad.stderr
    conf = installer.root / "etc/fleet-agent/agent.toml"
    assert installer().returncode == 0
    conf.write_text(conf.read_text() + '[actions]\nallow = ["verify"]\n')
    clash = installer("--allow-actions", "reboot")
    assert clash.returncode != 0 and "[actions] table of its own" in clash.stderr
    assert not (installer.root / "etc/sudoers.d/fleet-agent").exists()
