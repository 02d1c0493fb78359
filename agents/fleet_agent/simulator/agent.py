"""One simulated node running the real agent engine on simulated sources.

``SimulatedAgent`` wires the real ``AgentCore`` (NVML adapter, /proc collector, kernel-log collector,
stack collector, checkpoint collector, report builder, spool, delivery) to a simulated NVML, a
simulated /proc tree, a kernel log file, a simulated cloud and simulated stack commands. Time is
explicit: ``step(t)`` moves the node to ``t`` seconds after ``start`` (applying the scenario's
faults) and returns the report the agent would send then, so server tests can drive it without
threads or sleeps.
"""

from __future__ import annotations

import copy
import math
import os
import random
import threading
import uuid
from datetime import datetime, timedelta
from pathlib import Path

from fleet_agent.agent import AgentCore
from fleet_agent.client import ControlPlaneClient
from fleet_agent.collectors.checkpoint import CheckpointCollector
from fleet_agent.collectors.fabric import FabricCollector
from fleet_agent.collectors.host_health import STA_UNSYNC, TIME_ERROR, HostHealthCollector
from fleet_agent.collectors.stack import StackCollector
from fleet_agent.collectors.system import SystemCollector
from fleet_agent.credentials import Enrollment, credential_path, load_enrollment
from fleet_agent.enroll import enroll, enrollment_facts
from fleet_agent.nvml import (
    ECC_AGGREGATE,
    ECC_UNCORRECTED,
    ECC_VOLATILE,
    ERROR_DRIVER_NOT_LOADED,
    ERROR_LIBRARY_NOT_FOUND,
    ERROR_NO_PERMISSION,
    NvmlAdapter,
)
from fleet_agent.protocol import (
    CLOCK_REASON_GPU_IDLE,
    CLOCK_REASON_HW_POWER_BRAKE_SLOWDOWN,
    CLOCK_REASON_HW_THERMAL_SLOWDOWN,
    CLOCK_REASON_SW_POWER_CAP,
    CLOCK_REASON_SW_THERMAL_SLOWDOWN,
)
from fleet_agent.report import NodeIdentity, ReportBuilder
from fleet_agent.sender import Delivery, Target
from fleet_agent.simnvml import SimulatedGpu, SimulatedNvml, SimulatedProcess
from fleet_agent.simulator.cloud import DEFAULT_LEAD_S, SimulatedCloud
from fleet_agent.simulator.kernlog import SimulatedKernelLog
from fleet_agent.simulator.procfs import MOUNTS, Load, SimulatedProc
from fleet_agent.simulator.scenario import FABRIC_FAULTS, Fault, NodeSpec, Scenario
from fleet_agent.simulator.stackfacts import SIMULATED_PYTHON, SimulatedStack
from fleet_agent.simulator.sysfs import SimulatedSys
from fleet_agent.spool import Spool
from fleet_agent.timeutil import utc_now

_NVML_INIT_ERRORS = {
    "library_not_found": ERROR_LIBRARY_NOT_FOUND,
    "driver_not_loaded": ERROR_DRIVER_NOT_LOADED,
    "no_permission": ERROR_NO_PERMISSION,
}
_THERMAL_REASONS = CLOCK_REASON_SW_THERMAL_SLOWDOWN | CLOCK_REASON_HW_THERMAL_SLOWDOWN
_DOUBLE_BIT_ECC = 1  # page retirement cause


# Faults of the host rather than of a GPU's readings: nothing to apply per GPU on every step.
HOST_FAULTS = frozenset({"host_memory_exhausted", "swap_storm", "oom_kill", "volume_full", "volume_read_only",
                         "volume_hung", "gpu_d_state", "peermem_missing", "clock_unsynced"})


class SimulatedVolumes:
    """``statvfs`` for the simulated mounts (relative to the host root): sizes, fill level, and a hang that
    blocks the caller the way a hard NFS mount does when its server is gone, until released."""

    SIZE_BYTES = {"/": 2 * 10**12, "/boot/efi": 512 * 2**20, "/data": 15 * 10**12, "/mnt/checkpoints": 100 * 10**12}
    BASE_USED_PCT = {"/": 31.0, "/boot/efi": 1.2, "/data": 62.0, "/mnt/checkpoints": 48.0}

    def __init__(self, host_root: Path):
        self.host_root = Path(host_root)
        self.used_pct: dict[str, float] = {}
        self._hung: dict[str, threading.Event] = {}

    def hang(self, mount: str) -> None:
        self._hung.setdefault(mount, threading.Event())

    def release(self, mount: str) -> None:
        event = self._hung.pop(mount, None)
        if event is not None:
            event.set()

    def release_all(self) -> None:
        for mount in list(self._hung):
            self.release(mount)

    def statvfs(self, path: str) -> os.statvfs_result:
        relative = "/" + str(Path(path).relative_to(self.host_root)).lstrip(".")
        mount = relative.rstrip("/") or "/"
        event = self._hung.get(mount)
        if event is not None:
            event.wait(600)  # a hard NFS mount: the call does not return while the server is away
        size = self.SIZE_BYTES.get(mount, 10**12)
        used_pct = self.used_pct.get(mount, self.BASE_USED_PCT.get(mount, 40.0))
        block = 4096
        blocks = size // block
        reserved = blocks // 20 if mount in ("/", "/data") else 0  # ext4/xfs root reserve
        used = int((blocks - reserved) * used_pct / 100)
        free = blocks - used
        available = max(0, free - reserved)
        files = blocks // 16
        return os.statvfs_result((block, block, blocks, free, available, files, files - files // 50,
                                  files - files // 50, 0, 255))


def encode_cuda_version(version: str) -> int:
    """ "12.4" → 12040, NVML's encoding."""
    major, minor = (int(part) for part in version.split(".")[:2])
    return major * 1000 + minor * 10


class SimulatedAgent:
    def __init__(
        self,
        spec: NodeSpec,
        *,
        ordinal: int,
        work_dir: str | Path,
        scenario_name: str = "sim",
        start: datetime | None = None,
        seed: int = 0,
        interval_s: float = 15.0,
    ):
        self.spec = spec
        self.ordinal = ordinal
        self.hostname = f"{spec.name}-{ordinal:03d}"
        self.dir = Path(work_dir) / self.hostname
        self.dir.mkdir(parents=True, exist_ok=True)
        self.start = start or utc_now()
        self.t = 0.0
        self._rng = random.Random(f"{seed}/{scenario_name}/{self.hostname}")
        self.machine_id = uuid.uuid5(
            uuid.NAMESPACE_URL, f"fleet-agent-sim/{scenario_name}/{self.hostname}"
        ).hex
        self.baseline_stack = copy.deepcopy(spec.stack)

        gpus = [
            SimulatedGpu.from_model(
                spec.gpu_model, i, node_key=self.machine_id, vgpu=spec.delivery_form == "cloud_shared"
            )
            for i in range(spec.gpu_count)
        ]
        self.nvml = SimulatedNvml(
            gpus,
            driver_version=spec.stack["driver_version"],
            cuda_driver_version=encode_cuda_version(spec.stack["cuda_driver_version"]),
            init_error=_NVML_INIT_ERRORS.get(spec.nvml),
        )
        self.proc = SimulatedProc(
            self.dir / "proc",
            cpu_count=spec.cpu_count,
            mem_total_bytes=spec.memory_gb * 2**30,
            kernel=spec.stack["kernel"],
            cpu_model="Intel(R) Xeon(R) Platinum 8480+",
            boot_epoch=self.start.timestamp() - 3 * 86400,
            rng=self._rng,
        )
        self.sys = SimulatedSys(self.dir / "sys", self.dir / "host", self.dir / "proc", gpus, **spec.fabric_layout())
        self.kernel_log = SimulatedKernelLog(self.dir / "kern.log")
        self.volumes = SimulatedVolumes(self.dir / "host")
        self.proc.peermem_loaded = spec.rdma_devices > 0 or spec.fabric_layout()["ib_ports"] > 0
        infiniband = self.dir / "sys/class/infiniband"
        infiniband.mkdir(parents=True, exist_ok=True)
        for i in range(spec.rdma_devices):
            (infiniband / f"mlx5_{i}").mkdir(exist_ok=True)
        # adjtimex as chronyd leaves it on a synchronised host: STA_PLL | STA_NANO, a few ms of max error.
        self.timex = {"state": 0, "status": 0x2001, "maxerror_us": 4500, "offset_s": 0.000012}
        self.cloud = self._make_cloud()
        self.stack = SimulatedStack(self.dir / "host", copy.deepcopy(spec.stack))
        self.checkpoint_dir = self.dir / "ckpt" if spec.checkpoint else None
        self._checkpoint_file: Path | None = None
        self._checkpoint_frozen_at: float | None = None

        self.spool = Spool(self.dir / "spool.db", durable=False)
        self.identity = NodeIdentity(machine_id=self.machine_id, hostname=self.hostname)
        self.core = AgentCore(
            builder=ReportBuilder(
                sequences=self.spool, identity=self.identity, interval_s=interval_s, clock=self.now
            ),
            # The simulator reads the slow facts (NVLink counters, PCI, services) every report, so a scenario's
            # fault shows in the next report; error growth is still judged over the real window, in node time.
            nvml=NvmlAdapter(self.nvml, expected_gpu_count=spec.gpu_count, clock=self.now,
                             monotonic=lambda: self.t, slow_refresh_s=0),
            system=SystemCollector(
                self.dir / "proc",
                clock=lambda: self.t,
                wall_clock=self.now,
                host_health=HostHealthCollector(
                    self.dir / "proc",
                    sys_root=self.dir / "sys",
                    host_root=self.dir / "host",
                    statvfs=self.volumes.statvfs,
                    timex=lambda: dict(self.timex),
                    clock=lambda: self.t,
                    scan_every=1,
                ),
            ),
            stack=StackCollector(
                host_root=self.dir / "host",
                proc_root=self.dir / "proc",
                python=SIMULATED_PYTHON,
                runner=self.stack.run,
            ),
            kernel_log=self._make_kernel_log_collector(),
            cloud=self.cloud,
            checkpoint=CheckpointCollector(
                [self.checkpoint_dir], rescan_s=0, clock=lambda: self.now().timestamp()
            )
            if self.checkpoint_dir
            else None,
            spool=self.spool,
            clock=self.now,
            fabric=FabricCollector(sys_root=self.dir / "sys", host_root=self.dir / "host",
                                   proc_root=self.dir / "proc", slow_refresh_s=0, monotonic=lambda: self.t),
        )
        self.core.refresh_cloud_identity()
        self.delivery: Delivery | None = None
        self.silent = False
        self.reclaimed = False
        self._reclaim_at: float | None = None
        self._fired: set[int] = set()
        self._active: set[int] = set()
        self._xid_repeats: dict[int, float] = {}
        self._apply_steady_state(dt=0.0)
        self.core.system.prime()

    @classmethod
    def from_scenario(
        cls,
        scenario: Scenario,
        ordinal: int,
        *,
        work_dir: str | Path,
        start: datetime | None = None,
        seed: int | None = None,
        interval_s: float | None = None,
    ) -> SimulatedAgent:
        return cls(
            scenario.node_for(ordinal),
            ordinal=ordinal,
            work_dir=work_dir,
            scenario_name=scenario.name,
            start=start,
            seed=scenario.seed if seed is None else seed,
            interval_s=interval_s or scenario.interval_s,
        )

    # -- wiring ---------------------------------------------------------------------------------

    def _make_cloud(self) -> SimulatedCloud:
        spec = self.spec
        if not spec.is_cloud:
            return SimulatedCloud(
                provider=None,
                instance_id=None,
                instance_type=None,
                region=None,
                spot=None,
                bare_metal=True,
                clock=self.now,
            )
        instance_id = {
            "aws": f"i-0{self._rng.getrandbits(64):016x}",
            "gcp": str(self._rng.getrandbits(62)),
            "azure": str(uuid.UUID(int=self._rng.getrandbits(128))),
            "alibaba": f"i-bp1{self._rng.getrandbits(64):017x}"[:22],
            "tencent": f"ins-{self._rng.getrandbits(32):08x}",
        }[spec.provider]
        return SimulatedCloud(
            provider=spec.provider,
            instance_id=instance_id,
            instance_type=spec.instance_type,
            region=spec.region,
            spot=spec.spot,
            bare_metal=spec.instance_type.endswith(".metal"),
            clock=self.now,
        )

    def _make_kernel_log_collector(self):
        try:
            from fleet_agent.collectors.kernel_log import KernelLogCollector
        except ImportError:
            return None
        return KernelLogCollector(str(self.kernel_log.path), self.dir / "kernel_log.state", clock=self.now)

    def now(self) -> datetime:
        return self.start + timedelta(seconds=self.t)

    # -- driving --------------------------------------------------------------------------------

    def step(self, t: float) -> dict | None:
        """Move to ``t`` seconds after start and build the report due then (None while silent)."""
        self.advance_to(t)
        if self.silent or self.reclaimed:
            return None
        self.core.poll_notice()  # the daemon's watcher thread does this every few seconds
        return self.core.collect()

    def advance_to(self, t: float) -> None:
        if t < self.t:
            raise ValueError(f"simulated time only moves forward ({t} < {self.t})")
        dt, self.t = t - self.t, t
        for index, fault in enumerate(self.spec.faults):
            if index not in self._fired and fault.at_s <= t:
                self._fired.add(index)
                self._active.add(index)
                self._start(fault)
            if index in self._active and fault.clear_at_s is not None and fault.clear_at_s <= t:
                self._active.discard(index)
                self._clear(fault)
            if index in self._active and fault.kind == "xid" and fault.params.get("repeat_s"):
                self._repeat_xid(index, fault)
        if self._reclaim_at is not None and t >= self._reclaim_at:
            self.reclaimed = True  # the cloud took the instance back: nothing more from this node
        self._apply_steady_state(dt)

    def next_fault_time(self, after: float) -> float | None:
        """When the next fault starts or clears (the fleet runner reports at once then)."""
        times = [f.at_s for f in self.spec.faults if f.at_s > after]
        times += [f.clear_at_s for f in self.spec.faults if f.clear_at_s is not None and f.clear_at_s > after]
        return min(times) if times else None

    def active_faults(self) -> list[str]:
        return [self.spec.faults[i].kind for i in sorted(self._active)]

    # -- fault effects --------------------------------------------------------------------------

    def _gpus(self, fault: Fault) -> list[SimulatedGpu]:
        return [self.nvml.gpus[i] for i in fault.gpu_indices(len(self.nvml.gpus))]

    def _start(self, fault: Fault) -> None:
        params = fault.params
        if fault.kind == "xid":
            for gpu in self._gpus(fault):
                self._xid(gpu, int(params["code"]), params.get("message"))
        elif fault.kind == "gpu_lost":
            for gpu in self._gpus(fault):
                self._xid(gpu, 79)
                gpu.lost = True
        elif fault.kind == "gpu_missing":
            for gpu in self._gpus(fault):
                gpu.enumerated = False
                gpu.on_bus = False  # gone from the PCI bus too
        elif fault.kind in FABRIC_FAULTS:
            self._start_fabric(fault)
        elif fault.kind == "ecc_uncorrectable":
            count = int(params.get("count", 1))
            containment = params.get("containment")
            for gpu in self._gpus(fault):
                for counter in (ECC_VOLATILE, ECC_AGGREGATE):
                    gpu.ecc[(ECC_UNCORRECTED, counter)] = gpu.ecc.get((ECC_UNCORRECTED, counter), 0) + count
                if "retired_pages" not in gpu.unsupported:  # pre-Ampere boards retire the page instead
                    gpu.retired_pages.setdefault(_DOUBLE_BIT_ECC, []).append(0x1A2B3C000 + count)
                    gpu.retired_pending = True
                if containment and "remapped_rows" not in gpu.unsupported:
                    # Ampere and later: the row is remapped at the next reset (Xid 63), and the driver says whether
                    # the error was contained to the processes that touched it (Xid 94) or not (Xid 95).
                    correctable, uncorrectable, _pending, failure = gpu.remapped
                    gpu.remapped = (correctable, uncorrectable + count, 1, failure)
                    self._xid(gpu, 63)
                    self._xid(gpu, 94 if containment == "contained" else 95)
                else:
                    self._xid(gpu, 48)
        elif fault.kind == "row_remap_pending":
            for gpu in self._gpus(fault):
                correctable, uncorrectable, _pending, failure = gpu.remapped
                gpu.remapped = (correctable, uncorrectable + 1, 1, failure)
                self._xid(gpu, 63)
        elif fault.kind == "row_remap_failure":
            for gpu in self._gpus(fault):
                correctable, uncorrectable, pending, _failure = gpu.remapped
                gpu.remapped = (correctable, uncorrectable + 1, pending, 1)
                self._xid(gpu, 64)
        elif fault.kind == "driver_upgraded":
            self.nvml.driver_version = params.get("driver_version", "560.35.03")
            self.nvml.cuda_driver_version = encode_cuda_version(params.get("cuda_driver_version", "12.6"))
        elif fault.kind == "framework_cuda_too_new":
            self._edit_torch(cuda=params.get("cuda", "12.8"), version=params.get("version", "2.7.0+cu128"))
        elif fault.kind == "arch_missing":
            self._edit_torch(arch_list=params.get("arch_list") or self._arch_list_without_this_gpu())
        elif fault.kind == "spot_notice":
            kind = params["kind"]
            lead = params.get("lead_s", DEFAULT_LEAD_S[self.spec.provider])
            self.cloud.raise_notice(kind, lead)
            if params.get("reclaim", True) and kind not in ("rebalance", "maintenance"):
                self._reclaim_at = fault.at_s + lead
        elif fault.kind == "checkpoint_stale":
            self._checkpoint_frozen_at = self.now().timestamp() - float(params.get("age_s", 7200))
        elif fault.kind == "silent":
            self.silent = True
        elif fault.kind == "oom_kill":
            for _ in range(int(params.get("count", 1))):
                self._oom_kill(str(params.get("process", "python")), int(params.get("pid", 51234)))
        elif fault.kind == "volume_full":
            self.volumes.used_pct[params.get("mount", "/data")] = float(params.get("used_pct", 100.0))
        elif fault.kind == "volume_read_only":
            mount = params.get("mount", "/data")
            self.proc.read_only.add(mount)
            source = next((m[5] for m in MOUNTS if m[3] == mount), "/dev/nvme1n1").rsplit("/", 1)[-1]
            self.kernel_log.noise(self.proc.uptime, f"EXT4-fs error (device {source}): ext4_journal_check_start:"
                                 "83: comm python: Detected aborted journal")
            self.kernel_log.noise(self.proc.uptime, f"EXT4-fs ({source}): Remounting filesystem read-only")
        elif fault.kind == "volume_hung":
            mount = params.get("mount", "/mnt/checkpoints")
            self.volumes.hang(mount)
            server = next((m[5] for m in MOUNTS if m[3] == mount), "10.0.0.20:/").split(":")[0]
            self.kernel_log.noise(self.proc.uptime, f"nfs: server {server} not responding, still trying")
        elif fault.kind == "gpu_d_state":
            for gpu in self._gpus(fault):
                pid = int(params.get("pid", 52000 + gpu.index))
                # The driver's own wait by default; a `wchan` such as rpc_wait_bit_killable: stuck on NFS instead.
                self.proc.d_state[pid] = (str(params.get("name", "python")),
                                          [f"/dev/nvidia{gpu.index}", "/dev/nvidiactl", "/dev/nvidia-uvm"],
                                          str(params.get("wchan", "os_acquire_rwlock_write")))
        elif fault.kind == "peermem_missing":
            self.proc.peermem_loaded = False
        elif fault.kind == "clock_unsynced":
            self.timex = {"state": TIME_ERROR, "status": 0x2001 | STA_UNSYNC,
                          "maxerror_us": int(params.get("maxerror_us", 16_000_000)), "offset_s": 0.0}

    def _clear(self, fault: Fault) -> None:
        if fault.kind == "gpu_lost":
            for gpu in self._gpus(fault):
                gpu.lost = False  # rebooted, or the GPU was reseated/replaced
        elif fault.kind == "gpu_missing":
            for gpu in self._gpus(fault):
                gpu.enumerated = True
                gpu.on_bus = True
        elif fault.kind in FABRIC_FAULTS:
            self._clear_fabric(fault)
        elif fault.kind == "ecc_uncorrectable":
            for gpu in self._gpus(fault):
                gpu.ecc[(ECC_UNCORRECTED, ECC_VOLATILE)] = 0  # volatile counters reset with the driver
                gpu.retired_pending = False
                c, u, _p, f = gpu.remapped
                gpu.remapped = (c, u, 0, f)
        elif fault.kind == "row_remap_pending":
            for gpu in self._gpus(fault):
                c, u, _p, f = gpu.remapped
                gpu.remapped = (c, u, 0, f)  # a GPU reset activated the remap
        elif fault.kind == "row_remap_failure":
            for gpu in self._gpus(fault):
                c, u, p, _f = gpu.remapped
                gpu.remapped = (c, u, p, 0)
        elif fault.kind == "driver_upgraded":
            self.nvml.driver_version = self.baseline_stack["driver_version"]
            self.nvml.cuda_driver_version = encode_cuda_version(self.baseline_stack["cuda_driver_version"])
        elif fault.kind in ("framework_cuda_too_new", "arch_missing"):
            self.stack.facts["frameworks"] = copy.deepcopy(self.baseline_stack["frameworks"])
            self.core.stack.refresh()
        elif fault.kind == "spot_notice":
            if not self.reclaimed:
                self.cloud.clear_notice()
                self._reclaim_at = None
        elif fault.kind == "checkpoint_stale":
            self._checkpoint_frozen_at = None
        elif fault.kind == "silent":
            self.silent = False
        elif fault.kind == "volume_full":
            self.volumes.used_pct.pop(fault.params.get("mount", "/data"), None)
        elif fault.kind == "volume_read_only":
            self.proc.read_only.discard(fault.params.get("mount", "/data"))  # fsck'd and remounted
        elif fault.kind == "volume_hung":
            self.volumes.release(fault.params.get("mount", "/mnt/checkpoints"))
        elif fault.kind == "gpu_d_state":
            self.proc.d_state.clear()  # the node was rebooted
        elif fault.kind == "peermem_missing":
            self.proc.peermem_loaded = True
        elif fault.kind == "clock_unsynced":
            self.timex = {"state": 0, "status": 0x2001, "maxerror_us": 4500, "offset_s": 0.000012}

    # -- fabric faults (GPU configuration, NVLink, PCI, fabric services, InfiniBand) ---------------

    def _port(self, fault: Fault):
        return self.sys.ports[int(fault.params.get("port", 0))]

    def _start_fabric(self, fault: Fault) -> None:
        params = fault.params
        if fault.kind == "gpu_not_in_nvml":
            for gpu in self._gpus(fault):
                gpu.enumerated = False  # still on the bus: the driver failed to bring it up
                self.kernel_log.noise(self.proc.uptime, f"NVRM: GPU {gpu.bus_id[4:]}: RmInitAdapter failed! "
                                                       "(0x22:0x56:762)")
        elif fault.kind == "nvlink_down":
            for gpu in self._gpus(fault):
                gpu.nvlink_states[int(params.get("link", 0))] = 0
        elif fault.kind == "persistence_off":
            for gpu in self._gpus(fault):
                gpu.persistence = 0
        elif fault.kind == "ecc_mode":
            for gpu in self._gpus(fault):
                gpu.ecc_mode = (int(params.get("current", 1)), int(params.get("pending", 0)))
        elif fault.kind == "mig_mode":
            for gpu in self._gpus(fault):
                gpu.mig_mode = (int(params.get("current", 1)), int(params.get("pending", 1)))
        elif fault.kind == "gsp_drift":
            for gpu in self._gpus(fault):
                gpu.gsp_version = str(params.get("version", "535.183.01"))
            self.core.nvml.forget_static()  # new firmware loads with a driver reload
        elif fault.kind == "fabric_manager_down":
            self.sys.fabric_manager_running = False
            for gpu in self.nvml.gpus:
                gpu.fabric_state = 1  # NOT_STARTED: nothing registered the GPU with the fabric
        elif fault.kind == "imex_down":
            self.sys.imex_running = False
        elif fault.kind == "ib_port_down":
            port = self._port(fault)
            port.state, port.phys_state = "DOWN", str(params.get("phys_state", "Polling"))
            port.counters["link_downed"] += 1
        elif fault.kind == "ib_port_degraded":
            self._port(fault).rate_gbps = int(params.get("rate_gbps", 200))

    def _clear_fabric(self, fault: Fault) -> None:
        if fault.kind == "gpu_not_in_nvml":
            for gpu in self._gpus(fault):
                gpu.enumerated = True
        elif fault.kind == "nvlink_down":
            for gpu in self._gpus(fault):
                gpu.nvlink_states[int(fault.params.get("link", 0))] = 1
        elif fault.kind == "persistence_off":
            for gpu in self._gpus(fault):
                gpu.persistence = 1
        elif fault.kind == "ecc_mode":
            for gpu in self._gpus(fault):
                gpu.ecc_mode = (1, 1)
        elif fault.kind == "mig_mode":
            for gpu in self._gpus(fault):
                gpu.mig_mode = (0, 0)
        elif fault.kind == "gsp_drift":
            for gpu in self._gpus(fault):
                gpu.gsp_version = self.nvml.driver_version
            self.core.nvml.forget_static()
        elif fault.kind == "fabric_manager_down":
            self.sys.fabric_manager_running = True
            for gpu in self.nvml.gpus:
                gpu.fabric_state = 3
        elif fault.kind == "imex_down":
            self.sys.imex_running = True
        elif fault.kind == "ib_port_down":
            port = self._port(fault)
            port.state, port.phys_state = "ACTIVE", "LinkUp"
        elif fault.kind == "ib_port_degraded":
            self._port(fault).rate_gbps = self.spec.fabric_layout()["ib_rate_gbps"]

    def _grow_counters(self, fault: Fault, dt: float) -> None:
        per_s = float(fault.params.get("per_s", 1.0))
        grow = max(1, int(per_s * dt)) if dt > 0 else 0
        if fault.kind == "nvlink_errors":
            names = {"replay": 0, "recovery": 1, "crc_flit": 2, "crc_data": 3}
            counter = names[fault.params.get("counter", "crc_flit")]
            for gpu in self._gpus(fault):
                key = (int(fault.params.get("link", 0)), counter)
                gpu.nvlink_errors[key] = gpu.nvlink_errors.get(key, 0) + grow
        else:
            port = self._port(fault)
            name = str(fault.params.get("counter", "symbol_error"))
            port.counters[name] = port.counters.get(name, 0) + grow

    def _xid(self, gpu: SimulatedGpu, code: int, message: str | None = None) -> None:
        """The driver's two channels for an Xid: a kernel log line and an NVML event."""
        self.kernel_log.xid(self.proc.uptime, gpu.bus_id, code, message)
        self.nvml.emit_xid(gpu, code)

    def _oom_kill(self, process: str, pid: int) -> None:
        """What the kernel logs when the OOM killer picks a victim, and its vmstat counter."""
        uptime = self.proc.uptime
        self.kernel_log.noise(uptime, f"{process} invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|"
                             "__GFP_COMP), order=0, oom_score_adj=0")
        self.kernel_log.noise(uptime, f"oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,"
                             f"mems_allowed=0-1,global_oom,task_memcg=/user.slice,task={process},pid={pid},uid=1000")
        self.kernel_log.noise(uptime, f"Out of memory: Killed process {pid} ({process}) total-vm:1073741824kB, "
                             "anon-rss:1010827264kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:1978368kB "
                             "oom_score_adj:0")
        self.proc.oom_kill()

    def _repeat_xid(self, index: int, fault: Fault) -> None:
        period = float(fault.params["repeat_s"])
        last = self._xid_repeats.get(index, fault.at_s)
        while last + period <= self.t:
            last += period
            for gpu in self._gpus(fault):
                self._xid(gpu, int(fault.params["code"]), fault.params.get("message"))
        self._xid_repeats[index] = last

    def _edit_torch(self, **changes: object) -> None:
        frameworks = self.stack.facts.setdefault("frameworks", [])
        torch = next((f for f in frameworks if f.get("name") == "torch"), None)
        if torch is None:
            torch = {"name": "torch", "version": "2.4.0", "cuda": "12.4", "arch_list": []}
            frameworks.append(torch)
        torch.update(changes)
        self.core.stack.refresh()

    def _arch_list_without_this_gpu(self) -> list[str]:
        major, minor = self.nvml.gpus[0].cc if self.nvml.gpus else (9, 0)
        mine = major * 10 + minor
        torch = next((f for f in self.baseline_stack.get("frameworks", []) if f.get("name") == "torch"), {})
        arches = torch.get("arch_list") or ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]
        return [a for a in arches if int("".join(ch for ch in a if ch.isdigit()) or 0) < mine]

    # -- steady state ---------------------------------------------------------------------------

    def _apply_steady_state(self, dt: float) -> None:
        workload = self.spec.workload
        util_target = float(workload.get("gpu_util_pct", 92))
        memory_pct = float(workload.get("gpu_memory_pct", 70))
        load = Load(
            cpu_busy_pct=float(workload.get("cpu_busy_pct", 35)),
            steal_pct=0.2 if self.spec.is_cloud else 0.0,
        )
        active = [self.spec.faults[i] for i in sorted(self._active)]
        pipeline = next((f for f in active if f.kind == "cpu_bound_pipeline"), None)
        if pipeline:
            util_target = float(pipeline.params.get("gpu_util_pct", 18))
            load.cpu_busy_pct = float(pipeline.params.get("cpu_busy_pct", 97))
            load.psi_cpu_some = 45.0
        exhausted = next((f for f in active if f.kind == "host_memory_exhausted"), None)
        if exhausted:
            # Reclaim and swap keep the CPUs busy while the GPUs wait for input.
            load.mem_available_pct = float(exhausted.params.get("available_pct", 1.5))
            load.psi_memory_some = float(exhausted.params.get("psi_some", 70.0))
            load.psi_memory_full = float(exhausted.params.get("psi_full", 35.0))
            load.cpu_busy_pct = 96.0
            util_target = 20.0
        storm = next((f for f in active if f.kind == "swap_storm"), None)
        if storm:
            rate = float(storm.params.get("pages_per_s", 25000))
            load.swap_in_pages_per_s = load.swap_out_pages_per_s = rate
            load.swap_used_pct = 85.0
            load.mem_available_pct = min(load.mem_available_pct, 8.0)
            load.psi_memory_some = max(load.psi_memory_some, 30.0)
            load.psi_memory_full = max(load.psi_memory_full or 0.0, 8.0)
        steal = next((f for f in active if f.kind == "cpu_steal"), None)
        if steal:
            load.steal_pct = float(steal.params.get("steal_pct", 25))
        for gpu in self.nvml.gpus:
            util = max(0, min(100, int(round(util_target + self._rng.gauss(0, 3)))))
            gpu.util_gpu = util
            gpu.util_memory = int(util * 0.45)
            gpu.memory_used = int(gpu.memory_total * memory_pct / 100)
            gpu.temperature = int(round(38 + util * 0.3 + self._rng.gauss(0, 1)))
            gpu.power_mw = int(gpu.power_limit_mw * (0.2 + 0.7 * util / 100))
            gpu.sm_clock = gpu.max_sm_mhz
            gpu.clock_reasons = CLOCK_REASON_GPU_IDLE if util < 5 else 0
            gpu.pcie_current = None
            gpu.processes = (
                [SimulatedProcess(pid=41000 + gpu.index, used_memory_bytes=gpu.memory_used)] if util else []
            )
        for fault in active:
            self._apply_steady_fault(fault)
            if fault.kind in ("nvlink_errors", "ib_errors"):
                self._grow_counters(fault, dt)
        self.proc.advance(dt, load)
        self.proc.write()
        self.sys.write()
        self._update_checkpoint()

    def _apply_steady_fault(self, fault: Fault) -> None:
        params = fault.params
        if fault.kind in HOST_FAULTS:
            return
        for gpu in self._gpus(fault) if fault.kind not in ("cpu_bound_pipeline", "cpu_steal") else []:
            if fault.kind == "thermal_throttle":
                gpu.temperature = int(params.get("temperature_c", 91))
                gpu.clock_reasons |= _THERMAL_REASONS
                gpu.sm_clock = int(gpu.max_sm_mhz * 0.6)
            elif fault.kind == "power_throttle":
                gpu.power_mw = gpu.power_limit_mw
                brake = CLOCK_REASON_HW_POWER_BRAKE_SLOWDOWN if params.get("brake") else 0
                gpu.clock_reasons |= CLOCK_REASON_SW_POWER_CAP | brake
                gpu.sm_clock = int(gpu.max_sm_mhz * 0.75)
            elif fault.kind == "memory_pressure":
                gpu.memory_used = int(gpu.memory_total * float(params.get("used_pct", 97)) / 100)
            elif fault.kind == "residual_process":
                # The job is gone but a leftover process still holds memory on an idle GPU.
                held = int(float(params.get("memory_gb", 20)) * 2**30)
                gpu.processes = [
                    SimulatedProcess(
                        pid=int(params.get("pid", 4242)),
                        used_memory_bytes=held,
                        name=str(params.get("name", "python")),
                    )
                ]
                gpu.util_gpu = gpu.util_memory = 0
                gpu.memory_used = held
                gpu.clock_reasons = CLOCK_REASON_GPU_IDLE
            elif fault.kind == "pcie_downgrade":
                max_gen, max_width = gpu.pcie_max
                gpu.pcie_current = (int(params.get("gen", max(1, max_gen - 2))), int(params.get("width", 8)))

    def _update_checkpoint(self) -> None:
        if self.checkpoint_dir is None:
            return
        every = float(self.spec.checkpoint.get("every_s", 900))
        if self._checkpoint_frozen_at is not None:
            mtime = self._checkpoint_frozen_at
        else:
            mtime = self.start.timestamp() + math.floor(self.t / every) * every
        name = f"step-{int(mtime):d}.pt"
        path = self.checkpoint_dir / name
        if path != self._checkpoint_file:
            self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
            if self._checkpoint_file is not None and self._checkpoint_file.exists():
                self._checkpoint_file.unlink()
            path.write_bytes(b"simulated checkpoint\n")
            self._checkpoint_file = path
        os.utime(path, (mtime, mtime))

    # -- enrolment and delivery -----------------------------------------------------------------

    def enroll_facts(self) -> dict:
        gpus = [{"name": gpu.name} for gpu in self.nvml.gpus]
        return enrollment_facts(
            identity=self.identity,
            instance_id=self.spool.instance_id,
            gpus=gpus,
            cloud=self.cloud.identity(),
            labels=self.spec.labels(),
        )

    def enroll(self, server: str, token: str, *, ca_file: str | None = None) -> Enrollment:
        """Enrol once (a credential from an earlier run against the same server is reused)."""
        path = credential_path(self.dir)
        enrollment = load_enrollment(path)
        if enrollment is None or enrollment.server != server.rstrip("/"):
            client = ControlPlaneClient(server, ca_file=ca_file)
            enrollment = enroll(client, token, self.enroll_facts(), credential_file=path)
        self.use_enrollment(enrollment, ca_file=ca_file)
        return enrollment

    def use_enrollment(self, enrollment: Enrollment, *, ca_file: str | None = None) -> None:
        self.identity.node_id = enrollment.node_id
        client = ControlPlaneClient(enrollment.server, credential=enrollment.credential, ca_file=ca_file)
        target: Target = (client, enrollment.reports_url)
        self.delivery = Delivery(self.spool, lambda: target, rng=self._rng)

    def deliver(self, *, force: bool = False, deadline: float | None = None) -> bool:
        """Send what is spooled (through the real Delivery); False while unsent reports remain."""
        if self.delivery is None:
            raise RuntimeError(f"{self.hostname} is not enrolled")
        if self.silent or self.reclaimed:
            return False  # a silent agent sends nothing, not even what it spooled earlier
        return self.delivery.deliver_pending(force=force, deadline=deadline)

    def acknowledge(self, sequence: int) -> int:
        """What a server ack does, for tests that play the server themselves."""
        return self.spool.ack(sequence)

    def close(self) -> None:
        self.volumes.release_all()  # let a probe blocked on a "hung" volume return
        self.spool.close()
