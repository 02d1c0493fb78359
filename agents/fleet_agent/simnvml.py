"""A simulated ``pynvml`` module for tests, the simulator and the cost benchmark.

``SimulatedNvml`` has the same function names and signatures as the pynvml calls the agent uses,
returns the same shapes (the real ctypes structs ``c_nvmlMemory_t``, ``c_nvmlUtilization_t``,
``nvmlPciInfo_t``, pynvml's friendly process objects, tuples for remapped rows and compute
capability), exposes pynvml's constants, and raises the *real* ``pynvml.NVMLError_*`` classes, so
the adapter cannot tell it from a GPU node. What it returns is plain mutable state
(``SimulatedGpu``) that the scenario engine changes to inject faults.
"""

from __future__ import annotations

import threading
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import pynvml

# Model catalog: what NVML reports for common data-centre and consumer GPUs. ``unsupported`` lists
# the feature groups NVML answers with NotSupported on that board. ``temperature_thresholds_c`` is
# (shutdown, slowdown, GPU max operating) as ``nvidia-smi -q`` shows them ("GPU Shutdown Temp", "GPU Slowdown
# Temp", "GPU Max Operating Temp"); None where the board answers NotSupported (nvidia-smi's "N/A"). Hopper's
# match the H100 product brief (max operating 87, slowdown 89, shutdown 92 °C) and A100's an 8-GPU node's
# `nvidia-smi -q` (85 / 89 / 92); the others are representative, not a given board's exact figures.
GPU_MODELS: dict[str, dict[str, Any]] = {
    "H100-SXM-80GB": dict(
        name="NVIDIA H100 80GB HBM3",
        memory_mib=81559,
        cc=(9, 0),
        power_limit_w=700,
        temperature_thresholds_c=(92, 89, 87),
        max_sm_mhz=1980,
        pcie=(5, 16),
        nvlinks=18,
        unsupported={"retired_pages"},
        fabric=True,
    ),
    "H200": dict(
        name="NVIDIA H200",
        memory_mib=143771,
        cc=(9, 0),
        power_limit_w=700,
        temperature_thresholds_c=(92, 89, 87),
        max_sm_mhz=1980,
        pcie=(5, 16),
        nvlinks=18,
        unsupported={"retired_pages"},
        fabric=True,
    ),
    "A100-SXM4-80GB": dict(
        name="NVIDIA A100-SXM4-80GB",
        memory_mib=81920,
        cc=(8, 0),
        power_limit_w=400,
        temperature_thresholds_c=(92, 89, 85),
        max_sm_mhz=1410,
        pcie=(4, 16),
        nvlinks=12,
        unsupported={"retired_pages"},
    ),
    "A10G": dict(
        name="NVIDIA A10G",
        memory_mib=23028,
        cc=(8, 6),
        power_limit_w=300,
        temperature_thresholds_c=(98, 95, 88),
        max_sm_mhz=1710,
        pcie=(4, 16),
        nvlinks=0,
        unsupported={"retired_pages", "mig"},
    ),
    "L4": dict(
        name="NVIDIA L4",
        memory_mib=23034,
        cc=(8, 9),
        power_limit_w=72,
        temperature_thresholds_c=(98, 95, 88),
        max_sm_mhz=2040,
        pcie=(4, 16),
        nvlinks=0,
        unsupported={"retired_pages", "mig"},
    ),
    "L40S": dict(
        name="NVIDIA L40S",
        memory_mib=46068,
        cc=(8, 9),
        power_limit_w=350,
        temperature_thresholds_c=(98, 95, 88),
        max_sm_mhz=2520,
        pcie=(4, 16),
        nvlinks=0,
        unsupported={"retired_pages", "mig"},
    ),
    "T4": dict(
        name="Tesla T4",
        memory_mib=15360,
        cc=(7, 5),
        power_limit_w=70,
        temperature_thresholds_c=(96, 93, None),
        max_sm_mhz=1590,
        pcie=(3, 16),
        nvlinks=0,
        unsupported={"remapped_rows", "mig"},
    ),
    "V100-SXM2-32GB": dict(
        name="Tesla V100-SXM2-32GB",
        memory_mib=32768,
        cc=(7, 0),
        power_limit_w=300,
        temperature_thresholds_c=(90, 87, 83),
        max_sm_mhz=1530,
        pcie=(3, 16),
        nvlinks=6,
        unsupported={"remapped_rows", "gsp", "mig"},
    ),
    "RTX-4090": dict(
        name="NVIDIA GeForce RTX 4090",
        memory_mib=24564,
        cc=(8, 9),
        power_limit_w=450,
        temperature_thresholds_c=(95, 92, 90),
        max_sm_mhz=2520,
        pcie=(4, 16),
        nvlinks=0,
        unsupported={"ecc", "serial", "retired_pages", "remapped_rows", "gsp", "mig"},
    ),
}

# Feature groups a vGPU guest (cloud_shared) cannot read: the hypervisor owns them.
VGPU_UNSUPPORTED = frozenset(
    {"power", "pcie", "nvlink", "serial", "retired_pages", "remapped_rows", "mig", "fabric"}
)


@dataclass
class SimulatedProcess:
    pid: int
    used_memory_bytes: int | None
    name: str = "python"


@dataclass
class SimulatedGpu:
    """The mutable state of one simulated GPU; attribute names follow the NVML field they feed."""

    index: int
    name: str
    uuid: str
    serial: str
    bus_id: str  # NVML form: 00000000:01:00.0
    memory_total: int
    cc: tuple[int, int]
    power_limit_mw: int
    max_sm_mhz: int
    pcie_max: tuple[int, int]
    nvlinks: int = 0
    unsupported: set[str] = field(default_factory=set)
    memory_used: int = 0
    util_gpu: int = 0
    util_memory: int = 0
    temperature: int = 35
    power_mw: int = 60_000
    sm_clock: int = 0
    clock_reasons: int = 0x1
    ecc: dict[tuple[int, int], int] = field(default_factory=dict)  # (error type, counter) -> count
    retired_pages: dict[int, list[int]] = field(default_factory=dict)  # cause -> page addresses
    retired_pending: bool = False
    remapped: tuple[int, int, int, int] = (0, 0, 0, 0)  # correctable, uncorrectable, pending, failure
    pcie_current: tuple[int, int] | None = None
    processes: list[SimulatedProcess] = field(default_factory=list)
    nvlink_states: list[int] | None = None
    lost: bool = False
    enumerated: bool = True  # False: the GPU is not on the bus at all (NVML does not count it)
    on_bus: bool = True  # False with enumerated False: gone from PCI too (sysfs shows no device)
    persistence: int = 1  # nvmlEnableState_t
    ecc_mode: tuple[int, int] = (1, 1)  # current, pending
    mig_mode: tuple[int, int] = (0, 0)  # current, pending
    gsp_version: str = ""  # "": the driver's version (GSP firmware ships with the driver)
    nvlink_errors: dict[tuple[int, int], int] = field(default_factory=dict)  # (link, counter) -> count
    # nvmlGpuFabricState_t: 3 completed (the fabric manager registered the GPU); status an nvmlReturn_t
    fabric_state: int = 3
    fabric_status: int = 0
    fabric_clique: int = 0
    # nvmlTemperatureThresholds_t -> °C; a threshold missing here answers NotSupported
    temperature_thresholds: dict[int, int] = field(default_factory=dict)

    @classmethod
    def from_model(cls, model: str, index: int, *, node_key: str = "sim", vgpu: bool = False) -> SimulatedGpu:
        spec = GPU_MODELS[model]
        unsupported = set(spec["unsupported"]) | (set(VGPU_UNSUPPORTED) if vgpu else set())
        if not spec.get("fabric"):  # the fabric info API exists on Hopper and later NVSwitch systems only
            unsupported.add("fabric")
        bus = 0x18 + index * 0x10 if index < 14 else index
        shutdown, slowdown, gpu_max = spec["temperature_thresholds_c"]
        thresholds = {
            pynvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: shutdown,
            pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: slowdown,
            pynvml.NVML_TEMPERATURE_THRESHOLD_GPU_MAX: gpu_max,
        }
        return cls(
            index=index,
            name=spec["name"],
            uuid=_stable_uuid(node_key, index),
            serial=_stable_serial(node_key, index),
            bus_id=f"00000000:{bus:02X}:00.0",
            memory_total=spec["memory_mib"] * 1024 * 1024,
            cc=spec["cc"],
            power_limit_mw=spec["power_limit_w"] * 1000,
            max_sm_mhz=spec["max_sm_mhz"],
            pcie_max=spec["pcie"],
            nvlinks=spec["nvlinks"],
            unsupported=unsupported,
            sm_clock=spec["max_sm_mhz"],
            nvlink_states=[1] * spec["nvlinks"] if spec["nvlinks"] else None,
            temperature_thresholds={key: value for key, value in thresholds.items() if value is not None},
        )


def _stable_uuid(node_key: str, index: int) -> str:
    return f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, f'fleet-agent-sim/{node_key}/{index}')}"


def _stable_serial(node_key: str, index: int) -> str:
    # Stable across runs (unlike hash()), so a restarted simulator keeps the same inventory.
    return f"{uuid.uuid5(uuid.NAMESPACE_URL, f'fleet-agent-sim/{node_key}/{index}/serial').int % 10**13:013d}"


class SimulatedHandle:
    """Opaque device handle (the real one is a ctypes pointer; two pointers to one device compare equal
    by address, so these compare equal by index)."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def __repr__(self) -> str:
        return f"<simulated nvmlDevice {self.index}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SimulatedHandle) and other.index == self.index

    def __hash__(self) -> int:
        return hash(("nvmlDevice", self.index))


@dataclass
class SimulatedEventData:
    """``c_nvmlEventData_t``'s fields. Not the ctypes struct itself: its ``device`` field is a ctypes
    pointer, and a simulated handle is not one."""

    device: SimulatedHandle
    eventType: int  # noqa: N815 - pynvml's field names
    eventData: int  # noqa: N815
    gpuInstanceId: int = 0xFFFFFFFF  # noqa: N815 - "not a MIG instance"
    computeInstanceId: int = 0xFFFFFFFF  # noqa: N815


class SimulatedEventSet:
    """``nvmlEventSet_t``: a queue that ``nvmlEventSetWait_v2`` blocks on."""

    def __init__(self) -> None:
        self._queue: deque[SimulatedEventData] = deque()
        self._ready = threading.Condition()
        self.freed = False

    def put(self, data: SimulatedEventData) -> None:
        with self._ready:
            self._queue.append(data)
            self._ready.notify_all()

    def take(self, timeout_ms: int) -> SimulatedEventData | None:
        with self._ready:
            self._ready.wait_for(lambda: self._queue, timeout=timeout_ms / 1000)
            return self._queue.popleft() if self._queue else None


def _raise(code: int) -> None:
    raise pynvml.NVMLError(code)


class SimulatedNvml:
    """Module-like stand-in for ``pynvml``; pass it to ``NvmlAdapter(nvml_module=...)``.

    ``init_error`` (an ``NVML_ERROR_*`` code) makes ``nvmlInit`` fail the way a node without a
    driver does; ``missing_functions`` makes the named calls raise FunctionNotFound (an old driver).
    """

    NVMLError = pynvml.NVMLError

    def __init__(
        self,
        gpus: list[SimulatedGpu],
        *,
        driver_version: str = "550.54.15",
        cuda_driver_version: int = 12040,
        init_error: int | None = None,
        missing_functions: set[str] | None = None,
    ):
        self.gpus = gpus
        for gpu in gpus:
            gpu.gsp_version = gpu.gsp_version or driver_version
        self.driver_version = driver_version
        self.cuda_driver_version = cuda_driver_version
        self.init_error = init_error
        self.missing_functions = set(missing_functions or ())
        self.init_count = 0
        self._registrations: list[tuple[SimulatedEventSet, SimulatedGpu, int]] = []

    def __getattr__(self, name: str) -> Any:
        # Constants and error classes come from the real bindings so they are identical; functions
        # never do (a real call would try to load libnvidia-ml).
        if name.startswith(
            ("NVML_", "NVMLError", "nvmlClocksEventReason", "nvmlClocksThrottleReason", "nvmlEventType", "c_nvml",
             "nvmlGpuFabricInfo_v")
        ):
            return getattr(pynvml, name)
        raise AttributeError(name)

    # -- library --------------------------------------------------------------------------------

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            _raise(self.init_error)
        self.init_count += 1

    def nvmlShutdown(self) -> None:
        self._initialised()
        self.init_count -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._initialised()
        return self.driver_version

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._initialised()
        return self.cuda_driver_version

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        self._check_function("nvmlSystemGetCudaDriverVersion_v2")
        return self.nvmlSystemGetCudaDriverVersion()

    def nvmlSystemGetProcessName(self, pid: int) -> str:
        self._initialised()
        for gpu in self.gpus:
            for proc in gpu.processes:
                if proc.pid == pid:
                    return proc.name
        _raise(pynvml.NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetCount(self) -> int:
        self._initialised()
        return len(self._enumerated())

    def nvmlDeviceGetHandleByIndex(self, index: int) -> SimulatedHandle:
        self._initialised()
        if not 0 <= index < len(self._enumerated()):
            _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return SimulatedHandle(index)

    # -- identity -------------------------------------------------------------------------------

    def nvmlDeviceGetName(self, handle: SimulatedHandle) -> str:
        return self._gpu(handle).name

    def nvmlDeviceGetUUID(self, handle: SimulatedHandle) -> str:
        return self._gpu(handle).uuid

    def nvmlDeviceGetSerial(self, handle: SimulatedHandle) -> str:
        return self._gpu(handle, "serial").serial

    def nvmlDeviceGetPciInfo(self, handle: SimulatedHandle) -> Any:
        gpu = self._gpu(handle)
        info = pynvml.nvmlPciInfo_t()
        domain, bus, rest = gpu.bus_id.split(":")
        info.busId = gpu.bus_id.encode()
        info.busIdLegacy = gpu.bus_id[4:].encode()
        info.domain = int(domain, 16)
        info.bus = int(bus, 16)
        info.device = int(rest.split(".")[0], 16)
        info.pciDeviceId = 0x233010DE
        return info

    def nvmlDeviceGetCudaComputeCapability(self, handle: SimulatedHandle) -> tuple[int, int]:
        return self._gpu(handle).cc

    # -- utilisation, memory, thermals, power, clocks -------------------------------------------

    def nvmlDeviceGetMemoryInfo(self, handle: SimulatedHandle, version: Any = None) -> Any:
        gpu = self._gpu(handle)
        used = min(gpu.memory_used, gpu.memory_total)
        return pynvml.c_nvmlMemory_t(total=gpu.memory_total, free=gpu.memory_total - used, used=used)

    def nvmlDeviceGetUtilizationRates(self, handle: SimulatedHandle) -> Any:
        gpu = self._gpu(handle)
        return pynvml.c_nvmlUtilization_t(gpu=gpu.util_gpu, memory=gpu.util_memory)

    def nvmlDeviceGetTemperature(self, handle: SimulatedHandle, sensor: int) -> int:
        gpu = self._gpu(handle, "temperature")
        if sensor != pynvml.NVML_TEMPERATURE_GPU:
            _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return gpu.temperature

    def nvmlDeviceGetTemperatureThreshold(self, handle: SimulatedHandle, threshold: int) -> int:
        """pynvml's call: an nvmlTemperatureThresholds_t in, °C out as an int (the C call's unsigned int);
        InvalidArgument for a value outside the enum, NotSupported for a threshold the board does not have."""
        self._check_function("nvmlDeviceGetTemperatureThreshold")
        gpu = self._gpu(handle, "temperature")
        if not 0 <= threshold < pynvml.NVML_TEMPERATURE_THRESHOLD_COUNT:
            _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        value = gpu.temperature_thresholds.get(threshold)
        if value is None:
            _raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return int(value)

    def nvmlDeviceGetPowerUsage(self, handle: SimulatedHandle) -> int:
        return self._gpu(handle, "power").power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: SimulatedHandle) -> int:
        return self._gpu(handle, "power").power_limit_mw

    def nvmlDeviceGetClockInfo(self, handle: SimulatedHandle, clock_type: int) -> int:
        gpu = self._gpu(handle)
        if clock_type != pynvml.NVML_CLOCK_SM:
            _raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return gpu.sm_clock

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: SimulatedHandle) -> int:
        self._check_function("nvmlDeviceGetCurrentClocksEventReasons")
        return self._gpu(handle, "clocks_event_reasons").clock_reasons

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: SimulatedHandle) -> int:
        return self._gpu(handle, "clocks_event_reasons").clock_reasons

    # -- memory errors --------------------------------------------------------------------------

    def nvmlDeviceGetTotalEccErrors(self, handle: SimulatedHandle, error_type: int, counter_type: int) -> int:
        gpu = self._gpu(handle, "ecc")
        return gpu.ecc.get((error_type, counter_type), 0)

    def nvmlDeviceGetRetiredPages(self, handle: SimulatedHandle, cause: int) -> list[int]:
        gpu = self._gpu(handle, "retired_pages")
        return list(gpu.retired_pages.get(cause, []))

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: SimulatedHandle) -> int:
        return int(self._gpu(handle, "retired_pages").retired_pending)

    def nvmlDeviceGetRemappedRows(self, handle: SimulatedHandle) -> tuple[int, int, int, int]:
        return self._gpu(handle, "remapped_rows").remapped

    # -- PCIe, NVLink, processes ----------------------------------------------------------------

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: SimulatedHandle) -> int:
        gpu = self._gpu(handle, "pcie")
        return (gpu.pcie_current or gpu.pcie_max)[0]

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: SimulatedHandle) -> int:
        gpu = self._gpu(handle, "pcie")
        return (gpu.pcie_current or gpu.pcie_max)[1]

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: SimulatedHandle) -> int:
        return self._gpu(handle, "pcie").pcie_max[0]

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: SimulatedHandle) -> int:
        return self._gpu(handle, "pcie").pcie_max[1]

    def nvmlDeviceGetNvLinkState(self, handle: SimulatedHandle, link: int) -> int:
        gpu = self._gpu(handle, "nvlink")
        states = gpu.nvlink_states or []
        if not 0 <= link < len(states):
            # Real NVML: NotSupported on boards without NVLink, InvalidArgument past the last link.
            _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT if states else pynvml.NVML_ERROR_NOT_SUPPORTED)
        return states[link]

    def nvmlDeviceGetNvLinkErrorCounter(self, device: SimulatedHandle, link: int, counter: int) -> int:
        gpu = self._gpu(device, "nvlink")
        if not 0 <= link < len(gpu.nvlink_states or []):
            _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT if gpu.nvlink_states else pynvml.NVML_ERROR_NOT_SUPPORTED)
        if counter not in (
            pynvml.NVML_NVLINK_ERROR_DL_REPLAY,
            pynvml.NVML_NVLINK_ERROR_DL_RECOVERY,
            pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT,
            pynvml.NVML_NVLINK_ERROR_DL_CRC_DATA,
            pynvml.NVML_NVLINK_ERROR_DL_ECC_DATA,
        ):
            _raise(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return gpu.nvlink_errors.get((link, counter), 0)

    # -- configuration: persistence, ECC and MIG modes, GSP firmware, fabric ----------------------

    def nvmlDeviceGetPersistenceMode(self, handle: SimulatedHandle) -> int:
        return self._gpu(handle, "persistence").persistence

    def nvmlDeviceGetEccMode(self, handle: SimulatedHandle) -> list[int]:
        return list(self._gpu(handle, "ecc").ecc_mode)

    def nvmlDeviceGetMigMode(self, device: SimulatedHandle) -> list[int]:
        return list(self._gpu(device, "mig").mig_mode)

    def nvmlDeviceGetGspFirmwareVersion(self, handle: SimulatedHandle, version: Any = None) -> Any:
        gpu = self._gpu(handle, "gsp")
        if version is not None:  # a caller-supplied buffer, as in pynvml
            version.value = gpu.gsp_version.encode()
            return pynvml.NVML_SUCCESS
        return gpu.gsp_version.encode()  # pynvml returns the char buffer's bytes

    def nvmlDeviceGetGpuFabricInfo(self, device: SimulatedHandle, gpuFabricInfo: Any) -> int:  # noqa: N803
        self._fill_fabric(self._gpu(device), gpuFabricInfo)
        return pynvml.NVML_SUCCESS

    def nvmlDeviceGetGpuFabricInfoV(self, device: SimulatedHandle, gpuFabricInfo: Any) -> int:  # noqa: N803
        self._check_function("nvmlDeviceGetGpuFabricInfoV")
        info = self._fill_fabric(self._gpu(device), gpuFabricInfo)
        if getattr(info, "version", None) != pynvml.nvmlGpuFabricInfo_v2:
            _raise(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        return pynvml.NVML_SUCCESS

    def _fill_fabric(self, gpu: SimulatedGpu, pointer: Any) -> Any:
        """Real NVML fills the struct behind the pointer; on GPUs outside an NVSwitch fabric it answers with
        state NOT_SUPPORTED (Hopper) or NotSupported (earlier GPUs)."""
        if "fabric" in gpu.unsupported:
            if gpu.cc >= (9, 0):
                info = pointer.contents
                info.state = pynvml.NVML_GPU_FABRIC_STATE_NOT_SUPPORTED
                return info
            _raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        info = pointer.contents
        info.state = gpu.fabric_state
        info.status = gpu.fabric_status
        info.cliqueId = gpu.fabric_clique
        for i, byte in enumerate(uuid.uuid5(uuid.NAMESPACE_URL, "fleet-agent-sim/fabric").bytes):
            info.clusterUuid[i] = byte if gpu.fabric_state == pynvml.NVML_GPU_FABRIC_STATE_COMPLETED else 0
        return info

    def nvmlDeviceGetComputeRunningProcesses(self, handle: SimulatedHandle) -> list[Any]:
        gpu = self._gpu(handle)
        return [
            pynvml.nvmlFriendlyObject(
                {
                    "pid": proc.pid,
                    "usedGpuMemory": proc.used_memory_bytes,
                    "gpuInstanceId": 0xFFFFFFFF,
                    "computeInstanceId": 0xFFFFFFFF,
                }
            )
            for proc in gpu.processes
        ]

    # -- events ---------------------------------------------------------------------------------

    def nvmlEventSetCreate(self) -> SimulatedEventSet:
        self._check_function("nvmlEventSetCreate")
        return SimulatedEventSet()

    def nvmlDeviceGetSupportedEventTypes(self, handle: SimulatedHandle) -> int:
        self._check_function("nvmlDeviceGetSupportedEventTypes")
        gpu = self._gpu(handle, "events")
        types = pynvml.nvmlEventTypeXidCriticalError | pynvml.nvmlEventTypePState | pynvml.nvmlEventTypeClock
        if "ecc" not in gpu.unsupported:
            types |= pynvml.nvmlEventTypeSingleBitEccError | pynvml.nvmlEventTypeDoubleBitEccError
        return types

    def nvmlDeviceRegisterEvents(self, handle: SimulatedHandle, event_types: int,
                                 event_set: SimulatedEventSet) -> None:
        self._check_function("nvmlDeviceRegisterEvents")
        gpu = self._gpu(handle, "events")
        if event_types & ~self.nvmlDeviceGetSupportedEventTypes(handle):
            _raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        self._registrations.append((event_set, gpu, event_types))

    def nvmlEventSetWait_v2(self, event_set: SimulatedEventSet, timeoutms: int) -> SimulatedEventData:
        self._check_function("nvmlEventSetWait_v2")
        data = event_set.take(timeoutms)
        if data is None:
            _raise(pynvml.NVML_ERROR_TIMEOUT)
        return data

    def nvmlEventSetWait(self, event_set: SimulatedEventSet, timeoutms: int) -> SimulatedEventData:
        return self.nvmlEventSetWait_v2(event_set, timeoutms)

    def nvmlEventSetFree(self, event_set: SimulatedEventSet) -> None:
        self._initialised()
        event_set.freed = True
        self._registrations = [r for r in self._registrations if r[0] is not event_set]

    def emit_xid(self, gpu: SimulatedGpu, code: int) -> None:
        """What the driver does on an Xid: an event to every set that registered Xid events for the GPU."""
        if not gpu.enumerated:
            return
        handle = SimulatedHandle(self._enumerated().index(gpu))
        for event_set, registered, types in self._registrations:
            if registered is gpu and types & pynvml.nvmlEventTypeXidCriticalError:
                event_set.put(SimulatedEventData(handle, pynvml.nvmlEventTypeXidCriticalError, code))

    # -- internals ------------------------------------------------------------------------------

    def _initialised(self) -> None:
        if self.init_count <= 0:
            _raise(pynvml.NVML_ERROR_UNINITIALIZED)

    def _check_function(self, name: str) -> None:
        self._initialised()
        if name in self.missing_functions:
            _raise(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)

    def _enumerated(self) -> list[SimulatedGpu]:
        return [gpu for gpu in self.gpus if gpu.enumerated]

    def _gpu(self, handle: SimulatedHandle, feature: str | None = None) -> SimulatedGpu:
        self._initialised()
        gpu = self._enumerated()[handle.index]
        if gpu.lost:
            _raise(pynvml.NVML_ERROR_GPU_IS_LOST)
        if feature is not None and feature in gpu.unsupported:
            _raise(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return gpu
