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
