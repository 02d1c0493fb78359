"""The simulated NVML looks like pynvml from the outside: same errors, same shapes."""

from __future__ import annotations

import pynvml
import pytest

from fleet_agent.simnvml import SimulatedGpu, SimulatedNvml


def test_errors_are_the_real_pynvml_classes():
    nvml = SimulatedNvml([SimulatedGpu.from_model("RTX-4090", 0)])
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nvml.nvmlDeviceGetCount()
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotSupported) as raised:
        nvml.nvmlDeviceGetTotalEccErrors(handle, 1, 0)
    assert type(raised.value) is pynvml.NVMLError_NotSupported
    assert raised.value.value == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert nvml.NVMLError is pynvml.NVMLError and nvml.NVMLError_GpuIsLost is pynvml.NVMLError_GpuIsLost


def test_no_driver_raises_library_not_found_from_init_like_pynvml():
    with pytest.raises(pynvml.NVMLError_LibraryNotFound):
        pynvml.nvmlInit()  # the real module, on this GPU-less machine
    with pytest.raises(pynvml.NVMLError_LibraryNotFound):
        SimulatedNvml([], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND).nvmlInit()


def test_return_shapes_match_pynvml():
    nvml = SimulatedNvml([SimulatedGpu.from_model("H100-SXM-80GB", 0)])
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    memory = nvml.nvmlDeviceGetMemoryInfo(handle)
    assert isinstance(memory, pynvml.c_nvmlMemory_t) and memory.total == memory.free + memory.used
    assert isinstance(nvml.nvmlDeviceGetUtilizationRates(handle), pynvml.c_nvmlUtilization_t)
    pci = nvml.nvmlDeviceGetPciInfo(handle)
    assert isinstance(pci, pynvml.nvmlPciInfo_t) and pci.busId == "00000000:18:00.0" and pci.bus == 0x18
    assert nvml.nvmlDeviceGetCudaComputeCapability(handle) == (9, 0)
    assert nvml.nvmlDeviceGetRemappedRows(handle) == (0, 0, 0, 0)
    assert nvml.nvmlSystemGetCudaDriverVersion_v2() == 12040
    assert nvml.NVML_TEMPERATURE_GPU == pynvml.NVML_TEMPERATURE_GPU


def test_nvlink_probing_ends_like_real_nvml():
    nvml = SimulatedNvml([SimulatedGpu.from_model("A100-SXM4-80GB", 0), SimulatedGpu.from_model("L4", 1)])
    nvml.nvmlInit()
    a100, l4 = nvml.nvmlDeviceGetHandleByIndex(0), nvml.nvmlDeviceGetHandleByIndex(1)
    assert nvml.nvmlDeviceGetNvLinkState(a100, 11) == 1
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlDeviceGetNvLinkState(a100, 12)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetNvLinkState(l4, 0)


def test_lost_gpu_raises_gpu_is_lost_on_every_device_call():
    nvml = SimulatedNvml([SimulatedGpu.from_model("H100-SXM-80GB", 0)])
    nvml.nvmlInit()
    nvml.gpus[0].lost = True
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    for call in (nvml.nvmlDeviceGetName, nvml.nvmlDeviceGetMemoryInfo, nvml.nvmlDeviceGetPciInfo):
        with pytest.raises(pynvml.NVMLError_GpuIsLost):
            call(handle)


def test_functions_are_never_forwarded_to_the_real_library():
    nvml = SimulatedNvml([])
    with pytest.raises(AttributeError):
        nvml.nvmlDeviceGetBAR1MemoryInfo  # noqa: B018 - attribute access is the test


def test_identities_are_stable_across_runs():
    first = SimulatedGpu.from_model("H100-SXM-80GB", 3, node_key="node-a")
    second = SimulatedGpu.from_model("H100-SXM-80GB", 3, node_key="node-a")
    other = SimulatedGpu.from_model("H100-SXM-80GB", 3, node_key="node-b")
    assert (first.uuid, first.serial) == (second.uuid, second.serial)
    assert first.uuid != other.uuid and first.uuid.startswith("GPU-")


def test_temperature_thresholds_mirror_pynvml():
    """pynvml.nvmlDeviceGetTemperatureThreshold(handle, NVML_TEMPERATURE_THRESHOLD_*) returns an int in °C;
    a threshold the board lacks raises NVMLError_NotSupported, a value outside the enum InvalidArgument."""
    nvml = SimulatedNvml([SimulatedGpu.from_model("H100-SXM-80GB", 0), SimulatedGpu.from_model("T4", 1)])
    nvml.nvmlInit()
    h100, t4 = nvml.nvmlDeviceGetHandleByIndex(0), nvml.nvmlDeviceGetHandleByIndex(1)
    slowdown = nvml.nvmlDeviceGetTemperatureThreshold(h100, pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN)
    assert type(slowdown) is int and slowdown == 89
    assert nvml.nvmlDeviceGetTemperatureThreshold(h100, pynvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN) == 92
    assert nvml.nvmlDeviceGetTemperatureThreshold(h100, pynvml.NVML_TEMPERATURE_THRESHOLD_GPU_MAX) == 87
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetTemperatureThreshold(t4, pynvml.NVML_TEMPERATURE_THRESHOLD_GPU_MAX)
    with pytest.raises(pynvml.NVMLError_NotSupported):  # a board with no such sensor at all
        nvml.nvmlDeviceGetTemperatureThreshold(h100, pynvml.NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MIN)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlDeviceGetTemperatureThreshold(h100, pynvml.NVML_TEMPERATURE_THRESHOLD_COUNT)
    # Same name and arity as the real binding (which would need libnvidia-ml to run).
    import inspect
    real = list(inspect.signature(pynvml.nvmlDeviceGetTemperatureThreshold).parameters)
    assert len(inspect.signature(nvml.nvmlDeviceGetTemperatureThreshold).parameters) == len(real) == 2
