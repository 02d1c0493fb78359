"""``fleet-agent verify``: a smoke test an operator runs after installing the agent on a node.

Checks follow the triage order: GPUs visible and as expected, memory readable, a short compute run
when a CUDA framework is present, the state directory's disk, then the round trip to the server.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from fleet_agent.assembly import resolve_kernel_log_source
from fleet_agent.client import ControlPlaneClient, DeliveryError
from fleet_agent.collectors.stack import CommandRunner, run_command
from fleet_agent.config import Config
from fleet_agent.credentials import credential_path, load_enrollment
from fleet_agent.dcgm import append_inbox, diagnose, inbox_path
from fleet_agent.nvml import NvmlAdapter, NvmlSample

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"
COMPUTE_TIMEOUT_S = 120.0

# Runs in the framework interpreter: a small matmul on every visible GPU, checked on the host.
COMPUTE_PROBE = r"""
import json, sys
try:
    import torch
except ImportError:
    print(json.dumps({"torch": False})); sys.exit(0)
if not torch.cuda.is_available():
    print(json.dumps({"torch": True, "cuda": False})); sys.exit(0)
results = []
for index in range(torch.cuda.device_count()):
    device = torch.device("cuda", index)
    a = torch.ones((512, 512), device=device)
    value = float((a @ a).sum().item())
    torch.cuda.synchronize(device)
    results.append({"index": index, "ok": value == 512.0 ** 3})
print(json.dumps({"torch": True, "cuda": True, "devices": results}))
"""


@dataclass(frozen=True)
class CheckResult:
    name: str
    result: str
    detail: str


def check_nvml(sample: NvmlSample) -> CheckResult:
    visibility = sample.visibility
    if visibility["nvml"] != "ok":
        return CheckResult("nvml", FAIL, f"{visibility['nvml']}: {visibility['message']}")
    return CheckResult("nvml", PASS, f"driver {sample.driver_version}, CUDA {sample.cuda_driver_version}")


def check_gpu_count(sample: NvmlSample) -> CheckResult:
    visibility = sample.visibility
    count, expected = visibility["gpu_count"], visibility["expected_gpu_count"]
    if count is None:
        return CheckResult("gpu count", SKIP, "NVML unavailable")
    if expected is None:
        return CheckResult(
            "gpu count", PASS, f"{count} GPU(s); no expected count configured (--expected-gpus)"
        )
    if count != expected:
        return CheckResult("gpu count", FAIL, f"{count} GPU(s) visible, {expected} expected")
    return CheckResult("gpu count", PASS, f"{count} of {expected}")


def check_gpu_memory(sample: NvmlSample) -> CheckResult:
    if not sample.gpus:
        return CheckResult("gpu memory", SKIP, "no GPU visible")
    bad = [str(gpu["index"]) for gpu in sample.gpus if gpu["lost"] or gpu["memory_total_bytes"] is None]
    if bad:
        return CheckResult("gpu memory", FAIL, f"unreadable or lost: GPU {', '.join(bad)}")
    total = sum(gpu["memory_total_bytes"] for gpu in sample.gpus)
    return CheckResult("gpu memory", PASS, f"{len(sample.gpus)} GPU(s), {total / 2**30:.0f} GiB in total")


def check_compute(python: str | None, runner: CommandRunner = run_command) -> CheckResult:
    if not python:
        return CheckResult("compute", SKIP, "no framework interpreter configured (--python)")
    interpreter = str(Path(python) / "bin" / "python") if Path(python).is_dir() else python
    result = runner([interpreter, "-c", COMPUTE_PROBE], COMPUTE_TIMEOUT_S)
    if result is None:
        return CheckResult("compute", FAIL, f"{interpreter} not found or timed out")
    try:
        data = json.loads(result.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return CheckResult("compute", FAIL, f"probe failed: {result.stderr.strip()[-300:] or 'no output'}")
    if not data.get("torch"):
        return CheckResult("compute", SKIP, f"torch is not installed in {interpreter}")
    if not data.get("cuda"):
        return CheckResult("compute", FAIL, "torch is installed but CUDA is not available to it")
    failed = [str(d["index"]) for d in data.get("devices", []) if not d.get("ok")]
    if failed or not data.get("devices"):
        return CheckResult("compute", FAIL, f"wrong result on GPU {', '.join(failed) or '(none ran)'}")
    return CheckResult("compute", PASS, f"512×512 matmul correct on {len(data['devices'])} GPU(s)")


def check_disk(state_dir: str, size: int = 1024 * 1024) -> CheckResult:
    payload = os.urandom(size)
    try:
        Path(state_dir).mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        with tempfile.NamedTemporaryFile(dir=state_dir, prefix=".verify-") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
            handle.seek(0)
            readback = handle.read()
        elapsed = max(time.monotonic() - started, 1e-6)
    except OSError as err:
        return CheckResult("state dir disk", FAIL, f"{state_dir}: {err}")
    if readback != payload:
        return CheckResult("state dir disk", FAIL, f"{state_dir}: data read back differs from data written")
    return CheckResult(
        "state dir disk", PASS, f"{state_dir}: 1 MiB written, synced, read back ({elapsed * 1000:.0f} ms)"
    )


def check_server(server: str | None, ca_file: str | None) -> CheckResult:
    if not server:
        return CheckResult("server", SKIP, "no server configured (--server) and not enrolled")
    try:
        started = time.monotonic()
        status = ControlPlaneClient(server, ca_file=ca_file, timeout=5).healthz()
    except (DeliveryError, ValueError) as err:
        return CheckResult("server", FAIL, str(err))
    elapsed_ms = (time.monotonic() - started) * 1000
    if status != 200:
        return CheckResult("server", FAIL, f"GET {server}/healthz answered {status}")
    return CheckResult("server", PASS, f"GET {server}/healthz 200 in {elapsed_ms:.0f} ms")


def check_enrollment(state_dir: str) -> CheckResult:
    try:
        enrollment = load_enrollment(credential_path(state_dir))
    except ValueError as err:
        return CheckResult("enrolment", FAIL, str(err))
    if enrollment is None:
        return CheckResult("enrolment", SKIP, "not enrolled yet (fleet-agent enroll --server URL --token T)")
    return CheckResult("enrolment", PASS, f"node {enrollment.node_id} at {enrollment.server}")


def check_kernel_log(setting: str) -> CheckResult:
    source = resolve_kernel_log_source(setting)
    if source is None:
        return CheckResult("kernel log", SKIP, "no readable kernel log: Xid lines will be missed")
    path = source[len("kmsg:"):] if source.startswith("kmsg:") else source
    if source not in ("kmsg", "journal") and not os.access(path, os.R_OK):
        return CheckResult("kernel log", FAIL, f"{source} is not readable")
    return CheckResult("kernel log", PASS, f"source: {source}")


def check_dcgm_diag(level: int, config: Config, sample: NvmlSample) -> CheckResult:
    """DCGM's active diagnostic at ``level``; its result is left in the diagnostics inbox, which the running agent
    reports (a failed test becomes a `dcgm_diag_failed` finding)."""
    gpus = {gpu["index"]: {"uuid": gpu.get("uuid"), "pci_bus_id": gpu.get("pci_bus_id")} for gpu in sample.gpus}

    def sink(event: dict) -> None:
        try:
            append_inbox(inbox_path(config.state_dir), event)
        except OSError as err:
            sink.problem = f"; not reported: cannot write {inbox_path(config.state_dir)}: {err}"

    sink.problem = ""
    run = diagnose(level, dcgmi=config.dcgmi, gpus_by_index=gpus, sink=sink)
    name = f"dcgm diag -r {level}"
    if run.outcome == "unavailable":
        return CheckResult(name, SKIP, run.message)
    return CheckResult(name, PASS if run.outcome == "pass" else FAIL, run.message + sink.problem)


def run_checks(
    config: Config, *, nvml_module: Any = None, runner: CommandRunner = run_command, level: int | None = None
) -> list[CheckResult]:
    adapter = NvmlAdapter(nvml_module, expected_gpu_count=config.expected_gpus)
    try:
        sample = adapter.sample()
    finally:
        adapter.shutdown()
    try:
        enrollment = load_enrollment(credential_path(config.state_dir))
    except ValueError:
        enrollment = None
    server = config.server or (enrollment.server if enrollment else None)
    checks: list[Callable[[], CheckResult]] = [
        lambda: check_nvml(sample),
        lambda: check_gpu_count(sample),
        lambda: check_gpu_memory(sample),
        lambda: check_compute(config.python, runner),
        lambda: check_disk(config.state_dir),
        lambda: check_kernel_log(config.kernel_log),
        lambda: check_enrollment(config.state_dir),
        lambda: check_server(server, config.ca_file),
    ]
    if level is not None:
        checks.insert(4, lambda: check_dcgm_diag(level, config, sample))
    return [check() for check in checks]


def print_table(results: list[CheckResult], out: TextIO) -> None:
    width = max(len(r.name) for r in results)
    out.write(f"{'CHECK'.ljust(width)}  RESULT  DETAIL\n")
    for result in results:
        out.write(f"{result.name.ljust(width)}  {result.result.ljust(6)}  {result.detail}\n")
    failed = sum(r.result == FAIL for r in results)
    out.write(f"\n{'FAIL' if failed else 'PASS'}: {failed} check(s) failed\n")
