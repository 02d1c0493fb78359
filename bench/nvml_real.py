"""The agent's NVML adapter on a real GPU node, against ``nvidia-smi -q -x`` as the baseline.

    PYTHONPATH=agents python3 bench/nvml_real.py --cycles 100

Everything the simulator cannot tell: what the driver really answers per field (None = NotSupported,
NoPermission or FunctionNotFound on this board and driver), what one ``NvmlAdapter.sample()`` costs in CPU
and wall time with the driver's ioctls in it, against running ``nvidia-smi -q -x`` and parsing its XML (the
way an agent that shells out to it works; its CPU is the child process's), and whether NVML's Xid events can
be registered here; and whether DCGM is present (``dcgmi --version``, the ``nv-hostengine`` binary, a host
engine answering ``dcgmi discovery -l``) — with ``--dcgm-diag LEVEL`` it also runs ``dcgmi diag -r LEVEL -j``
through the agent's parser and prints the normalized result. It prints one JSON object. Without a GPU it prints
the adapter's visibility (status and the message an operator would see) and the DCGM check, and exits 0.

Needs only the standard library, ``agents/`` and NVIDIA's ``pynvml`` module. For a machine without a package
index, carry the wheel (pure Python, importable from the zip):

    .venv/bin/pip download --no-deps 'nvidia-ml-py>=12,<14' -d var/device
    PYTHONPATH=agents:$(ls var/device/nvidia_ml_py-*.whl) python3 bench/nvml_real.py
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "agents"))

from fleet_agent.dcgm import dcgm_presence, diagnose  # noqa: E402
from fleet_agent.nvml import NvmlAdapter, XidEventWatcher  # noqa: E402


def _dcgm(level: int | None, gpus: dict[int, dict]) -> dict:
    found = dcgm_presence()
    if level is None or found["dcgmi"] is None:
        return found
    run = diagnose(level, gpus_by_index=gpus)
    return {**found, "diag": {"level": level, "outcome": run.outcome, "message": run.message,
                              "exit_status": run.exit_status, "seconds": round((run.finished_at - run.started_at)
                                                                               .total_seconds(), 1),
                              "summary": run.summary}}


def _summary(cpus: list[float], walls: list[float]) -> dict:
    return {"cpu_ms_p50": round(1000 * statistics.median(cpus), 3),
            "wall_ms_p50": round(1000 * statistics.median(walls), 3), "wall_ms_max": round(1000 * max(walls), 3)}


def _timed(fn, cycles: int) -> dict:
    walls, cpus = [], []
    for _ in range(cycles):
        cpu, wall = time.process_time(), time.perf_counter()
        fn()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return _summary(cpus, walls)


def _nvidia_smi(cycles: int) -> dict | None:
    """One ``nvidia-smi -q -x`` per cycle, parsed like bench/agent_cost.py's baseline; child CPU included."""
    binary = shutil.which("nvidia-smi")
    if binary is None:
        return None
    sys.path.insert(0, str(ROOT / "bench"))
    from agent_cost import parse_nvidia_smi_xml

    walls, cpus = [], []
    for _ in range(cycles):
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu, wall = time.process_time(), time.perf_counter()
        xml = subprocess.run([binary, "-q", "-x"], capture_output=True, check=True, timeout=60).stdout
        parse_nvidia_smi_xml(xml, None)
        walls.append(time.perf_counter() - wall)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(time.process_time() - cpu + (after.ru_utime - children.ru_utime)
                    + (after.ru_stime - children.ru_stime))
    return _summary(cpus, walls)


def _unavailable_fields(gpu: dict, prefix: str = "") -> list[str]:
    missing = []
    for key, value in gpu.items():
        if value is None:
            missing.append(prefix + key)
        elif isinstance(value, dict):
            missing += _unavailable_fields(value, f"{prefix}{key}.")
    return missing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--baseline-cycles", type=int, default=20, help="nvidia-smi runs (each takes ~100 ms+)")
    parser.add_argument("--dcgm-diag", type=int, choices=(1, 2, 3), default=None, metavar="LEVEL",
                        help="also run dcgmi diag -r LEVEL -j (level 1 takes about a minute; needs idle GPUs)")
    parser.add_argument("--simulate", action="store_true",
                        help="8 simulated H100s instead of the driver (keeps this script tested where there is no GPU)")
    args = parser.parse_args()

    module = None
    if args.simulate:
        from fleet_agent.simnvml import SimulatedGpu, SimulatedNvml

        module = SimulatedNvml([SimulatedGpu.from_model("H100-SXM-80GB", i) for i in range(8)])
    adapter = NvmlAdapter(module)
    first = adapter.sample()
    result: dict = {"machine": f"{platform.machine()}, {platform.node()}, Python {platform.python_version()}",
                    "visibility": first.visibility, "driver_version": first.driver_version,
                    "cuda_driver_version": first.cuda_driver_version}
    result["dcgm"] = _dcgm(args.dcgm_diag, {g["index"]: {"uuid": g["uuid"], "pci_bus_id": g["pci_bus_id"]}
                                            for g in first.gpus})
    if first.visibility.get("nvml") != "ok" or not first.gpus:
        print(json.dumps(result, indent=2))
        return
    result["gpus"] = [{"index": g["index"], "name": g["name"], "uuid": g["uuid"], "pci_bus_id": g["pci_bus_id"],
                       "temperature_thresholds": g.get("temperature_thresholds"),
                       "unavailable": _unavailable_fields(g)} for g in first.gpus]
    result["sample_gpu_entry"] = first.gpus[0]
    result["events_in_first_sample"] = first.events

    agent = _timed(adapter.sample, args.cycles)
    result["adapter_sample"] = {"gpus": len(first.gpus), "cycles": args.cycles, **agent}
    baseline = None if args.simulate else _nvidia_smi(args.baseline_cycles)
    result["baseline_nvidia_smi_xml"] = baseline
    if baseline:
        result["ratio_baseline_cpu_to_adapter_cpu"] = round(baseline["cpu_ms_p50"] / max(agent["cpu_ms_p50"], 1e-3), 1)

    watcher = XidEventWatcher(adapter)
    registered = watcher.open()
    started = time.perf_counter()
    waited = watcher.wait(2000)
    result["xid_events"] = {"gpus_registered": registered, "events_in_2_s": waited,
                            "wait_returned_after_ms": round(1000 * (time.perf_counter() - started))}
    watcher.close()
    adapter.shutdown()
    print(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()
