"""Configuration: file, then environment, then flags; bad values name the setting and exit 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fleet_agent.cli import main
from fleet_agent.config import ConfigError, load_config


def test_precedence_file_then_env_then_flags(tmp_path):
    config_file = tmp_path / "agent.toml"
    config_file.write_text(
        'interval_s = 30\nexpected_gpus = 8\nserver = "https://file.example"\n'
        'checkpoint_dirs = ["/ckpt/a", "/ckpt/b"]\n[agent]\ncloud = "aws"\n'
    )
    config = load_config(
        config_file=str(config_file),
        environ={
            "FLEET_AGENT_INTERVAL_S": "20",
            "FLEET_AGENT_SERVER": "https://env.example",
            "FLEET_AGENT_CHECKPOINT_DIRS": "/x:/y",
        },
        flags={"interval_s": "10", "proc_root": "/host/proc"},
    )
    assert config.interval_s == 10.0 and config.sources["interval_s"] == "flag --interval"
    assert config.server == "https://env.example"
    assert config.expected_gpus == 8 and config.cloud == "aws"
    assert config.checkpoint_dirs == ["/x", "/y"]
    assert config.proc_root == "/host/proc" and config.is_set("proc_root") and not config.is_set("sys_root")
    assert config.state_dir == "/var/lib/fleet-agent" and config.spool_max_bytes == 64 * 2**20


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"flags": {"interval_s": "abc"}}, "'interval_s' in flag --interval"),
        ({"flags": {"interval_s": "0"}}, "between 1 and 3600"),
        ({"environ": {"FLEET_AGENT_EXPECTED_GPUS": "eight"}}, "'expected_gpus' in environment variable"),
        ({"flags": {"cloud": "ibm"}}, "'cloud'"),
        ({"flags": {"server": "fleet.example.com"}}, "'server'"),
        ({"flags": {"notice_poll_s": "30"}}, "'notice_poll_s'"),
        ({"environ": {"FLEET_AGENT_MAX_SERVER_ERRORS": "0"}}, "'max_server_errors' in environment variable"),
        ({"flags": {"max_server_errors": "2.5"}}, "expected a whole number"),
    ],
)
def test_bad_values_name_the_setting_and_source(kwargs, fragment):
    with pytest.raises(ConfigError) as raised:
        load_config(config_file=None, environ=kwargs.get("environ", {}), flags=kwargs.get("flags"))
    assert fragment in str(raised.value)


def test_config_file_problems_are_named(tmp_path):
    broken = tmp_path / "broken.toml"
    broken.write_text("interval_s = [unclosed\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(config_file=str(broken), environ={})
    typo = tmp_path / "typo.toml"
    typo.write_text("intervall_s = 15\n")
    with pytest.raises(ConfigError, match="unknown setting 'intervall_s'"):
        load_config(config_file=str(typo), environ={})
    wrong_type = tmp_path / "type.toml"
    wrong_type.write_text("expected_gpus = true\n")
    with pytest.raises(ConfigError, match="'expected_gpus' in config file"):
        load_config(config_file=str(wrong_type), environ={})
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(config_file=str(tmp_path / "missing.toml"), environ={})


def test_cli_exits_2_naming_the_setting(tmp_path, capsys):
    assert main(["status", "--state-dir", str(tmp_path), "--interval", "soon"]) == 2
    assert "interval_s" in capsys.readouterr().err
    config_file = tmp_path / "agent.toml"
    config_file.write_text("interval_s = 'x\n")
    assert main(["status", "--config", str(config_file)]) == 2
    assert str(config_file) in capsys.readouterr().err


def test_malformed_flag_via_the_console_script_exits_2(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "fleet_agent",
            "collect",
            "--once",
            "--json",
            "--expected-gpus",
            "-3",
            "--state-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "expected_gpus" in done.stderr and done.stdout == ""
    usage = subprocess.run(
        [sys.executable, "-m", "fleet_agent", "collect", "--bogus"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert usage.returncode == 2 and "--bogus" in usage.stderr
