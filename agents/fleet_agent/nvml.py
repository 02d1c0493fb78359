"""The one NVML adapter: everything the agent learns from NVML comes through ``NvmlAdapter``.

* ``pynvml`` is imported lazily and NVML is initialised once per adapter (the agent builds one);
  a failed initialisation is retried on the next sample, because a driver installed or loaded
  after the agent started should be picked up without a restart.
* Every field is read on its own: ``NotSupported``/``FunctionNotFound``/``NoPermission`` (consumer
  boards, vGPU guests, older drivers) give ``None`` for that field only; any other per-field error
  is logged once and also gives ``None``. One unreadable property never loses the sample.
* ``GpuIsLost`` on a device turns that GPU into a ``lost`` entry and emits one ``gpu_lost`` event.
* NVML-level failures become a visibility status with an actionable message, never an exception.

The NVML module is a parameter so the simulator (``fleet_agent.simnvml``) can stand in for it; the
simulator raises the very same ``pynvml.NVMLError_*`` classes, so this code cannot tell them apart.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fleet_agent.counters import CounterWindow
from fleet_agent.logutil import WarnOnce
from fleet_agent.protocol import decode_clock_event_reasons
from fleet_agent.timeutil import rfc3339, utc_now
from fleet_agent.xid import xid_info

log = logging.getLogger(__name__)

# NVML return codes (nvml.h). Matched by number so the adapter works with any module that raises
# NVMLError subclasses carrying ``.value``, which is how pynvml itself dispatches.
ERROR_UNINITIALIZED = 1
ERROR_INVALID_ARGUMENT = 2
ERROR_NOT_SUPPORTED = 3
ERROR_NO_PERMISSION = 4
ERROR_NOT_FOUND = 6
ERROR_DRIVER_NOT_LOADED = 9
ERROR_LIBRARY_NOT_FOUND = 12
ERROR_FUNCTION_NOT_FOUND = 13
ERROR_GPU_IS_LOST = 15
ERROR_LIB_RM_VERSION_MISMATCH = 18

_FIELD_UNAVAILABLE = frozenset({ERROR_NOT_SUPPORTED, ERROR_FUNCTION_NOT_FOUND, ERROR_NO_PERMISSION})
_NO_MORE_LINKS = frozenset({ERROR_NOT_SUPPORTED, ERROR_INVALID_ARGUMENT, ERROR_FUNCTION_NOT_FOUND})

# nvml.h constants, repeated here so a stand-in module needs only the functions.
TEMPERATURE_GPU = 0
# nvmlTemperatureThresholds_t: the ones the inventory carries, as (report key, value)
TEMPERATURE_THRESHOLDS = (("shutdown_c", 0), ("slowdown_c", 1), ("gpu_max_c", 3))
CLOCK_SM = 1
ECC_CORRECTED, ECC_UNCORRECTED = 0, 1
ECC_VOLATILE, ECC_AGGREGATE = 0, 1
RETIREMENT_CAUSES = (0, 1)  # multiple single-bit errors, double-bit error

MAX_NVLINKS = 18
# nvmlNvLinkErrorCounter_t: the data-link-layer counters that mean a bad link (replays and recoveries are
# the link fixing itself; CRC errors are what it fixed). ECC_DATA (4) is lane ECC, not read.
NVLINK_ERROR_COUNTERS = (("replay", 0), ("recovery", 1), ("crc_flit", 2), ("crc_data", 3))
# nvmlGpuFabricState_t
FABRIC_STATES = {0: "not_supported", 1: "not_started", 2: "in_progress", 3: "completed"}
# Slow-changing facts (NVLink error counters, the GPU's fabric registration) are read this often, not
# every cycle; error growth is judged over NVLINK_ERROR_WINDOW_S.
SLOW_REFRESH_S = 60.0
NVLINK_ERROR_WINDOW_S = 900.0
MAX_COUNTER = 2**53 - 1  # the report schema's bound on counters (the largest integer JSON readers hold exactly)
MAX_PROCESSES_PER_GPU = 64
_MAX_TEXT = 256

STATUS_OK = "ok"
STATUS_LIBRARY_NOT_FOUND = "library_not_found"
STATUS_DRIVER_NOT_LOADED = "driver_not_loaded"
STATUS_NO_PERMISSION = "no_permission"
STATUS_ERROR = "error"

_INIT_FAILURES: dict[int, tuple[str, str]] = {
    ERROR_LIBRARY_NOT_FOUND: (
        STATUS_LIBRARY_NOT_FOUND,
        "NVML library libnvidia-ml.so.1 not found: the NVIDIA driver is not installed on this host, or "
        "this container was started without GPU access (use the NVIDIA container toolkit, --gpus all).",
    ),
    ERROR_DRIVER_NOT_LOADED: (
        STATUS_DRIVER_NOT_LOADED,
        "NVIDIA kernel driver not loaded: check `lsmod | grep nvidia` and the kernel log for NVRM errors; "
        "after a kernel or driver upgrade the module may need a rebuild (DKMS) or a reboot.",
    ),
    ERROR_NO_PERMISSION: (
        STATUS_NO_PERMISSION,
        "no permission to open the NVIDIA devices (/dev/nvidia*): run the agent as a user allowed to "
        "access them (e.g. the video group) or fix the device node permissions.",
    ),
    ERROR_LIB_RM_VERSION_MISMATCH: (
        STATUS_ERROR,
        "NVML library and kernel driver versions differ (driver upgraded without a reboot): reboot or "
        "reload the nvidia kernel modules.",
    ),
}


def decode_cuda_driver_version(value: int | None) -> str | None:
    """NVML encodes the CUDA version as 1000*major + 10*minor: 12040 → "12.4"."""
    if value is None or value <= 0:
        return None
    return f"{value // 1000}.{(value % 1000) // 10}"


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):  # older bindings return bytes for C strings
        value = value.decode("utf-8", "replace")
    return str(value)[:_MAX_TEXT]


def _flag(value: Any) -> bool | None:
    """An nvmlEnableState_t (0 disabled, 1 enabled) as a boolean."""
    return None if value is None else bool(value)


def _mode_pair(value: Any) -> dict | None:
    """(current, pending) enable states, as nvmlDeviceGetEccMode / nvmlDeviceGetMigMode return them."""
    if value is None:
        return None
    current, pending = value
    return {"current": bool(current), "pending": bool(pending)}


@dataclass
class NvmlSample:
    """What one pass over NVML produced; ``gpus`` and ``events`` are protocol-shaped dicts."""

    visibility: dict
    gpus: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    driver_version: str | None = None
    cuda_driver_version: str | None = None


class _GpuLost(Exception):
    """Internal: a field call raised GpuIsLost, abandon this GPU for this sample."""


class NvmlAdapter:
    def __init__(
        self,
        nvml_module: Any = None,
        *,
        expected_gpu_count: int | None = None,
        clock: Callable[[], datetime] = utc_now,
        monotonic: Callable[[], float] = time.monotonic,
        slow_refresh_s: float = SLOW_REFRESH_S,
    ):
        self._module = nvml_module
        self.expected_gpu_count = expected_gpu_count
        self._clock = clock
        self._lock = threading.Lock()
        self._initialised = False
        self._error_class: type[BaseException] | None = None
        # Properties that cannot change while the driver is loaded, read once per GPU index.
        self._static: dict[int, dict] = {}
        self._lost_reported: set[int] = set()
        self._warn = WarnOnce(log)
        # Per GPU index: (monotonic time read, {"nvlink_errors": ..., "fabric": ...}).
        self._slow: dict[int, tuple[float, dict]] = {}
        self._nvlink_window = CounterWindow(NVLINK_ERROR_WINDOW_S)
        self._monotonic = monotonic
        self.slow_refresh_s = slow_refresh_s

    # -- initialisation -------------------------------------------------------------------------

    def _ensure_initialised(self) -> tuple[str, str] | None:
        """Initialise NVML if needed; returns (status, message) when NVML is unusable."""
        if self._initialised:
            return None
        if self._module is None:
            try:
                import pynvml
            except ImportError:
                return STATUS_ERROR, (
                    "Python package nvidia-ml-py (module pynvml) is not installed in the agent's "
                    "environment: pip install 'nvidia-ml-py>=12,<14'."
                )
            self._module = pynvml
        self._error_class = getattr(self._module, "NVMLError", Exception)
        try:
            self._module.nvmlInit()
        except self._error_class as err:  # type: ignore[misc]
            code = getattr(err, "value", None)
            status, message = _INIT_FAILURES.get(code, (STATUS_ERROR, f"nvmlInit failed: {err}"))
            self._warn(f"init:{code}", "NVML unavailable: %s", message)
            return status, message
        except OSError as err:  # defensive: a broken library can surface as a loader error
            return STATUS_ERROR, f"nvmlInit failed: {err}"
        self._initialised = True
        return None

    def shutdown(self) -> None:
        with self._lock:
            if self._initialised:
                try:
                    self._module.nvmlShutdown()
                except Exception as err:  # noqa: BLE001 - shutting down, nothing left to protect
                    log.debug("nvmlShutdown failed: %s", err)
                self._initialised = False

    # -- public API -----------------------------------------------------------------------------

    def sample(self) -> NvmlSample:
        """Read every GPU. Never raises for NVML problems: they end up in ``visibility``."""
        with self._lock:
            failure = self._ensure_initialised()
            if failure is not None:
                return NvmlSample(visibility=self._visibility(failure[0], failure[1], None, []))
            driver_version, cuda_version = self._driver_versions()
            try:
                count = int(self._module.nvmlDeviceGetCount())
            except self._error_class as err:  # type: ignore[misc]
                message = f"nvmlDeviceGetCount failed: {err}"
                return NvmlSample(
                    visibility=self._visibility(STATUS_ERROR, message, None, []),
                    driver_version=driver_version,
                    cuda_driver_version=cuda_version,
                )
            gpus: list[dict] = []
            events: list[dict] = []
            for index in range(count):
                gpu = self._collect_gpu(index)
                gpus.append(gpu)
                self._note_lost(index, gpu, events)
            lost = [gpu["pci_bus_id"] or f"index {gpu['index']}" for gpu in gpus if gpu["lost"]]
            visibility = self._visibility(STATUS_OK, None, count, lost)
            return NvmlSample(visibility, gpus, events, driver_version, cuda_version)

    def forget_static(self) -> None:
        """Read the once-per-driver-load properties again (identity, GSP firmware) at the next sample: for a
        driver that was reloaded under the agent."""
        with self._lock:
            self._static.clear()

    def driver_versions(self) -> tuple[str | None, str | None]:
        """(driver version, CUDA driver version "12.4"), ``None`` where NVML cannot say."""
        with self._lock:
            if self._ensure_initialised() is not None:
                return None, None
            return self._driver_versions()

    # -- visibility -----------------------------------------------------------------------------

    def _visibility(self, status: str, message: str | None, count: int | None, lost: list[str]) -> dict:
        problems = [message] if message else []
        expected = self.expected_gpu_count
        if count is not None and expected is not None and count != expected:
            problems.append(
                f"NVML sees {count} GPU(s) but {expected} are expected: a GPU that is missing from the "
                "bus needs a reboot and then hardware inspection; check `nvidia-smi` and the kernel log."
            )
        if lost:
            problems.append(
                f"GPU(s) lost ({', '.join(lost)}): fallen off the bus; reboot the node, and treat a repeat "
                "as a hardware fault."
            )
        return {
            "nvml": status,
            "message": " ".join(problems) or None,
            "gpu_count": count,
            "expected_gpu_count": expected,
            "lost_gpus": lost,
        }

    def _driver_versions(self) -> tuple[str | None, str | None]:
        driver = _text(self._call_optional("nvmlSystemGetDriverVersion"))
        cuda = self._call_optional("nvmlSystemGetCudaDriverVersion_v2")
        if cuda is None:
            cuda = self._call_optional("nvmlSystemGetCudaDriverVersion")
        return driver, decode_cuda_driver_version(cuda)

    def _call_optional(self, name: str, *args: Any, quiet: frozenset[int] = frozenset()) -> Any:
        fn = getattr(self._module, name, None)
        if fn is None:
            return None
        try:
            return fn(*args)
        except self._error_class as err:  # type: ignore[misc]
            code = getattr(err, "value", None)
            if code not in _FIELD_UNAVAILABLE and code not in quiet:
                self._warn(f"{name}:{getattr(err, 'value', None)}", "NVML %s failed: %s", name, err)
            return None

    # -- per GPU --------------------------------------------------------------------------------

    def _field(self, name: str, *args: Any) -> Any:
        """One fallible NVML property: ``None`` when unavailable, ``_GpuLost`` when the GPU is gone."""
        fn = getattr(self._module, name, None)
        if fn is None:  # bindings older than the function: same meaning as FunctionNotFound
            return None
        try:
            return fn(*args)
        except self._error_class as err:  # type: ignore[misc]
            code = getattr(err, "value", None)
            if code == ERROR_GPU_IS_LOST:
                raise _GpuLost from err
            if code not in _FIELD_UNAVAILABLE:
                self._warn(f"{name}:{code}", "NVML %s failed: %s (field reported as null)", name, err)
            return None

    def _collect_gpu(self, index: int) -> dict:
        try:
            handle = self._module.nvmlDeviceGetHandleByIndex(index)
        except self._error_class as err:  # type: ignore[misc]
            if getattr(err, "value", None) == ERROR_GPU_IS_LOST:
                return self._gpu_entry(index, self._static.get(index, {}), lost=True)
            self._warn(f"handle:{index}", "NVML cannot open GPU %d: %s", index, err)
            return self._gpu_entry(index, self._static.get(index, {}), lost=False)
        try:
            static = self._static.get(index) or self._read_static(index, handle)
            return self._gpu_entry(index, static, lost=False, dynamic=self._read_dynamic(handle, static, index))
        except _GpuLost:
            return self._gpu_entry(index, self._static.get(index, {}), lost=True)

    def _read_static(self, index: int, handle: Any) -> dict:
        pci = self._field("nvmlDeviceGetPciInfo", handle)
        capability = self._field("nvmlDeviceGetCudaComputeCapability", handle)
        static = {
            "uuid": _text(self._field("nvmlDeviceGetUUID", handle)),
            "name": _text(self._field("nvmlDeviceGetName", handle)),
            "serial": _text(self._field("nvmlDeviceGetSerial", handle)),
            "pci_bus_id": _text(getattr(pci, "busId", None)) if pci is not None else None,
            "compute_capability": f"{capability[0]}.{capability[1]}" if capability else None,
            "gen_max": self._field("nvmlDeviceGetMaxPcieLinkGeneration", handle),
            "width_max": self._field("nvmlDeviceGetMaxPcieLinkWidth", handle),
            "nvlink_links": self._count_nvlinks(handle),
            # GSP firmware ships with the driver and loads at driver start: fixed while the driver is loaded.
            "gsp_firmware_version": _text(self._field("nvmlDeviceGetGspFirmwareVersion", handle)),
            # Set by the board's firmware (VBIOS): fixed while the driver is loaded, sent with the inventory only.
            "temperature_thresholds": self._temperature_thresholds(handle),
        }
        # Cache only a complete identity, so a transient failure is retried next cycle; this also
        # keeps the lost GPU's uuid and bus id for its ``lost`` entry later.
        if static["uuid"] is not None and static["pci_bus_id"] is not None:
            self._static[index] = static
        return static

    def _temperature_thresholds(self, handle: Any) -> dict | None:
        """Shutdown, slowdown (hardware clock cut) and max operating (software throttle) temperatures in °C;
        ``None`` when the board has none of them (vGPU guests, some consumer boards)."""
        thresholds = {}
        for key, threshold in TEMPERATURE_THRESHOLDS:
            value = self._field("nvmlDeviceGetTemperatureThreshold", handle, threshold)
            # 0 or an absurd value is a board that fills the field without knowing it: treat as unknown.
            thresholds[key] = int(value) if value is not None and 0 < int(value) < 200 else None
        return thresholds if any(value is not None for value in thresholds.values()) else None

    def _count_nvlinks(self, handle: Any) -> int | None:
        """Links this GPU has: probing stops at the first NotSupported/InvalidArgument."""
        fn = getattr(self._module, "nvmlDeviceGetNvLinkState", None)
        if fn is None:
            return None
        for link in range(MAX_NVLINKS):
            try:
                fn(handle, link)
            except self._error_class as err:  # type: ignore[misc]
                code = getattr(err, "value", None)
                if code == ERROR_GPU_IS_LOST:
                    raise _GpuLost from err
                if code in _NO_MORE_LINKS or code == ERROR_NO_PERMISSION:
                    return link or None
                self._warn(f"nvlink:{code}", "NVML nvmlDeviceGetNvLinkState failed: %s", err)
                return link or None
        return MAX_NVLINKS

    def _read_dynamic(self, handle: Any, static: dict, index: int) -> dict:
        field_ = self._field
        memory = field_("nvmlDeviceGetMemoryInfo", handle)
        utilization = field_("nvmlDeviceGetUtilizationRates", handle)
        power_mw = field_("nvmlDeviceGetPowerUsage", handle)
        limit_mw = field_("nvmlDeviceGetEnforcedPowerLimit", handle)
        reasons = field_("nvmlDeviceGetCurrentClocksEventReasons", handle)
        if reasons is None:  # drivers before 535 only know the older name
            reasons = field_("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
        return {
            "memory_total_bytes": getattr(memory, "total", None),
            "memory_used_bytes": getattr(memory, "used", None),
            "utilization_gpu_pct": getattr(utilization, "gpu", None),
            "utilization_memory_pct": getattr(utilization, "memory", None),
            "temperature_c": field_("nvmlDeviceGetTemperature", handle, TEMPERATURE_GPU),
            "power_draw_w": round(power_mw / 1000.0, 1) if power_mw is not None else None,
            "power_limit_w": round(limit_mw / 1000.0, 1) if limit_mw is not None else None,
            "sm_clock_mhz": field_("nvmlDeviceGetClockInfo", handle, CLOCK_SM),
            "clock_event_reasons_mask": reasons,
            "clock_event_reasons": decode_clock_event_reasons(reasons),
            "ecc": self._ecc(handle),
            "retired_pages": self._retired_pages(handle),
            "remapped_rows": self._remapped_rows(handle),
            "pcie": self._pcie(handle, static),
            "processes": self._processes(handle),
            "nvlink": self._nvlink_states(handle, static.get("nvlink_links")),
            "persistence_mode": _flag(field_("nvmlDeviceGetPersistenceMode", handle)),
            "ecc_mode": _mode_pair(field_("nvmlDeviceGetEccMode", handle)),
            "mig_mode": _mode_pair(field_("nvmlDeviceGetMigMode", handle)),
            **self._slow_facts(index, handle, static.get("nvlink_links")),
        }

    def _slow_facts(self, index: int, handle: Any, links: int | None) -> dict:
        """NVLink error counters and fabric registration, read every SLOW_REFRESH_S per GPU."""
        now = self._monotonic()
        cached = self._slow.get(index)
        if cached is not None and now - cached[0] < self.slow_refresh_s:
            return cached[1]
        facts = {"nvlink_errors": self._nvlink_errors(index, handle, links, now), "fabric": self._fabric(handle)}
        self._slow[index] = (now, facts)
        return facts

    def _nvlink_errors(self, index: int, handle: Any, links: int | None, now: float) -> list[dict] | None:
        if not links or getattr(self._module, "nvmlDeviceGetNvLinkErrorCounter", None) is None:
            return None
        entries = []
        counted = False
        for link in range(links):
            entry: dict[str, Any] = {"link": link}
            recent: dict[str, int | None] = {}
            for name, counter in NVLINK_ERROR_COUNTERS:
                value = self._field("nvmlDeviceGetNvLinkErrorCounter", handle, link, counter)
                if value is not None:
                    value = min(int(value), MAX_COUNTER)  # a uint64 past what the report schema (JSON) bounds
                entry[name] = value
                recent[name] = self._nvlink_window.update((index, link, name), value, now)
            if all(entry[name] is None for name, _ in NVLINK_ERROR_COUNTERS):
                continue  # a link this GPU does not count errors for (or newer GPUs: field values only)
            counted = True
            if any(entry[name] for name, _ in NVLINK_ERROR_COUNTERS):  # only links with errors are sent
                entry["recent"] = recent
                entries.append(entry)
        return entries if counted else None

    def _fabric(self, handle: Any) -> dict | None:
        """The GPU's registration with the NVSwitch fabric (fabric manager on HGX, NVL systems): Hopper and
        later; NotSupported (or state not_supported) elsewhere."""
        module = self._module
        for name, struct_name in (("nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfoV_t"),
                                  ("nvmlDeviceGetGpuFabricInfo", "c_nvmlGpuFabricInfo_t")):
            struct = getattr(module, struct_name, None)
            if getattr(module, name, None) is None or struct is None:
                continue
            info = struct()
            if self._field(name, handle, ctypes.pointer(info)) is None:
                continue  # NotSupported / FunctionNotFound: try the older call
            state = FABRIC_STATES.get(int(info.state), "unknown")
            if state == "not_supported":
                return None
            return {
                "state": state,
                "status": int(info.status),
                "clique_id": int(info.cliqueId),
                "cluster_uuid": bytes(info.clusterUuid).hex() if any(info.clusterUuid) else None,
                "health_mask": int(info.healthMask) if hasattr(info, "healthMask") else None,
            }
        return None

    def _ecc(self, handle: Any) -> dict | None:
        counters = {
            "volatile_corrected": (ECC_CORRECTED, ECC_VOLATILE),
            "volatile_uncorrected": (ECC_UNCORRECTED, ECC_VOLATILE),
            "aggregate_corrected": (ECC_CORRECTED, ECC_AGGREGATE),
            "aggregate_uncorrected": (ECC_UNCORRECTED, ECC_AGGREGATE),
        }
        ecc = {
            key: self._field("nvmlDeviceGetTotalEccErrors", handle, *args) for key, args in counters.items()
        }
        return ecc if any(value is not None for value in ecc.values()) else None

    def _retired_pages(self, handle: Any) -> dict | None:
        pages = [self._field("nvmlDeviceGetRetiredPages", handle, cause) for cause in RETIREMENT_CAUSES]
        pending = self._field("nvmlDeviceGetRetiredPagesPendingStatus", handle)
        if all(p is None for p in pages) and pending is None:
            return None  # Ampere and later use row remapping instead
        count = sum(len(p) for p in pages if p is not None) if any(p is not None for p in pages) else None
        return {"count": count, "pending": bool(pending) if pending is not None else None}

    def _remapped_rows(self, handle: Any) -> dict | None:
        rows = self._field("nvmlDeviceGetRemappedRows", handle)
        if rows is None:
            return None
        correctable, uncorrectable, pending, failure = rows
        return {
            "correctable": correctable,
            "uncorrectable": uncorrectable,
            "pending": bool(pending),
            "failure": bool(failure),
        }

    def _pcie(self, handle: Any, static: dict) -> dict | None:
        pcie = {
            "gen_current": self._field("nvmlDeviceGetCurrPcieLinkGeneration", handle),
            "gen_max": static.get("gen_max"),
            "width_current": self._field("nvmlDeviceGetCurrPcieLinkWidth", handle),
            "width_max": static.get("width_max"),
        }
        return pcie if any(value is not None for value in pcie.values()) else None

    def _processes(self, handle: Any) -> list[dict] | None:
        running = self._field("nvmlDeviceGetComputeRunningProcesses", handle)
        if running is None:
            return None
        processes = []
        for proc in running[:MAX_PROCESSES_PER_GPU]:
            pid = getattr(proc, "pid", None)
            # NotFound: the process exited between the two calls.
            name = (
                self._call_optional("nvmlSystemGetProcessName", pid, quiet=frozenset({ERROR_NOT_FOUND}))
                if pid is not None
                else None
            )
            processes.append(
                {
                    "pid": pid,
                    "used_memory_bytes": getattr(proc, "usedGpuMemory", None),
                    "name": _text(name),
                }
            )
        return processes

    def _nvlink_states(self, handle: Any, links: int | None) -> list[int] | None:
        if not links:
            return None
        return [self._field("nvmlDeviceGetNvLinkState", handle, link) for link in range(links)]

    @staticmethod
    def _gpu_entry(index: int, static: dict, *, lost: bool, dynamic: dict | None = None) -> dict:
        dynamic = dynamic or {}
        return {
            "index": index,
            "uuid": static.get("uuid"),
            "name": static.get("name"),
            "serial": static.get("serial"),
            "pci_bus_id": static.get("pci_bus_id"),
            "lost": lost,
            "memory_total_bytes": dynamic.get("memory_total_bytes"),
            "memory_used_bytes": dynamic.get("memory_used_bytes"),
            "utilization_gpu_pct": dynamic.get("utilization_gpu_pct"),
            "utilization_memory_pct": dynamic.get("utilization_memory_pct"),
            "temperature_c": dynamic.get("temperature_c"),
            "power_draw_w": dynamic.get("power_draw_w"),
            "power_limit_w": dynamic.get("power_limit_w"),
            "sm_clock_mhz": dynamic.get("sm_clock_mhz"),
            "clock_event_reasons_mask": dynamic.get("clock_event_reasons_mask"),
            "clock_event_reasons": dynamic.get("clock_event_reasons"),
            "ecc": dynamic.get("ecc"),
            "retired_pages": dynamic.get("retired_pages"),
            "remapped_rows": dynamic.get("remapped_rows"),
            "pcie": dynamic.get("pcie"),
            "compute_capability": static.get("compute_capability"),
            "processes": dynamic.get("processes"),
            "nvlink": dynamic.get("nvlink"),
            "nvlink_errors": dynamic.get("nvlink_errors"),
            "persistence_mode": dynamic.get("persistence_mode"),
            "ecc_mode": dynamic.get("ecc_mode"),
            "mig_mode": dynamic.get("mig_mode"),
            "gsp_firmware_version": static.get("gsp_firmware_version"),
            "fabric": dynamic.get("fabric"),
            # inventory only: ReportBuilder moves it out of the per-sample entry (fleet_agent.inventory)
            "temperature_thresholds": static.get("temperature_thresholds"),
        }

    def _note_lost(self, index: int, gpu: dict, events: list[dict]) -> None:
        """Emit ``gpu_lost`` once when a GPU turns lost (not on every sample while it stays lost)."""
        if not gpu["lost"]:
            self._lost_reported.discard(index)
            return
        if index in self._lost_reported:
            return
        self._lost_reported.add(index)
        where = gpu["pci_bus_id"] or f"index {index}"
        events.append(
            {
                "kind": "gpu_lost",
                "at": rfc3339(self._clock()),
                "gpu_uuid": gpu["uuid"],
                "pci_bus_id": gpu["pci_bus_id"],
                "code": None,
                "severity": "critical",
                "message": f"GPU {index} ({where}) is lost: NVML returns GPU_IS_LOST (fallen off the bus). "
                "Reboot the node; a repeat means hardware.",
                "raw": f"NVMLError_GpuIsLost on GPU index {index}",
            }
        )


# -- Xid events -----------------------------------------------------------------------------------

EVENT_TYPE_XID_CRITICAL_ERROR = 0x8  # nvmlEventTypeXidCriticalError
ERROR_TIMEOUT = 10


def _handle_key(handle: Any) -> Any:
    """A device handle as a dict key: the address behind pynvml's ctypes pointer (the event's ``device``
    is a new pointer object to the same device), or the handle itself for a stand-in module."""
    try:
        return ctypes.cast(handle, ctypes.c_void_p).value
    except (TypeError, ctypes.ArgumentError):
        return handle


class XidEventWatcher:
    """Xid critical errors from NVML's event API, for nodes where the kernel log cannot be read.

    The kernel log is the primary Xid source (it also carries SXid, AER and the driver's detail text), but a
    container without CAP_SYSLOG cannot read it. NVML delivers the same Xid number through
    ``nvmlEventSetWait_v2``. ``open()`` registers every GPU that supports the event type; ``wait()`` blocks up
    to a timeout (outside the adapter's lock, NVML is thread-safe) and returns protocol events with the GPU's
    uuid and bus id, known from registration time because a GPU that fell off the bus cannot be asked.
    """

    def __init__(self, adapter: NvmlAdapter):
        self._adapter = adapter
        self._set: Any = None
        self._devices: dict[Any, tuple[str | None, str | None]] = {}

    @property
    def watching(self) -> int:
        return len(self._devices)

    def open(self) -> int:
        """Register the GPUs; returns how many are watched (0: nothing to wait for)."""
        adapter = self._adapter
        with adapter._lock:
            if adapter._ensure_initialised() is not None:
                return 0
            module, error = adapter._module, adapter._error_class
            try:
                self._set = module.nvmlEventSetCreate()
                for index in range(module.nvmlDeviceGetCount()):
                    handle = module.nvmlDeviceGetHandleByIndex(index)
                    try:
                        supported = module.nvmlDeviceGetSupportedEventTypes(handle)
                        if not supported & EVENT_TYPE_XID_CRITICAL_ERROR:
                            continue
                        module.nvmlDeviceRegisterEvents(handle, EVENT_TYPE_XID_CRITICAL_ERROR, self._set)
                    except error as err:  # type: ignore[misc] - vGPU guests, old boards: skip that GPU
                        adapter._warn(f"events:{index}:{getattr(err, 'value', None)}",
                                      "GPU %d: no NVML Xid events (%s)", index, err)
                        continue
                    static = adapter._static.get(index) or adapter._read_static(index, handle)
                    self._devices[_handle_key(handle)] = (static.get("uuid"), static.get("pci_bus_id"))
            except error as err:  # type: ignore[misc]
                adapter._warn(f"events:{getattr(err, 'value', None)}", "NVML Xid events unavailable: %s", err)
                self.close()
                return 0
        return len(self._devices)

    def wait(self, timeout_ms: int) -> list[dict]:
        """Events that arrived within ``timeout_ms`` (and any queued right behind the first); [] on timeout."""
        if self._set is None:
            return []
        module, error = self._adapter._module, self._adapter._error_class
        events = []
        wait_ms = timeout_ms
        while True:
            try:
                data = module.nvmlEventSetWait_v2(self._set, wait_ms)
            except error as err:  # type: ignore[misc]
                if getattr(err, "value", None) != ERROR_TIMEOUT:
                    self._adapter._warn(f"events-wait:{getattr(err, 'value', None)}", "NVML event wait failed: %s",
                                        err)
                return events
            if data.eventType == EVENT_TYPE_XID_CRITICAL_ERROR:
                events.append(self._event(data))
            wait_ms = 0  # drain what is already queued, then hand the batch over

    def close(self) -> None:
        if self._set is not None:
            try:
                self._adapter._module.nvmlEventSetFree(self._set)
            except Exception as err:  # noqa: BLE001 - closing, nothing left to protect
                log.debug("nvmlEventSetFree failed: %s", err)
        self._set = None
        self._devices.clear()

    def _event(self, data: Any) -> dict:
        code = int(data.eventData)
        uuid, bus_id = self._devices.get(_handle_key(data.device), (None, None))
        info = xid_info(code)
        return {
            "kind": "xid",
            "at": rfc3339(self._adapter._clock()),
            "gpu_uuid": uuid,
            "pci_bus_id": bus_id,
            "code": code,
            "severity": info["severity"],
            "message": f"Xid {code} ({info['meaning']}), reported by NVML",
            "raw": f"nvmlEventTypeXidCriticalError eventData={code}",
        }
