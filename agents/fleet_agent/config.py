"""Agent settings: the config file (TOML), then FLEET_AGENT_* environment variables, then flags.

Later sources win. Every setting is validated where it is read, and a bad value raises
``ConfigError`` naming the setting and where it came from; the CLI turns that into exit code 2.
"""

from __future__ import annotations

import os
import re
import shlex
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleet_agent.client import validate_server_url
from fleet_agent.protocol import ACTION_KINDS, HOOK_NAME_PATTERN

DEFAULT_CONFIG_FILE = "/etc/fleet-agent/agent.toml"
ENV_PREFIX = "FLEET_AGENT_"
CLOUD_CHOICES = ("auto", "aws", "gcp", "azure", "alibaba", "tencent", "oracle", "none")
LOG_LEVELS = ("debug", "info", "warning", "error")
NVML_EVENT_CHOICES = ("auto", "on", "off")


class ConfigError(ValueError):
    """A setting with a bad value; the message names the setting and its source."""


def _positive_float(low: float, high: float) -> Callable[[Any], float]:
    def parse(value: Any) -> float:
        if isinstance(value, bool):
            raise ValueError("expected a number")
        number = float(value)
        if not low <= number <= high:
            raise ValueError(f"must be between {low:g} and {high:g}")
        return number

    return parse


def _whole_number(low: int, high: int) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError("expected a whole number")
        try:
            number = int(value)
        except ValueError:
            raise ValueError("expected a whole number") from None
        if not low <= number <= high:
            raise ValueError(f"must be between {low} and {high}")
        return number

    return parse


_count = _whole_number(0, 1024)


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("expected a non-empty string")
    return value.strip()


def _choice(choices: tuple[str, ...]) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = _text(value).lower()
        if text not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return text

    return parse


def _path_list(value: Any) -> list[str]:
    if isinstance(value, str):  # env var: os.pathsep- or comma-separated
        items = [part for chunk in value.split(os.pathsep) for part in chunk.split(",")]
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        raise ValueError("expected a list of directories")
    return [_text(item) for item in items if str(item).strip()]


def _action_list(value: Any) -> list[str]:
    """Action kinds this node runs on request: ``run_hook`` allows every hook, ``run_hook:NAME`` one of them."""
    items = [part.strip() for part in value.split(",")] if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise ValueError("expected a list of action kinds")
    allowed = []
    for item in items:
        if not isinstance(item, str) or not item.strip():
            continue
        kind, _, hook = item.strip().partition(":")
        if kind not in ACTION_KINDS or (hook and (kind != "run_hook" or not re.match(HOOK_NAME_PATTERN, hook))):
            raise ValueError(f"{item!r} is not an action kind (one of {', '.join(ACTION_KINDS)}, or run_hook:NAME)")
        allowed.append(item.strip())
    return allowed


def _command(value: Any) -> list[str]:
    items = shlex.split(value) if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not items or not all(isinstance(i, str) and i for i in items):
        raise ValueError("expected a command as a list of strings")
    return list(items)


@dataclass(frozen=True)
class Setting:
    name: str
    parse: Callable[[Any], Any]
    default: Any
    help: str
    flag: str = ""  # defaults to --name-with-dashes

    @property
    def flag_name(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")


SETTINGS: tuple[Setting, ...] = (
    Setting("server", validate_server_url, None, "control-plane base URL (https://…)"),
    Setting("ca_file", _text, None, "extra CA bundle to verify the server's certificate"),
    Setting("state_dir", _text, "/var/lib/fleet-agent", "spool, instance id and credential"),
    Setting("interval_s", _positive_float(1, 3600), 15.0, "seconds between reports", "--interval"),
    Setting("expected_gpus", _count, None, "GPUs this node should have (visibility check)"),
    Setting("proc_root", _text, "/proc", "where /proc is mounted (containers: the host's)"),
    Setting("sys_root", _text, "/sys", "where /sys is mounted (cloud detection from DMI)"),
    Setting("host_root", _text, "/", "host file system root (os-release, CUDA toolkits, machine-id)"),
    Setting("kernel_log", _text, "auto",
            "kmsg, journal, off, auto, a file path, or kmsg:PATH (kmsg records from PATH)"),
    Setting(
        "nvml_events",
        _choice(NVML_EVENT_CHOICES),
        "auto",
        "Xid events from NVML: auto (only when no kernel log is readable), on, off",
    ),
    Setting("cloud", _choice(CLOUD_CHOICES), "auto", "force the cloud provider, or none for bare metal"),
    Setting("metadata_url", validate_server_url, None, "override the cloud metadata base URL"),
    Setting(
        "checkpoint_dirs", _path_list, [], "directories whose newest file age is reported", "--checkpoint-dir"
    ),
    Setting("python", _text, None, "interpreter or virtualenv of the training jobs (framework versions)"),
    Setting("spool_max_mb", _positive_float(1, 1024 * 1024), 64.0, "spool size bound in MiB"),
    Setting(
        "max_server_errors",
        _whole_number(1, 100),
        5,
        "server errors (HTTP 500) on one report sent alone before it is set aside",
    ),
    Setting(
        "notice_poll_s",
        _positive_float(0.5, 5),
        5.0,
        "cloud notice / kernel log poll period (≤ 5 s)",
        "--notice-poll",
    ),
    Setting(
        "stack_refresh_s",
        _positive_float(10, 86400),
        600.0,
        "how often to re-probe the software stack",
        "--stack-refresh",
    ),
    Setting("log_level", _choice(LOG_LEVELS), "info", "log verbosity"),
    # The [actions] table of the config file (docs/executors.md): what this node runs when the server asks.
    Setting("actions_allow", _action_list, [], "action kinds run on request ([actions] allow; none by default)"),
    Setting("actions_hooks_dir", _text, "/etc/fleet-agent/hooks", "operator-installed hooks for run_hook"),
    Setting("actions_reboot_command", _command, ["sudo", "-n", "/usr/bin/systemctl", "reboot"],
            "how the reboot action reboots (install.sh --allow-actions writes the sudoers rule)"),
    Setting("actions_gpu_reset_command", _command, ["sudo", "-n", "/usr/bin/nvidia-smi", "-r", "-i", "{gpu}"],
            "how gpu_reset resets GPU {gpu} (install.sh --allow-actions writes the sudoers rule)"),
    Setting("actions_nvidia_smi", _text, "nvidia-smi", "nvidia-smi for evidence and the GPU-idle check"),
    Setting("dcgmi", _text, "dcgmi", "DCGM's dcgmi for active diagnostics (dcgm_diag action, verify --level)"),
)
SETTINGS_BY_NAME = {setting.name: setting for setting in SETTINGS}


@dataclass
class Config:
    values: dict[str, Any]
    sources: dict[str, str] = field(default_factory=dict)  # setting -> where its value came from

    def __getattr__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None

    def is_set(self, name: str) -> bool:
        return self.sources.get(name, "default") != "default"

    @property
    def spool_path(self) -> Path:
        return Path(self.state_dir) / "spool.db"

    @property
    def spool_max_bytes(self) -> int:
        return int(self.spool_max_mb * 1024 * 1024)


def _apply(values: dict, sources: dict, name: str, raw: Any, source: str) -> None:
    setting = SETTINGS_BY_NAME.get(name)
    if setting is None:
        raise ConfigError(f"unknown setting '{name}' in {source}")
    try:
        values[name] = setting.parse(raw)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"invalid value for setting '{name}' in {source}: {err} (got {raw!r})") from None
    sources[name] = source


def load_config(
    *,
    config_file: str | None = None,
    environ: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
) -> Config:
    """Defaults ← file ← environment ← flags. ``config_file=None`` means the default path, if present."""
    environ = os.environ if environ is None else environ
    values = {setting.name: setting.default for setting in SETTINGS}
    sources = {setting.name: "default" for setting in SETTINGS}

    explicit_file = config_file or environ.get(f"{ENV_PREFIX}CONFIG")
    path = Path(explicit_file or DEFAULT_CONFIG_FILE)
    if explicit_file or path.exists():
        for name, raw in _read_toml(path).items():
            _apply(values, sources, name, raw, f"config file {path}")

    for name in SETTINGS_BY_NAME:
        env_name = ENV_PREFIX + name.upper()
        if env_name in environ:
            _apply(values, sources, name, environ[env_name], f"environment variable {env_name}")

    for name, raw in (flags or {}).items():
        if raw is not None:
            flag = SETTINGS_BY_NAME[name].flag_name if name in SETTINGS_BY_NAME else name
            _apply(values, sources, name, raw, f"flag {flag}")
    return Config(values, sources)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except OSError as err:
        raise ConfigError(f"cannot read config file {path}: {err}") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"config file {path} is not valid TOML: {err}") from None
    # An optional [agent] table keeps the file readable next to other tools' settings.
    agent_table = data.pop("agent", None)
    if isinstance(agent_table, dict):
        data.update(agent_table)
    # [actions] allow = [...] is the setting actions_allow, and so on.
    actions_table = data.pop("actions", None)
    if isinstance(actions_table, dict):
        data.update({f"actions_{name}": value for name, value in actions_table.items()})
    return data
