"""Simulated software stack: answers the real ``StackCollector``'s commands and host files.

The collector runs ``<python> -c <probe>``, ``docker --version`` and ``nvidia-ctk --version`` and
reads os-release and CUDA toolkit version files; the simulator answers the commands with
real-format output and writes the files into the node's simulated host root.
"""

from __future__ import annotations

import json
from pathlib import Path

from fleet_agent.collectors.stack import CommandResult

SIMULATED_PYTHON = "/opt/simulated/venv/bin/python"
_TOOL_OUTPUT = {
    "docker": "Docker version {version}, build 9714adc",
    "podman": "podman version {version}",
    "containerd": "containerd containerd.io {version} e377cd56a71523140ca6ae87e30244719194a521",
}


class SimulatedStack:
    def __init__(self, host_root: Path, facts: dict):
        self.host_root = Path(host_root)
        self.facts = facts  # mutable: faults change frameworks; driver versions live in the NVML sim
        self.write_host_files()

    def write_host_files(self) -> None:
        etc = self.host_root / "etc"
        etc.mkdir(parents=True, exist_ok=True)
        name = self.facts.get("os") or "Linux"
        (etc / "os-release").write_text(f'NAME="{name.split()[0]}"\nPRETTY_NAME="{name}"\nID=linux\n')
        for version in self.facts.get("cuda_toolkits") or []:
            toolkit = self.host_root / "usr/local" / f"cuda-{version}"
            toolkit.mkdir(parents=True, exist_ok=True)
            payload = {"cuda": {"name": "CUDA SDK", "version": f"{version}.1"}}
            (toolkit / "version.json").write_text(json.dumps(payload))
        for package in self.facts.get("cuda_compat") or []:
            # cuda-compat-X-Y installs the newer user-mode driver next to the toolkit it belongs to.
            toolkit = self.host_root / "usr/local" / f"cuda-{package['cuda']}"
            (toolkit / "compat").mkdir(parents=True, exist_ok=True)
            payload = {"cuda": {"name": "CUDA SDK", "version": f"{package['cuda']}.0"}}
            (toolkit / "version.json").write_text(json.dumps(payload))
            (toolkit / "compat" / f"libcuda.so.{package['libcuda']}").write_bytes(b"")
            (toolkit / "compat" / "libcuda.so.1").write_bytes(b"")

    def run(self, argv: list[str], timeout: float) -> CommandResult | None:
        """Same contract as ``collectors.stack.run_command``: None when the binary does not exist."""
        tool = Path(argv[0]).name
        if argv[0] == SIMULATED_PYTHON and argv[1:2] == ["-c"]:
            payload = {"python": self.facts.get("python"), "frameworks": self.facts.get("frameworks") or []}
            return CommandResult(0, json.dumps(payload) + "\n", "")
        runtime = self.facts.get("container_runtime") or ""
        containers = self.facts.get("containers") or []
        if tool in ("docker", "podman") and runtime.startswith(tool + " ") and argv[1:2] == ["ps"]:
            return CommandResult(0, "".join(f"{i:012x}\n" for i in range(1, len(containers) + 1)), "")
        if tool in ("docker", "podman") and runtime.startswith(tool + " ") and argv[1:2] == ["inspect"]:
            lines = [f"{c['image']}|PATH=/usr/local/nvidia/bin:/usr/bin;"
                     + (f"CUDA_VERSION={c['cuda']};NVIDIA_REQUIRE_CUDA=cuda>={c['cuda']};" if c.get("cuda") else "")
                     for c in containers]
            return CommandResult(0, "\n".join(lines) + "\n", "")
        if tool in _TOOL_OUTPUT and runtime.startswith(tool + " "):
            version = runtime.split(" ", 1)[1]
            return CommandResult(0, _TOOL_OUTPUT[tool].format(version=version) + "\n", "")
        toolkit = self.facts.get("nvidia_container_toolkit")
        if tool == "nvidia-ctk" and toolkit:
            return CommandResult(0, f"NVIDIA Container Toolkit CLI version {toolkit}\ncommit: 1a2b3c4d\n", "")
        return None
