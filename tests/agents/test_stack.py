"""Software stack collector: fixture host root, real-format tool output, a real framework probe."""

from __future__ import annotations

import sys
import textwrap

import pytest

from fleet_agent.collectors.stack import (
    CONTAINER_INSPECT_FORMAT,
    CommandResult,
    StackCollector,
    find_cuda_compat,
    find_cuda_toolkits,
    parse_container_cuda,
    parse_tool_version,
    read_os_release,
    run_command,
)
from tests.agents.conftest import FIXTURES

HOST = FIXTURES / "host"
PROC = FIXTURES / "proc" / "t0"


def tool_runner(outputs: dict[str, str]):
    calls = []

    def run(argv, timeout):
        calls.append(argv)
        text = outputs.get(argv[0])
        return CommandResult(0, text, "") if text is not None else None

    run.calls = calls
    return run


def test_host_files_and_tool_versions():
    runner = tool_runner(
        {
            "docker": "Docker version 26.1.0, build 9714adc\n",
            "nvidia-ctk": "NVIDIA Container Toolkit CLI version 1.15.0\n"
            "commit: ddeeca392c7bd8b33d0a66400b77af7a97e16cef\n",
        }
    )
    collector = StackCollector(host_root=HOST, proc_root=PROC, runner=runner)
    stack = collector.stack("550.54.15", "12.4")
    assert stack == {
        "driver_version": "550.54.15",
        "cuda_driver_version": "12.4",
        "cuda_toolkits": ["11.0", "12.4"],  # cuda-12.1 has a corrupt version.json: skipped
        "python": None,
        "frameworks": [],
        "container_runtime": "docker 26.1.0",
        "nvidia_container_toolkit": "1.15.0",
        "os": "Ubuntu 22.04.4 LTS",
        "kernel": "5.15.0-105-generic",
    }
    host = collector.host(cpu_count=2, mem_total_bytes=1024)
    assert host == {
        "os": "Ubuntu 22.04.4 LTS",
        "kernel": "5.15.0-105-generic",
        "cpu_model": "Intel(R) Xeon(R) Platinum 8480+",
        "cpu_count": 2,
        "mem_total_bytes": 1024,
        "boot_id": "6b1f5a0e-8c1d-4c5e-9d2a-3f8e7b6a5c4d",
    }
    assert ["python"] not in [c[:1] for c in runner.calls]  # no interpreter configured: no probe


def test_slow_facts_are_cached_until_refresh():
    runner = tool_runner(
        {"containerd": "containerd containerd.io 1.6.31 e377cd56a71523140ca6ae87e30244719194a521"}
    )
    collector = StackCollector(host_root=HOST, proc_root=PROC, runner=runner)
    assert collector.stack(None, None)["container_runtime"] == "containerd 1.6.31"
    calls = len(runner.calls)
    collector.stack("1", "2")
    collector.host(cpu_count=None, mem_total_bytes=None)
    assert len(runner.calls) == calls
    collector.refresh()
    assert len(runner.calls) == 2 * calls


def test_missing_binaries_are_null(tmp_path):
    stack = StackCollector(host_root=tmp_path, proc_root=tmp_path, runner=tool_runner({})).stack(None, None)
    assert stack["container_runtime"] is None and stack["nvidia_container_toolkit"] is None
    assert stack["os"] is None and stack["cuda_toolkits"] == []


@pytest.mark.parametrize(
    ("output", "version"),
    [
        ("Docker version 26.1.0, build 9714adc", "26.1.0"),
        ("podman version 4.9.3", "4.9.3"),
        (
            "containerd github.com/containerd/containerd/v2 v2.0.0 207ad711eabd375a01713109a8a197d197ff6542",
            "2.0.0",
        ),
        ("cli-version: 1.14.6\nlib-version: 1.14.6", "1.14.6"),
        ("", None),
        ("no digits here", None),
    ],
)
def test_parse_tool_version(output, version):
    assert parse_tool_version(output) == version


def test_framework_probe_runs_in_the_configured_interpreter(tmp_path, monkeypatch):
    """The real probe script, in a real interpreter, finding a (fake) torch on its path."""
    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text(
        textwrap.dedent("""
        __version__ = "2.4.0+cu124"
        class version:
            cuda = "12.4"
        class _C:
            @staticmethod
            def _cuda_getArchFlags():
                return "sm_80 sm_86 sm_90"
    """)
    )
    monkeypatch.setenv("PYTHONPATH", str(site))
    stack = StackCollector(host_root=HOST, proc_root=PROC, python=sys.executable, timeout_s=30).stack(
        None, None
    )
    assert stack["python"] == ".".join(map(str, sys.version_info[:3]))
    assert stack["frameworks"] == [
        {"name": "torch", "version": "2.4.0+cu124", "cuda": "12.4", "arch_list": ["sm_80", "sm_86", "sm_90"]}
    ]


def test_framework_probe_with_a_broken_framework_keeps_its_name(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text(
        "raise ImportError('libcudart.so.12: cannot open shared object')\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(site))
    stack = StackCollector(host_root=HOST, proc_root=PROC, python=sys.executable, timeout_s=30).stack(
        None, None
    )
    assert stack["frameworks"] == [{"name": "torch", "version": None, "cuda": None, "arch_list": None}]


def test_interpreter_that_is_missing_or_prints_garbage_is_survivable(tmp_path):
    missing = StackCollector(host_root=HOST, proc_root=PROC, python=str(tmp_path / "nope" / "python"))
    assert missing.stack(None, None)["frameworks"] == []
    garbage = StackCollector(
        host_root=HOST,
        proc_root=PROC,
        python="python",
        runner=lambda argv, timeout: CommandResult(0, "not json\n", ""),
    )
    assert garbage.stack(None, None)["python"] is None


def test_run_command_times_out_and_reports_missing_binaries():
    assert run_command(["definitely-not-a-binary-fleet"], 1) is None
    assert run_command([sys.executable, "-c", "import time; time.sleep(5)"], 0.3) is None
    done = run_command([sys.executable, "-c", "print('hi')"], 10)
    assert done is not None and done.stdout.strip() == "hi"


def test_virtualenv_directory_is_accepted(tmp_path):
    seen = []
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    StackCollector(
        host_root=HOST, proc_root=PROC, python=str(venv), runner=lambda argv, timeout: seen.append(argv[0])
    ).refresh()
    assert str(venv / "bin" / "python") in seen


def test_os_release_and_toolkit_helpers(tmp_path):
    assert read_os_release(HOST) == "Ubuntu 22.04.4 LTS"
    assert read_os_release(tmp_path) is None
    assert find_cuda_toolkits(HOST) == ["11.0", "12.4"]


def test_probe_reports_the_cuda_runtime_libraries_the_frameworks_ship(tmp_path, monkeypatch):
    """pip wheels of torch / jax pull in nvidia-cuda-runtime-cuXX: a CUDA runtime the driver must serve."""
    site = tmp_path / "site"
    info = site / "nvidia_cuda_runtime_cu12-12.6.77.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: nvidia-cuda-runtime-cu12\nVersion: 12.6.77\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    stack = StackCollector(host_root=tmp_path, proc_root=PROC, python=sys.executable, timeout_s=30).stack(None, None)
    assert stack["frameworks"] == [{"name": "nvidia-cuda-runtime-cu12", "version": "12.6.77", "cuda": "12.6",
                                    "arch_list": None, "kind": "runtime_library"}]


def test_cuda_compat_packages_are_found_next_to_their_toolkit(tmp_path):
    compat = tmp_path / "usr/local/cuda-12.8/compat"
    compat.mkdir(parents=True)
    (compat.parent / "version.json").write_text('{"cuda": {"name": "CUDA SDK", "version": "12.8.0"}}')
    for name in ("libcuda.so", "libcuda.so.1", "libcuda.so.570.86.10", "libnvidia-ptxjitcompiler.so.570.86.10"):
        (compat / name).write_bytes(b"")
    (tmp_path / "usr/local/cuda-12.4").mkdir(parents=True)  # a toolkit without compat
    assert find_cuda_compat(tmp_path) == [{"name": "cuda-compat", "version": "570.86.10", "cuda": "12.8",
                                           "arch_list": None, "kind": "cuda_compat"}]
    assert find_cuda_compat(tmp_path / "nowhere") == []


def test_running_containers_cuda_from_their_image_environment(tmp_path):
    calls = []

    def run(argv, timeout):
        calls.append(argv)
        if argv[:2] == ["docker", "ps"]:
            return CommandResult(0, "3f4e1a2b\n9c8d7e6f\n", "")
        if argv[:2] == ["docker", "inspect"]:
            return CommandResult(0, "nvcr.io/nvidia/pytorch:25.01-py3|PATH=/usr/bin;CUDA_VERSION=12.8.0.038;"
                                    "NVIDIA_REQUIRE_CUDA=cuda>=12.8 brand=tesla,driver>=470;\n"
                                    "redis:7|PATH=/usr/bin;\n", "")
        return None

    stack = StackCollector(host_root=tmp_path, proc_root=PROC, runner=run).stack(None, None)
    assert stack["frameworks"] == [{"name": "container nvcr.io/nvidia/pytorch:25.01-py3", "version": "12.8.0.038",
                                    "cuda": "12.8", "arch_list": None, "kind": "container"}]
    assert ["docker", "inspect", "--format", CONTAINER_INSPECT_FORMAT, "3f4e1a2b", "9c8d7e6f"] in calls


def test_container_cuda_from_nvidia_require_cuda_alone():
    out = "myimage:1|NVIDIA_REQUIRE_CUDA=cuda>=11.8 brand=tesla;\nbad line\n"
    assert parse_container_cuda(out) == [{"name": "container myimage:1", "version": "11.8", "cuda": "11.8",
                                          "arch_list": None, "kind": "container"}]
