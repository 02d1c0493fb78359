"""The software stack: driver ↔ CUDA ↔ framework versions, container runtime, OS, kernel.

Driver and CUDA driver versions come from the NVML adapter on every report (cheap, and a driver
upgraded behind our back must show at once). Everything else is slow to find out — importing torch
takes seconds — so ``refresh()`` gathers it into a cache that ``stack()`` reads; the daemon runs
``refresh()`` from its own thread, never inside a collection cycle.

Framework versions come from a *configured* interpreter run as a subprocess with a timeout: the
agent never imports torch (hundreds of MB, and the agent's interpreter is not the job's).
"""

from __future__ import annotations

import json
import logging
import os
import platform
import re
import shutil
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fleet_agent.logutil import WarnOnce

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 60.0
TOOL_TIMEOUT_S = 5.0

# Runs in the configured interpreter. Prints one JSON object; diagnostics go to stderr.
FRAMEWORK_PROBE = r"""
import importlib.metadata as md, importlib.util, json, sys

def installed(module):
    try:
        return importlib.util.find_spec(module) is not None
    except Exception:
        return False

def dist_version(*names):
    for name in names:
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            pass
    return None

frameworks = []
if installed("torch"):
    entry = {"name": "torch", "version": dist_version("torch"), "cuda": None, "arch_list": None}
    try:
        import torch
        entry["version"] = torch.__version__
        entry["cuda"] = torch.version.cuda
        # The compiled arch list, read without initialising CUDA (get_arch_list() returns [] when no
        # GPU is usable, which is exactly when we need the list most).
        flags = getattr(torch._C, "_cuda_getArchFlags", lambda: None)()
        entry["arch_list"] = flags.split() if flags else list(torch.cuda.get_arch_list())
    except Exception as err:
        print(f"torch: {type(err).__name__}: {err}", file=sys.stderr)
    frameworks.append(entry)
if installed("tensorflow"):
    entry = {"name": "tensorflow", "version": dist_version("tensorflow", "tensorflow-cpu"),
             "cuda": None, "arch_list": None}
    try:
        import tensorflow as tf
        info = tf.sysconfig.get_build_info()
        entry["version"] = tf.__version__
        entry["cuda"] = info.get("cuda_version")
        entry["arch_list"] = list(info.get("cuda_compute_capabilities") or []) or None
    except Exception as err:
        print(f"tensorflow: {type(err).__name__}: {err}", file=sys.stderr)
    frameworks.append(entry)
if installed("jax"):
    cuda = None
    for major in ("13", "12", "11"):
        if dist_version(f"jax-cuda{major}-plugin", f"jax_cuda{major}_plugin", f"jax-cuda{major}-pjrt"):
            cuda = major
            break
    frameworks.append({"name": "jax", "version": dist_version("jax"), "cuda": cuda, "arch_list": None})
# The CUDA runtime libraries pip wheels of the frameworks pull in: each one is a CUDA runtime the driver must serve.
for dist in ("nvidia-cuda-runtime-cu13", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu11",
             "nvidia-cuda-runtime"):
    version = dist_version(dist)
    if version:
        parts = version.split(".")
        frameworks.append({"name": dist, "version": version, "cuda": ".".join(parts[:2]), "arch_list": None,
                           "kind": "runtime_library"})
print(json.dumps({"python": sys.version.split()[0], "frameworks": frameworks}))
"""


@dataclass(frozen=True)
class CommandResult:
    returncode: int
    stdout: str
    stderr: str


CommandRunner = Callable[[list[str], float], "CommandResult | None"]


def run_command(argv: list[str], timeout: float) -> CommandResult | None:
    """Run a command; ``None`` when the binary is missing, fails to start or times out."""
    if shutil.which(argv[0]) is None:
        return None
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONDONTWRITEBYTECODE="1")
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        log.warning("%s did not answer within %.0f s", argv[0], timeout)
        return None
    except OSError as err:
        log.warning("cannot run %s: %s", argv[0], err)
        return None
    return CommandResult(done.returncode, done.stdout, done.stderr)


_VERSION = re.compile(r"\bv?(\d+\.\d+(?:\.\d+)?[\w.+~-]*)")


def parse_tool_version(output: str | None) -> str | None:
    """First dotted version number in a ``--version`` output."""
    if not output:
        return None
    match = _VERSION.search(output)
    return match.group(1).rstrip(",") if match else None


def major_minor(version: str | None) -> str | None:
    if not version:
        return None
    parts = re.findall(r"\d+", version)
    return ".".join(parts[:2]) if len(parts) >= 2 else None


def read_os_release(host_root: Path) -> str | None:
    for relative in ("etc/os-release", "usr/lib/os-release"):
        try:
            text = (host_root / relative).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        fields = {}
        for line in text.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                fields[key.strip()] = value.strip().strip('"').strip("'")
        name = fields.get("PRETTY_NAME") or " ".join(
            filter(None, (fields.get("NAME"), fields.get("VERSION")))
        )
        return name[:256] or None
    return None


def find_cuda_toolkits(host_root: Path) -> list[str]:
    """Installed CUDA toolkits as "major.minor", from /usr/local/cuda-*/version.{json,txt}."""
    versions = set()
    base = host_root / "usr/local"
    candidates = sorted(base.glob("cuda-*")) + [base / "cuda"]
    for directory in candidates[:32]:
        version = _toolkit_version(directory)
        if version:
            versions.add(version)
    return sorted(versions, key=lambda v: tuple(int(p) for p in v.split(".")))


_LIBCUDA = re.compile(r"^libcuda\.so\.(\d+\.\d+(?:\.\d+)?)$")


def find_cuda_compat(host_root: Path) -> list[dict]:
    """CUDA forward-compatibility packages (cuda-compat-X-Y): ``/usr/local/cuda-X.Y/compat/libcuda.so.<driver>``.
    Each lets CUDA X.Y run on an older driver, on data-center GPUs only (the server judges that)."""
    found = {}
    base = host_root / "usr/local"
    for directory in (sorted(base.glob("cuda-*")) + [base / "cuda"])[:32]:
        try:
            names = sorted(p.name for p in (directory / "compat").iterdir())
        except OSError:
            continue
        libcuda = next((m.group(1) for m in map(_LIBCUDA.match, names) if m), None)
        cuda = _toolkit_version(directory)
        if libcuda and cuda:
            found[(cuda, libcuda)] = {"name": "cuda-compat", "version": libcuda[:64], "cuda": cuda, "arch_list": None,
                                      "kind": "cuda_compat"}
    return list(found.values())[:4]


# Images' CUDA: NVIDIA's CUDA base images set CUDA_VERSION (and NVIDIA_REQUIRE_CUDA) in the image environment.
CONTAINER_INSPECT_FORMAT = "{{.Config.Image}}|{{range .Config.Env}}{{.}};{{end}}"
MAX_CONTAINERS = 8


def parse_container_cuda(output: str) -> list[dict]:
    """Lines of ``<image>|ENV=value;ENV=value;`` → container entries with the image's CUDA, if it has one."""
    entries = {}
    for line in (output or "").splitlines():
        image, sep, env = line.partition("|")
        if not sep:
            continue
        variables = dict(item.split("=", 1) for item in env.split(";") if "=" in item)
        cuda = major_minor(variables.get("CUDA_VERSION"))
        if cuda is None:
            match = re.search(r"cuda>=(\d+\.\d+)", variables.get("NVIDIA_REQUIRE_CUDA", ""))
            cuda = match.group(1) if match else None
        if cuda and image.strip():
            entries[(image.strip(), cuda)] = {"name": f"container {image.strip()}"[:64],
                                              "version": variables.get("CUDA_VERSION", cuda)[:64], "cuda": cuda,
                                              "arch_list": None, "kind": "container"}
    return list(entries.values())[:MAX_CONTAINERS]


def _toolkit_version(directory: Path) -> str | None:
    try:
        data = json.loads((directory / "version.json").read_text(encoding="utf-8"))
        return major_minor(data["cuda"]["version"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        text = (directory / "version.txt").read_text(encoding="utf-8")  # CUDA ≤ 11.0
    except OSError:
        return None
    match = re.search(r"CUDA Version (\d+\.\d+)", text)
    return match.group(1) if match else None


class StackCollector:
    def __init__(
        self,
        *,
        host_root: str | Path = "/",
        proc_root: str | Path = "/proc",
        python: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        runner: CommandRunner = run_command,
    ):
        self.host_root = Path(host_root)
        self.proc_root = Path(proc_root)
        self.python = python
        self.timeout_s = timeout_s
        self._run = runner
        self._cache: dict | None = None
        self._refresh_lock = threading.Lock()
        self._warn = WarnOnce(log)

    # -- slow facts -----------------------------------------------------------------------------

    def refresh(self) -> dict:
        """Re-read the slow facts (subprocesses, file scans) into the cache and return them."""
        with self._refresh_lock:
            python_version, frameworks = self._frameworks()
            # Every other CUDA the node carries rides in the same list, each entry with its `kind` (≤ 32 in all).
            frameworks = frameworks + find_cuda_compat(self.host_root) + self._containers()
            facts = {
                "cuda_toolkits": find_cuda_toolkits(self.host_root),
                "python": python_version,
                "frameworks": frameworks,
                "container_runtime": self._container_runtime(),
                "nvidia_container_toolkit": self._container_toolkit(),
                "os": read_os_release(self.host_root),
                "kernel": self._kernel(),
                "cpu_model": self._cpu_model(),
            }
            self._cache = facts
            return facts

    def _slow_facts(self) -> dict:
        return self._cache if self._cache is not None else self.refresh()

    def _interpreter(self) -> str | None:
        if not self.python:
            return None
        path = Path(self.python)
        # A virtualenv directory is accepted as well as an interpreter.
        return str(path / "bin" / "python") if path.is_dir() else self.python

    def _frameworks(self) -> tuple[str | None, list[dict]]:
        interpreter = self._interpreter()
        if interpreter is None:
            return None, []
        result = self._run([interpreter, "-c", FRAMEWORK_PROBE], self.timeout_s)
        if result is None or result.returncode != 0:
            detail = (result.stderr.strip()[-300:] if result else "not found or timed out") or "no output"
            self._warn(f"probe:{interpreter}", "framework probe with %s failed: %s", interpreter, detail)
            return None, []
        if result.stderr.strip():
            self._warn(f"probe-stderr:{interpreter}", "framework probe: %s", result.stderr.strip()[-300:])
        try:
            data = json.loads(result.stdout.strip().splitlines()[-1])
            frameworks = [_framework_entry(entry) for entry in data.get("frameworks", [])][:20]
            return _short(data.get("python")), frameworks
        except (ValueError, IndexError, AttributeError, TypeError):
            self._warn(
                f"probe-json:{interpreter}", "framework probe printed no JSON: %r", result.stdout[-200:]
            )
            return None, []

    def _container_runtime(self) -> str | None:
        for tool in ("docker", "podman", "containerd"):
            result = self._run([tool, "--version"], TOOL_TIMEOUT_S)
            version = parse_tool_version(result.stdout) if result and result.returncode == 0 else None
            if version:
                return f"{tool} {version}"
        return None

    def _containers(self) -> list[dict]:
        """The CUDA of running containers' images, where the agent can see them (docker or podman CLI)."""
        for tool in ("docker", "podman"):
            listed = self._run([tool, "ps", "-q"], TOOL_TIMEOUT_S)
            if listed is None or listed.returncode != 0:
                continue
            ids = [line.strip() for line in listed.stdout.splitlines() if line.strip()][:32]
            if not ids:
                return []
            inspected = self._run([tool, "inspect", "--format", CONTAINER_INSPECT_FORMAT, *ids], TOOL_TIMEOUT_S)
            if inspected is None or inspected.returncode != 0:
                return []
            return parse_container_cuda(inspected.stdout)
        return []

    def _container_toolkit(self) -> str | None:
        for argv in (["nvidia-ctk", "--version"], ["nvidia-container-cli", "--version"]):
            result = self._run(argv, TOOL_TIMEOUT_S)
            if result and result.returncode == 0:
                version = parse_tool_version(result.stdout)
                if version:
                    return version
        return None

    def _kernel(self) -> str | None:
        try:
            return (self.proc_root / "sys/kernel/osrelease").read_text(encoding="ascii").strip()[:256] or None
        except OSError:
            return platform.release() or None

    def _cpu_model(self) -> str | None:
        try:
            text = (self.proc_root / "cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        for line in text.splitlines():
            key, sep, value = line.partition(":")
            # x86 says "model name"; some ARM kernels only have "Hardware" or "Model".
            if sep and key.strip() in ("model name", "Hardware", "Model") and value.strip():
                return value.strip()[:256]
        return None

    # -- per report -----------------------------------------------------------------------------

    def stack(self, driver_version: str | None, cuda_driver_version: str | None) -> dict:
        facts = self._slow_facts()
        return {
            "driver_version": driver_version,
            "cuda_driver_version": cuda_driver_version,
            "cuda_toolkits": facts["cuda_toolkits"],
            "python": facts["python"],
            "frameworks": facts["frameworks"],
            "container_runtime": facts["container_runtime"],
            "nvidia_container_toolkit": facts["nvidia_container_toolkit"],
            "os": facts["os"],
            "kernel": facts["kernel"],
        }

    def host(self, *, cpu_count: int | None, mem_total_bytes: int | None) -> dict:
        facts = self._slow_facts()
        return {
            "os": facts["os"],
            "kernel": facts["kernel"],
            "cpu_model": facts["cpu_model"],
            "cpu_count": cpu_count,
            "mem_total_bytes": mem_total_bytes,
            # A new boot id changes the inventory hash, so the server learns of every reboot (Xid escalation).
            "boot_id": self._boot_id(),
        }

    def _boot_id(self) -> str | None:
        try:
            return (Path(self.proc_root) / "sys/kernel/random/boot_id").read_text().strip()[:64] or None
        except OSError:
            return None


def _short(value: object, limit: int = 64) -> str | None:
    return str(value)[:limit] if value is not None else None


FRAMEWORK_KINDS = ("framework", "runtime_library", "container", "cuda_compat")


def _framework_entry(entry: dict) -> dict:
    arch = entry.get("arch_list")
    result = {
        "name": _short(entry.get("name")),
        "version": _short(entry.get("version")),
        "cuda": _short(entry.get("cuda")),
        "arch_list": [str(a)[:32] for a in arch][:64] if isinstance(arch, list) else None,
    }
    if entry.get("kind") in FRAMEWORK_KINDS[1:]:
        result["kind"] = entry["kind"]
    return result
