"""Agent cost: CPU time per collection cycle and resident memory, 8 simulated GPUs, against a baseline.

    .venv/bin/python bench/agent_cost.py --cycles 200

The agent cycle is the daemon's: ``AgentCore.collect()`` — NVML (simulated, 8 × H100, every protocol
field), /proc (a simulated tree in real kernel formats, 96 CPUs), the fabric collector (a simulated /sys with
an HGX board's PCI devices and 8 InfiniBand ports, 600 processes for the fabric-manager / IMEX scan; the slow
facts every 60 s of node time, i.e. every 4th cycle, as the daemon does), kernel log (one new line per cycle),
checkpoint directory, cached software stack, inventory hash, report assembly, JSON encoding and the
durable sqlite spool write. Between cycles, outside the timed region, the simulator moves the node on.

The baseline does the same collection with one difference: the GPU block comes from
``nvidia-smi -q -x``-shaped XML, rendered from the same simulated GPUs and parsed with xml.etree each
cycle, the way an agent that shells out to nvidia-smi works. Rendering stands in for nvidia-smi's
output; the cost of forking a process per cycle (which a real nvidia-smi agent also pays, and
nvidia-smi itself is far heavier than ``cat``) is measured separately and reported, not added.
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "agents"))

from fleet_agent.agent import AgentCore  # noqa: E402
from fleet_agent.collectors.checkpoint import CheckpointCollector  # noqa: E402
from fleet_agent.collectors.fabric import FabricCollector  # noqa: E402
from fleet_agent.collectors.host_health import HostHealthCollector  # noqa: E402
from fleet_agent.collectors.kernel_log import KernelLogCollector  # noqa: E402
from fleet_agent.collectors.stack import CommandResult, StackCollector  # noqa: E402
from fleet_agent.collectors.system import SystemCollector  # noqa: E402
from fleet_agent.nvml import NvmlAdapter, NvmlSample  # noqa: E402
from fleet_agent.protocol import CLOCK_EVENT_REASONS, decode_clock_event_reasons  # noqa: E402
from fleet_agent.report import NodeIdentity, ReportBuilder  # noqa: E402
from fleet_agent.simnvml import SimulatedGpu, SimulatedNvml, SimulatedProcess  # noqa: E402
from fleet_agent.simulator.procfs import Load, SimulatedProc  # noqa: E402
from fleet_agent.simulator.sysfs import SimulatedSys  # noqa: E402
from fleet_agent.spool import Spool  # noqa: E402

GPUS = 8
# nvidia-smi -q -x names each reason as a tag: GpuIdle → clocks_event_reason_gpu_idle.
_REASONS = tuple((f"clocks_event_reason_{re.sub(r'(?<!^)(?=[A-Z])', '_', name).lower()}", bit)
                 for bit, name in CLOCK_EVENT_REASONS)


# -- the baseline: nvidia-smi -q -x ---------------------------------------------------------------


def _sub(parent: ET.Element, tag: str, text: object = None) -> ET.Element:
    element = ET.SubElement(parent, tag)
    if text is not None:
        element.text = str(text)
    return element


def render_nvidia_smi_xml(nvml: SimulatedNvml) -> bytes:
    """What ``nvidia-smi -q -x`` prints for these GPUs (the fields it has on a current driver)."""
    root = ET.Element("nvidia_smi_log")
    _sub(root, "timestamp", time.strftime("%a %b %d %H:%M:%S %Y"))
    _sub(root, "driver_version", nvml.driver_version)
    _sub(root, "cuda_version", f"{nvml.cuda_driver_version // 1000}.{nvml.cuda_driver_version % 1000 // 10}")
    _sub(root, "attached_gpus", len(nvml.gpus))
    for gpu in nvml.gpus:
        node = ET.SubElement(root, "gpu", id=gpu.bus_id)
        for tag, value in (
            ("product_name", gpu.name),
            ("product_brand", "NVIDIA"),
            ("product_architecture", "Hopper"),
            ("display_mode", "Disabled"),
            ("display_active", "Disabled"),
            ("persistence_mode", "Enabled"),
            ("addressing_mode", "None"),
            ("serial", gpu.serial),
            ("uuid", gpu.uuid),
            ("minor_number", gpu.index),
            ("vbios_version", "96.00.99.00.01"),
            ("multigpu_board", "No"),
            ("board_id", f"0x{gpu.index + 0x1800:x}"),
            ("board_part_number", "692-2G520-0200-000"),
            ("gpu_part_number", "2330-885-A1"),
        ):
            _sub(node, tag, value)
        inforom = _sub(node, "inforom_version")
        for tag in ("img_version", "oem_object", "ecc_object", "pwr_object"):
            _sub(inforom, tag, "G520.0200.00.05")
        pci = _sub(node, "pci")
        for tag, value in (
            ("pci_bus", gpu.bus_id[9:11]),
            ("pci_device", "00"),
            ("pci_domain", "0000"),
            ("pci_device_id", "233010DE"),
            ("pci_bus_id", gpu.bus_id),
            ("pci_sub_system_id", "16C110DE"),
        ):
            _sub(pci, tag, value)
        link = _sub(pci, "pci_gpu_link_info")
        current = gpu.pcie_current or gpu.pcie_max
        generation = _sub(link, "pcie_gen")
        _sub(generation, "max_link_gen", gpu.pcie_max[0])
        _sub(generation, "current_link_gen", current[0])
        _sub(generation, "device_current_link_gen", current[0])
        _sub(generation, "max_host_link_gen", gpu.pcie_max[0])
        widths = _sub(link, "link_widths")
        _sub(widths, "max_link_width", f"{gpu.pcie_max[1]}x")
        _sub(widths, "current_link_width", f"{current[1]}x")
        for tag, value in (
            ("replay_counter", 0),
            ("replay_rollover_counter", 0),
            ("tx_util", "512 KB/s"),
            ("rx_util", "1024 KB/s"),
            ("atomic_caps_inbound", "N/A"),
        ):
            _sub(pci, tag, value)
        _sub(node, "fan_speed", "N/A")
        _sub(node, "performance_state", "P0")
        reasons = _sub(node, "clocks_event_reasons")
        for tag, bit in _REASONS:
            _sub(reasons, tag, "Active" if gpu.clock_reasons & bit else "Not Active")
        used = min(gpu.memory_used, gpu.memory_total)
        fb = _sub(node, "fb_memory_usage")
        for tag, value in (
            ("total", gpu.memory_total),
            ("reserved", 0),
            ("used", used),
            ("free", gpu.memory_total - used),
        ):
            _sub(fb, tag, f"{value // 2**20} MiB")
        bar1 = _sub(node, "bar1_memory_usage")
        for tag, value in (("total", "131072 MiB"), ("used", "1 MiB"), ("free", "131071 MiB")):
            _sub(bar1, tag, value)
        _sub(node, "compute_mode", "Default")
        utilization = _sub(node, "utilization")
        for tag, value in (
            ("gpu_util", gpu.util_gpu),
            ("memory_util", gpu.util_memory),
            ("encoder_util", 0),
            ("decoder_util", 0),
            ("jpeg_util", 0),
            ("ofa_util", 0),
        ):
            _sub(utilization, tag, f"{value} %")
        ecc_mode = _sub(node, "ecc_mode")
        _sub(ecc_mode, "current_ecc", "Enabled")
        _sub(ecc_mode, "pending_ecc", "Enabled")
        errors = _sub(node, "ecc_errors")
        for counter, counter_type in (("volatile", 0), ("aggregate", 1)):
            block = _sub(errors, counter)
            for tag, error_type in (
                ("sram_correctable", 0),
                ("sram_uncorrectable_parity", 1),
                ("sram_uncorrectable_secded", 1),
                ("dram_correctable", 0),
                ("dram_uncorrectable", 1),
            ):
                _sub(block, tag, gpu.ecc.get((error_type, counter_type), 0) if "dram" in tag else 0)
        pages = _sub(node, "retired_pages")
        for tag in ("multiple_single_bit_retirement", "double_bit_retirement"):
            _sub(_sub(pages, tag), "retired_count", "N/A")
        _sub(pages, "pending_blacklist", "N/A")
        _sub(pages, "pending_retirement", "N/A")
        rows = _sub(node, "remapped_rows")
        correctable, uncorrectable, pending, failure = gpu.remapped
        _sub(rows, "remapped_row_corr", correctable)
        _sub(rows, "remapped_row_unc", uncorrectable)
        _sub(rows, "remapped_row_pending", "Yes" if pending else "No")
        _sub(rows, "remapped_row_failure", "Yes" if failure else "No")
        histogram = _sub(rows, "row_remapper_histogram")
        for tag in (
            "row_remapper_histogram_max",
            "row_remapper_histogram_high",
            "row_remapper_histogram_partial",
            "row_remapper_histogram_low",
            "row_remapper_histogram_none",
        ):
            _sub(histogram, tag, "0 bank(s)")
        temperature = _sub(node, "temperature")
        for tag, value in (
            ("gpu_temp", f"{gpu.temperature} C"),
            ("gpu_temp_tlimit", "41 C"),
            ("gpu_temp_max_threshold", "92 C"),
            ("gpu_temp_slow_threshold", "89 C"),
            ("gpu_temp_max_gpu_threshold", "87 C"),
            ("memory_temp", "48 C"),
        ):
            _sub(temperature, tag, value)
        power = _sub(node, "gpu_power_readings")
        for tag, value in (
            ("power_state", "P0"),
            ("average_power_draw", f"{gpu.power_mw / 1000:.2f} W"),
            ("instant_power_draw", f"{gpu.power_mw / 1000:.2f} W"),
            ("current_power_limit", f"{gpu.power_limit_mw / 1000:.2f} W"),
            ("requested_power_limit", f"{gpu.power_limit_mw / 1000:.2f} W"),
            ("default_power_limit", f"{gpu.power_limit_mw / 1000:.2f} W"),
            ("min_power_limit", "200.00 W"),
            ("max_power_limit", "700.00 W"),
        ):
            _sub(power, tag, value)
        clocks = _sub(node, "clocks")
        for tag, value in (
            ("graphics_clock", gpu.sm_clock),
            ("sm_clock", gpu.sm_clock),
            ("mem_clock", 2619),
            ("video_clock", 1755),
        ):
            _sub(clocks, tag, f"{value} MHz")
        for block in ("applications_clocks", "default_applications_clocks", "max_clocks"):
            element = _sub(node, block)
            for tag in ("graphics_clock", "mem_clock"):
                _sub(element, tag, "1980 MHz")
        processes = _sub(node, "processes")
        for proc in gpu.processes:
            info = _sub(processes, "process_info")
            for tag, value in (
                ("gpu_instance_id", "N/A"),
                ("compute_instance_id", "N/A"),
                ("pid", proc.pid),
                ("type", "C"),
                ("process_name", proc.name),
                ("used_memory", f"{(proc.used_memory_bytes or 0) // 2**20} MiB"),
            ):
                _sub(info, tag, value)
    return ET.tostring(root)


def _number(text: str | None, unit: str = "") -> float | None:
    if text is None or text.strip() in ("N/A", "[N/A]", ""):
        return None
    return float(text.replace(unit, "").strip())


def _int(text: str | None, unit: str = "") -> int | None:
    try:
        value = _number(text, unit)
    except ValueError:  # real nvidia-smi prints words where a number is unavailable ("Not Supported", ...)
        return None
    return int(value) if value is not None else None


def _float(text: str | None, unit: str) -> float | None:
    try:
        return _number(text, unit)
    except ValueError:
        return None


def _mib(text: str | None) -> int | None:
    value = _int(text, "MiB")
    return value * 2**20 if value is not None else None


class XmlGpuSource:
    """Drop-in for ``NvmlAdapter.sample()`` that gets the GPU block from nvidia-smi XML."""

    def __init__(self, nvml: SimulatedNvml, expected: int):
        self.nvml = nvml
        self.expected = expected

    def shutdown(self) -> None:
        pass

    def sample(self) -> NvmlSample:
        return parse_nvidia_smi_xml(render_nvidia_smi_xml(self.nvml), self.expected)


def parse_nvidia_smi_xml(xml: bytes, expected: int | None) -> NvmlSample:
    """``nvidia-smi -q -x`` output → the protocol's GPU block, the way an agent that shells out to it works."""
    root = ET.fromstring(xml)
    gpus = []
    for index, node in enumerate(root.iter("gpu")):
        mask = sum(
            bit for tag, bit in _REASONS if node.findtext(f"clocks_event_reasons/{tag}") == "Active"
        )
        processes = [
            {
                "pid": _int(p.findtext("pid")),
                "used_memory_bytes": _mib(p.findtext("used_memory")),
                "name": p.findtext("process_name"),
            }
            for p in node.iter("process_info")
        ]
        ecc = {
            f"{counter}_{kind}": _int(node.findtext(f"ecc_errors/{counter}/dram_{kind}"))
            for counter in ("volatile", "aggregate")
            for kind in ("correctable", "uncorrectable")
        }
        gpus.append(
            {
                "index": index,
                "uuid": node.findtext("uuid"),
                "name": node.findtext("product_name"),
                "serial": node.findtext("serial"),
                "pci_bus_id": node.findtext("pci/pci_bus_id"),
                "lost": False,
                "memory_total_bytes": _mib(node.findtext("fb_memory_usage/total")),
                "memory_used_bytes": _mib(node.findtext("fb_memory_usage/used")),
                "utilization_gpu_pct": _int(node.findtext("utilization/gpu_util"), "%"),
                "utilization_memory_pct": _int(node.findtext("utilization/memory_util"), "%"),
                "temperature_c": _int(node.findtext("temperature/gpu_temp"), "C"),
                "power_draw_w": _float(node.findtext("gpu_power_readings/instant_power_draw"), "W"),
                "power_limit_w": _float(node.findtext("gpu_power_readings/current_power_limit"), "W"),
                "sm_clock_mhz": _int(node.findtext("clocks/sm_clock"), "MHz"),
                "clock_event_reasons_mask": mask,
                "clock_event_reasons": decode_clock_event_reasons(mask),
                "ecc": ecc,
                "retired_pages": None,
                "remapped_rows": {
                    "correctable": _int(node.findtext("remapped_rows/remapped_row_corr")),
                    "uncorrectable": _int(node.findtext("remapped_rows/remapped_row_unc")),
                    "pending": node.findtext("remapped_rows/remapped_row_pending") == "Yes",
                    "failure": node.findtext("remapped_rows/remapped_row_failure") == "Yes",
                },
                "pcie": {
                    "gen_current": _int(node.findtext("pci/pci_gpu_link_info/pcie_gen/current_link_gen")),
                    "gen_max": _int(node.findtext("pci/pci_gpu_link_info/pcie_gen/max_link_gen")),
                    "width_current": _int(
                        node.findtext("pci/pci_gpu_link_info/link_widths/current_link_width"), "x"
                    ),
                    "width_max": _int(
                        node.findtext("pci/pci_gpu_link_info/link_widths/max_link_width"), "x"
                    ),
                },
                # not in nvidia-smi -q: a real nvidia-smi agent needs a second query for it
                "compute_capability": "9.0",
                "processes": processes,
                "nvlink": None,
            }
        )
    visibility = {
        "nvml": "ok",
        "message": None,
        "gpu_count": len(gpus),
        "expected_gpu_count": expected,
        "lost_gpus": [],
    }
    return NvmlSample(
        visibility, gpus, [], root.findtext("driver_version"), root.findtext("cuda_version")
    )


# -- the node -------------------------------------------------------------------------------------


class Node:
    """A simulated 8-GPU node with a real agent engine on top."""

    def __init__(self, work: Path, *, baseline: bool):
        self.rng = random.Random(7)
        gpus = [SimulatedGpu.from_model("H100-SXM-80GB", i, node_key="bench") for i in range(GPUS)]
        self.nvml = SimulatedNvml(gpus)
        self.proc = SimulatedProc(
            work / "proc",
            cpu_count=96,
            mem_total_bytes=2048 * 2**30,
            kernel="5.15.0-105-generic",
            cpu_model="Intel(R) Xeon(R) Platinum 8480+",
            boot_epoch=time.time() - 86400,
            rng=self.rng,
        )
        self.kernel_log = work / "kern.log"
        self.kernel_log.write_text("")
        checkpoints = work / "ckpt"
        for step in range(200):
            (checkpoints / f"run-{step // 50}").mkdir(parents=True, exist_ok=True)
            (checkpoints / f"run-{step // 50}" / f"step-{step:05d}.pt").write_bytes(b"x")
        self.spool = Spool(work / "spool.db")  # durable, exactly like the daemon's
        outputs = {
            "docker": "Docker version 26.1.0, build 9714adc",
            "nvidia-ctk": "NVIDIA Container Toolkit CLI version 1.15.0",
        }
        self.uptime = 1000.0
        node_time = lambda: self.uptime  # noqa: E731 - 15 s of node time per cycle, for the slow-refresh cadence
        self.sys = SimulatedSys(work / "sys", work, work / "proc", gpus, nvswitches=4, ib_ports=8)
        for pid in range(3000, 3600):  # a busy node's processes, walked by the fabric-manager / IMEX scan
            (work / "proc" / str(pid)).mkdir(parents=True, exist_ok=True)
            (work / "proc" / str(pid) / "comm").write_text("python3\n")
        self.sys.write()
        gpu_source = (
            XmlGpuSource(self.nvml, GPUS)
            if baseline
            else NvmlAdapter(self.nvml, expected_gpu_count=GPUS, monotonic=node_time)
        )
        self.core = AgentCore(
            builder=ReportBuilder(
                sequences=self.spool, identity=NodeIdentity("bench", "bench-node", 1), interval_s=15
            ),
            nvml=gpu_source,
            # The host checks read this machine's real mount table, modules, processes and clock: the simulated
            # /proc has two processes, a real node hundreds, and the D-state scan's cost grows with them.
            system=SystemCollector(work / "proc", host_health=HostHealthCollector("/proc", sys_root="/sys")),
            stack=StackCollector(
                host_root=work,
                proc_root=work / "proc",
                runner=lambda argv, timeout: (
                    CommandResult(0, outputs[argv[0]], "") if argv[0] in outputs else None
                ),
            ),
            kernel_log=KernelLogCollector(str(self.kernel_log), work / "kernel_log.state"),
            checkpoint=CheckpointCollector([checkpoints]),
            spool=self.spool,
            fabric=FabricCollector(sys_root=work / "sys", host_root=work, proc_root=work / "proc",
                                   monotonic=node_time),
        )
        self.core.stack.refresh()
        self.advance()
        self.core.system.prime()

    def advance(self) -> None:
        """What happens on the node between two cycles (not timed)."""
        for gpu in self.nvml.gpus:
            gpu.util_gpu = self.rng.randint(85, 99)
            gpu.util_memory = gpu.util_gpu // 2
            gpu.memory_used = int(gpu.memory_total * 0.7)
            gpu.temperature = self.rng.randint(55, 70)
            gpu.power_mw = self.rng.randint(450_000, 650_000)
            gpu.processes = [SimulatedProcess(pid=4100 + gpu.index, used_memory_bytes=gpu.memory_used)]
        self.proc.advance(15.0, Load())
        self.proc.write()
        self.uptime += 15
        with self.kernel_log.open("a") as handle:
            handle.write(f"[{self.uptime:12.6f}] eth0: renamed from veth1234\n")

    def cycle(self) -> dict:
        report = self.core.collect()
        self.spool.ack(report["sequence"])  # a connected agent's spool stays short
        return report


def measure(node: Node, cycles: int) -> dict:
    for _ in range(10):  # warm-up: caches, first rescan, sqlite pages
        node.advance()
        node.cycle()
    cpu = 0.0
    report_bytes = 0
    gzip_cpu = 0.0
    for _ in range(cycles):
        node.advance()
        started = time.process_time()
        report = node.cycle()
        cpu += time.process_time() - started
        started = time.process_time()
        body = json.dumps(report, separators=(",", ":")).encode()
        gzip.compress(body, compresslevel=6, mtime=0)
        gzip_cpu += time.process_time() - started
        report_bytes += len(body)
    return {
        "cpu_ms_per_cycle": 1000 * cpu / cycles,
        "gzip_ms_per_report": 1000 * gzip_cpu / cycles,
        "report_bytes": report_bytes // cycles,
    }


def gpu_block_cost(node: Node, cycles: int) -> float:
    started = time.process_time()
    for _ in range(cycles):
        node.core.nvml.sample()
    return 1000 * (time.process_time() - started) / cycles


def spawn_cost(work: Path, xml: bytes, runs: int = 20) -> float:
    """CPU (parent + child) to fork/exec one tiny process that prints the XML, as nvidia-smi would."""
    path = work / "nvidia-smi.xml"
    path.write_bytes(xml)
    own = time.process_time()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(runs):
        subprocess.run(["cat", str(path)], capture_output=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    child_cpu = (after.ru_utime + after.ru_stime) - (children.ru_utime + children.ru_stime)
    return 1000 * ((time.process_time() - own) + child_cpu) / runs


def memory_mb() -> dict:
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024
    return fields


def host_checks_cost(cycles: int) -> dict:
    """The host checks alone on this machine's real /proc, /sys and mounts: CPU per cycle on average (the
    D-state scan runs every 4th cycle) and per full scan, with the number of processes scanned."""
    import os

    collector = HostHealthCollector("/proc", sys_root="/sys")
    collector.collect()
    started = time.process_time()
    for _ in range(cycles):
        collector.collect()
    average = (time.process_time() - started) * 1000 / cycles
    started = time.process_time()
    for _ in range(20):
        collector._scan_d_state()
    scan = (time.process_time() - started) * 1000 / 20
    processes = sum(1 for entry in os.listdir("/proc") if entry.isdigit())
    return {"host_checks_ms_per_cycle": average, "d_state_scan_ms": scan, "processes": processes,
            "volumes": len(collector.collect()["volumes"] or [])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="agent-cost-") as scratch:
        work = Path(scratch)
        agent_node = Node(work / "agent", baseline=False)
        agent = measure(agent_node, args.cycles)
        agent["gpu_block_ms"] = gpu_block_cost(agent_node, args.cycles)
        agent_memory = memory_mb()  # before the baseline allocates anything
        baseline_node = Node(work / "baseline", baseline=True)
        baseline = measure(baseline_node, args.cycles)
        baseline["gpu_block_ms"] = gpu_block_cost(baseline_node, args.cycles)
        fork_ms = spawn_cost(work, render_nvidia_smi_xml(baseline_node.nvml))
        host = host_checks_cost(args.cycles)

    result = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {len(__import__('os').sched_getaffinity(0))} cores, "
        f"Python {platform.python_version()}",
        "gpus": GPUS,
        "cycles": args.cycles,
        "agent": {key: round(value, 3) for key, value in agent.items()},
        "baseline_nvidia_smi_xml": {key: round(value, 3) for key, value in baseline.items()},
        "baseline_fork_exec_ms_per_cycle": round(fork_ms, 3),
        "host_checks": {key: round(value, 3) for key, value in host.items()},
        "rss_mb": round(agent_memory["VmRSS"], 1),
        "peak_rss_mb": round(agent_memory["VmHWM"], 1),
        "ratio_cycle_baseline_over_agent": round(baseline["cpu_ms_per_cycle"] / agent["cpu_ms_per_cycle"], 2),
        "ratio_gpu_block_baseline_over_agent": round(baseline["gpu_block_ms"] / agent["gpu_block_ms"], 2),
        "targets": {"cpu_ms_per_cycle": 20, "rss_mb": 40},
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"agent cost, {GPUS} simulated GPUs, {args.cycles} cycles — {result['machine']}, {result['date']}")
    print(f"{'':34}{'agent (NVML)':>14}{'baseline (XML)':>16}")
    rows = (
        ("CPU per collection cycle (ms)", "cpu_ms_per_cycle"),
        ("  of which the GPU block (ms)", "gpu_block_ms"),
        ("gzip of the report (ms)", "gzip_ms_per_report"),
        ("report size (bytes)", "report_bytes"),
    )
    for label, key in rows:
        print(f"{label:34}{agent[key]:>14.3f}{baseline[key]:>16.3f}")
    print(f"{'+ fork/exec per cycle (ms, ≥)':34}{'-':>14}{fork_ms:>16.3f}")
    print(
        f"host checks (real /proc, {host['processes']} processes, {host['volumes']} volumes): "
        f"{host['host_checks_ms_per_cycle']:.3f} ms/cycle on average, D-state scan {host['d_state_scan_ms']:.3f} ms "
        "(every 4th cycle)"
    )
    print(
        f"agent RSS {result['rss_mb']} MB (peak {result['peak_rss_mb']} MB); targets ≤ 20 ms/cycle, ≤ 40 MB"
    )
    print(
        f"baseline/agent: whole cycle {result['ratio_cycle_baseline_over_agent']}×, "
        f"GPU block {result['ratio_gpu_block_baseline_over_agent']}×"
    )


if __name__ == "__main__":
    main()
