"""The NVML adapter, on the simulated NVML and (for the no-GPU path) on the real pynvml."""

from __future__ import annotations

import logging

import pynvml
import pytest

from fleet_agent.nvml import NvmlAdapter, decode_clock_event_reasons, decode_cuda_driver_version
from fleet_agent.simnvml import SimulatedGpu, SimulatedNvml, SimulatedProcess


def test_every_protocol_field_is_read_from_a_healthy_gpu(sim_nvml):
    gpu = sim_nvml.gpus[0]
    gpu.memory_used, gpu.util_gpu, gpu.util_memory = 2**30, 97, 40
    gpu.temperature, gpu.power_mw, gpu.sm_clock, gpu.clock_reasons = 61, 512_345, 1980, 0x4
    gpu.processes = [SimulatedProcess(pid=1234, used_memory_bytes=1048576, name="python")]
    gpu.remapped = (2, 0, 0, 0)

    sample = NvmlAdapter(sim_nvml, expected_gpu_count=8).sample()

    assert sample.visibility == {
        "nvml": "ok",
        "message": None,
        "gpu_count": 8,
        "expected_gpu_count": 8,
        "lost_gpus": [],
    }
    assert (sample.driver_version, sample.cuda_driver_version) == ("550.54.15", "12.4")
    first = sample.gpus[0]
    assert first["uuid"] == gpu.uuid and first["name"] == "NVIDIA H100 80GB HBM3"
    assert first["pci_bus_id"] == "00000000:18:00.0" and first["serial"] == gpu.serial
    assert first["memory_total_bytes"] == 81559 * 2**20 and first["memory_used_bytes"] == 2**30
    assert (first["utilization_gpu_pct"], first["utilization_memory_pct"]) == (97, 40)
    assert first["temperature_c"] == 61
    assert first["power_draw_w"] == 512.3 and first["power_limit_w"] == 700.0  # mW → W
    assert first["sm_clock_mhz"] == 1980
    assert first["clock_event_reasons_mask"] == 4 and first["clock_event_reasons"] == ["SwPowerCap"]
    assert first["ecc"] == {
        "volatile_corrected": 0,
        "volatile_uncorrected": 0,
        "aggregate_corrected": 0,
        "aggregate_uncorrected": 0,
    }
    assert first["retired_pages"] is None  # Hopper retires rows, not pages
    assert first["remapped_rows"] == {
        "correctable": 2,
        "uncorrectable": 0,
        "pending": False,
        "failure": False,
    }
    assert first["pcie"] == {"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16}
    assert first["compute_capability"] == "9.0"
    assert first["processes"] == [{"pid": 1234, "used_memory_bytes": 1048576, "name": "python"}]
    assert first["nvlink"] == [1] * 18
    assert [g["index"] for g in sample.gpus] == list(range(8))


def test_consumer_board_reports_unsupported_fields_as_null():
    nvml = SimulatedNvml([SimulatedGpu.from_model("RTX-4090", 0)])
    gpu = NvmlAdapter(nvml).sample().gpus[0]
    assert gpu["ecc"] is None and gpu["serial"] is None
    assert gpu["remapped_rows"] is None and gpu["retired_pages"] is None and gpu["nvlink"] is None
    # ...and everything it does support is still there
    assert gpu["memory_total_bytes"] == 24564 * 2**20 and gpu["compute_capability"] == "8.9"
    assert gpu["pcie"]["gen_max"] == 4


def test_pre_ampere_board_reports_retired_pages():
    gpu = SimulatedGpu.from_model("T4", 0)
    gpu.retired_pages = {0: [0x1000, 0x2000], 1: [0x3000]}
    gpu.retired_pending = True
    sample = NvmlAdapter(SimulatedNvml([gpu])).sample()
    assert sample.gpus[0]["retired_pages"] == {"count": 3, "pending": True}
    assert sample.gpus[0]["remapped_rows"] is None


def test_vgpu_guest_fields_owned_by_the_hypervisor_are_null():
    nvml = SimulatedNvml([SimulatedGpu.from_model("A10G", 0, vgpu=True)])
    gpu = NvmlAdapter(nvml).sample().gpus[0]
    assert gpu["power_draw_w"] is None and gpu["power_limit_w"] is None and gpu["pcie"] is None
    assert gpu["utilization_gpu_pct"] is not None


def test_one_field_failing_with_an_unexpected_error_loses_only_that_field(sim_nvml, monkeypatch, caplog):
    def flaky_temperature(handle, sensor):
        raise pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)

    monkeypatch.setattr(sim_nvml, "nvmlDeviceGetTemperature", flaky_temperature)
    adapter = NvmlAdapter(sim_nvml)
    with caplog.at_level(logging.WARNING, logger="fleet_agent.nvml"):
        first, second = adapter.sample(), adapter.sample()
    assert all(g["temperature_c"] is None for g in first.gpus)
    assert all(g["memory_total_bytes"] is not None for g in first.gpus)
    assert second.visibility["nvml"] == "ok"
    assert len([r for r in caplog.records if "nvmlDeviceGetTemperature" in r.getMessage()]) == 1  # once


def test_no_permission_on_a_field_is_null(sim_nvml, monkeypatch):
    def denied(handle):
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NO_PERMISSION)

    monkeypatch.setattr(sim_nvml, "nvmlDeviceGetComputeRunningProcesses", denied)
    gpu = NvmlAdapter(sim_nvml).sample().gpus[0]
    assert gpu["processes"] is None and gpu["utilization_gpu_pct"] is not None


def test_old_driver_without_clocks_event_reasons_falls_back_to_throttle_reasons(sim_nvml):
    sim_nvml.missing_functions = {
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlSystemGetCudaDriverVersion_v2",
    }
    sim_nvml.gpus[0].clock_reasons = 0x20 | 0x40
    sample = NvmlAdapter(sim_nvml).sample()
    assert sample.gpus[0]["clock_event_reasons"] == ["SwThermalSlowdown", "HwThermalSlowdown"]
    assert sample.cuda_driver_version == "12.4"  # from the unversioned call


def test_lost_gpu_becomes_a_lost_entry_and_one_event(sim_nvml):
    adapter = NvmlAdapter(sim_nvml, expected_gpu_count=8)
    adapter.sample()  # learns the GPU's identity while it is healthy
    sim_nvml.gpus[5].lost = True

    lost = adapter.sample()
    again = adapter.sample()

    entry = lost.gpus[5]
    assert entry["lost"] is True and entry["uuid"] == sim_nvml.gpus[5].uuid
    assert entry["pci_bus_id"] == "00000000:68:00.0" and entry["utilization_gpu_pct"] is None
    assert (
        lost.visibility["lost_gpus"] == ["00000000:68:00.0"]
        and "fallen off the bus" in lost.visibility["message"]
    )
    assert [e["kind"] for e in lost.events] == ["gpu_lost"] and lost.events[0]["severity"] == "critical"
    assert lost.events[0]["gpu_uuid"] == sim_nvml.gpus[5].uuid
    assert again.events == []  # reported once, not every cycle
    assert sum(not g["lost"] for g in lost.gpus) == 7


def test_gpu_lost_before_the_first_sample_still_yields_an_entry(sim_nvml):
    sim_nvml.gpus[2].lost = True
    sample = NvmlAdapter(sim_nvml).sample()
    assert sample.gpus[2]["lost"] is True and sample.gpus[2]["uuid"] is None
    assert sample.visibility["lost_gpus"] == ["index 2"]


def test_fewer_gpus_than_expected_is_explained(sim_nvml):
    sim_nvml.gpus[7].enumerated = False
    visibility = NvmlAdapter(sim_nvml, expected_gpu_count=8).sample().visibility
    assert visibility["nvml"] == "ok" and visibility["gpu_count"] == 7
    assert "7 GPU(s) but 8 are expected" in visibility["message"]


@pytest.mark.parametrize(
    ("code", "status", "hint"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "library_not_found", "libnvidia-ml.so.1"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "driver_not_loaded", "lsmod"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "no_permission", "/dev/nvidia"),
        (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "error", "reboot"),
        (pynvml.NVML_ERROR_UNKNOWN, "error", "nvmlInit failed"),
    ],
)
def test_nvml_init_failures_become_a_visibility_status(code, status, hint):
    adapter = NvmlAdapter(SimulatedNvml([], init_error=code), expected_gpu_count=8)
    sample = adapter.sample()
    assert sample.visibility["nvml"] == status and hint in sample.visibility["message"]
    assert sample.gpus == [] and sample.visibility["gpu_count"] is None
    assert sample.visibility["expected_gpu_count"] == 8


def test_init_is_retried_until_it_works_and_then_done_once():
    nvml = SimulatedNvml([SimulatedGpu.from_model("L4", 0)], init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    adapter = NvmlAdapter(nvml)
    assert adapter.sample().visibility["nvml"] == "driver_not_loaded"
    nvml.init_error = None  # modprobe nvidia
    assert adapter.sample().visibility["nvml"] == "ok"
    adapter.sample()
    assert nvml.init_count == 1
    adapter.shutdown()
    assert nvml.init_count == 0


def test_real_pynvml_on_a_machine_without_gpu_reports_library_not_found():
    sample = NvmlAdapter(expected_gpu_count=8).sample()  # default: the real pynvml module
    assert sample.visibility["nvml"] == "library_not_found"
    assert "libnvidia-ml.so.1" in sample.visibility["message"]
    assert sample.gpus == [] and sample.driver_version is None


def test_simulator_and_real_pynvml_agree_on_the_no_driver_path():
    real = NvmlAdapter().sample().visibility
    simulated = (
        NvmlAdapter(SimulatedNvml([], init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)).sample().visibility
    )
    assert real == simulated


def test_decoders():
    assert decode_cuda_driver_version(12040) == "12.4"
    assert decode_cuda_driver_version(11080) == "11.8"
    assert decode_cuda_driver_version(0) is None
    assert decode_clock_event_reasons(0x1 | 0x80 | 0x100) == [
        "GpuIdle",
        "HwPowerBrakeSlowdown",
        "DisplayClockSetting",
    ]
    assert decode_clock_event_reasons(None) is None


def test_temperature_thresholds_are_read_once_per_driver_load(sim_nvml, monkeypatch):
    calls = []
    real = sim_nvml.nvmlDeviceGetTemperatureThreshold
    monkeypatch.setattr(sim_nvml, "nvmlDeviceGetTemperatureThreshold",
                        lambda handle, threshold: calls.append(threshold) or real(handle, threshold), raising=False)
    adapter = NvmlAdapter(sim_nvml)
    first = adapter.sample().gpus[0]
    assert first["temperature_thresholds"] == {"shutdown_c": 92, "slowdown_c": 89, "gpu_max_c": 87}
    per_sample = len(calls)
    assert per_sample == 3 * 8
    adapter.sample()
    assert len(calls) == per_sample  # cached with the identity, not read every sample
    adapter.forget_static()
    adapter.sample()
    assert len(calls) == 2 * per_sample


def test_missing_temperature_thresholds_are_null():
    t4 = SimulatedNvml([SimulatedGpu.from_model("T4", 0)])
    assert NvmlAdapter(t4).sample().gpus[0]["temperature_thresholds"] == {
        "shutdown_c": 96, "slowdown_c": 93, "gpu_max_c": None}
    gpu = SimulatedGpu.from_model("H100-SXM-80GB", 0)
    gpu.temperature_thresholds = {}  # a board (or vGPU guest) that answers NotSupported for every threshold
    assert NvmlAdapter(SimulatedNvml([gpu])).sample().gpus[0]["temperature_thresholds"] is None
    old = SimulatedNvml([SimulatedGpu.from_model("H100-SXM-80GB", 0)],
                        missing_functions={"nvmlDeviceGetTemperatureThreshold"})  # FunctionNotFound
    assert NvmlAdapter(old).sample().gpus[0]["temperature_thresholds"] is None
