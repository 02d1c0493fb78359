"""The fabric collector on hand-written /sys, /proc and host trees in the kernel's formats, the counter window, and
the NVML adapter's GPU configuration, NVLink counters and fabric registration on the simulated pynvml."""

import ctypes
import os

import pynvml
import pytest

from fleet_agent.collectors.fabric import FabricCollector
from fleet_agent.counters import CounterWindow
from fleet_agent.nvml import NvmlAdapter
from fleet_agent.simnvml import SimulatedGpu, SimulatedNvml


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _pci(sys_root, address, vendor, klass, driver=None):
    device = sys_root / "bus/pci/devices" / address
    _write(device / "vendor", f"{vendor}\n")
    _write(device / "class", f"{klass}\n")
    _write(device / "device", "0x2330\n")
    if driver:
        target = sys_root / "bus/pci/drivers" / driver
        target.mkdir(parents=True, exist_ok=True)
        os.symlink(target, device / "driver")


def _port(sys_root, device, port, *, state="4: ACTIVE", phys="5: LinkUp", rate="400 Gb/sec (4X NDR)",
          layer="InfiniBand", symbol=0, downed=0):
    path = sys_root / "class/infiniband" / device / "ports" / str(port)
    _write(path / "state", f"{state}\n")
    _write(path / "phys_state", f"{phys}\n")
    _write(path / "rate", f"{rate}\n")
    _write(path / "link_layer", f"{layer}\n")
    for name, value in (("symbol_error", symbol), ("link_downed", downed), ("link_error_recovery", 0),
                        ("port_rcv_errors", 0)):
        _write(path / "counters" / name, f"{value}\n")


@pytest.fixture
def node(tmp_path):
    sys_root, host, proc = tmp_path / "sys", tmp_path / "host", tmp_path / "proc"
    _pci(sys_root, "0000:00:00.0", "0x8086", "0x060000")  # host bridge
    _pci(sys_root, "0000:18:00.0", "0x10de", "0x030200", "nvidia")  # 3D controller (data-center GPU)
    _pci(sys_root, "0000:2a:00.0", "0x10de", "0x030000", "nvidia")  # VGA (workstation GPU)
    _pci(sys_root, "0000:3b:00.0", "0x10de", "0x030200")  # no driver bound
    _pci(sys_root, "0000:4c:00.0", "0x10de", "0x030200", "vfio-pci")  # passed through
    _pci(sys_root, "0000:05:00.0", "0x10de", "0x068000", "nvidia")  # NVSwitch
    _pci(sys_root, "0000:5d:00.1", "0x10de", "0x040300", "snd_hda_intel")  # the GPU's HDMI audio function
    _port(sys_root, "mlx5_0", 1)
    _port(sys_root, "mlx5_1", 1, state="1: DOWN", phys="2: Polling")
    _port(sys_root, "mlx5_2", 1, rate="100 Gb/sec (4X EDR)", layer="Ethernet")
    _write(host / "usr/bin/nv-fabricmanager", "")
    _write(proc / "1" / "comm", "systemd\n")
    _write(proc / "2345" / "comm", "nv-fabricmanager\n")
    _write(proc / "self" / "comm", "pytest\n")
    clock = [0.0]
    collector = FabricCollector(sys_root=sys_root, host_root=host, proc_root=proc, monotonic=lambda: clock[0])
    return collector, sys_root, host, proc, clock


def test_pci_view_counts_nvidia_gpus_and_nvswitches_with_their_driver(node):
    collector, *_ = node
    pci = collector.collect()["pci"]
    assert pci["nvswitches"] == 1
    assert pci["gpus"] == [
        {"bus_id": "0000:18:00.0", "device_id": "0x2330", "driver": "nvidia"},
        {"bus_id": "0000:2a:00.0", "device_id": "0x2330", "driver": "nvidia"},
        {"bus_id": "0000:3b:00.0", "device_id": "0x2330", "driver": None},
        {"bus_id": "0000:4c:00.0", "device_id": "0x2330", "driver": "vfio-pci"},
    ]


def test_services_from_processes_and_host_files(node):
    collector, sys_root, host, proc, clock = node
    facts = collector.collect()
    assert facts["fabric_manager"] == {"installed": True, "running": True}
    assert facts["imex"] == {"configured": False, "running": False, "channels": 0}

    _write(host / "etc/nvidia-imex/nodes_config.cfg", "10.0.0.1\n")
    (proc / "2345" / "comm").unlink()
    (proc / "2345").rmdir()
    _write(proc / "2400" / "comm", "nvidia-imex\n")
    _write(host / "dev/nvidia-caps-imex-channels/channel0", "")
    assert collector.collect()["fabric_manager"]["running"], "the slow facts are read every 60 s, not every cycle"
    clock[0] = 60.0
    facts = collector.collect()
    assert facts["fabric_manager"] == {"installed": True, "running": False}
    assert facts["imex"] == {"configured": True, "running": True, "channels": 1}


def test_ib_ports_in_kernel_format_with_growth_over_the_window(node):
    collector, sys_root, *_, clock = node
    ports = {f"{p['device']}/{p['port']}": p for p in collector.collect()["infiniband"]}
    assert ports["mlx5_0/1"]["state"] == "ACTIVE" and ports["mlx5_0/1"]["phys_state"] == "LinkUp"
    assert ports["mlx5_0/1"]["rate_gbps"] == 400.0 and ports["mlx5_0/1"]["was_active"]
    assert ports["mlx5_1/1"]["state"] == "DOWN" and not ports["mlx5_1/1"]["was_active"]
    assert ports["mlx5_2/1"]["link_layer"] == "Ethernet" and ports["mlx5_2/1"]["rate_gbps"] == 100.0
    assert ports["mlx5_0/1"]["recent"]["symbol_error"] == 0  # one sample: no growth yet

    clock[0] = 15.0
    _port(sys_root, "mlx5_0", 1, state="1: DOWN", phys="2: Polling", symbol=40, downed=1)
    port = collector.collect()["infiniband"][0]
    assert port["recent"]["symbol_error"] == 40 and port["recent"]["link_downed"] == 1
    assert port["was_active"], "a port that was up and went down is told apart from one never up"
    clock[0] = 15.0 + 901
    assert collector.collect()["infiniband"][0]["recent"]["symbol_error"] == 0


def test_missing_trees_are_empty_or_unknown(tmp_path):
    collector = FabricCollector(sys_root=tmp_path / "nosys", host_root=tmp_path, proc_root=tmp_path / "noproc")
    facts = collector.collect()
    assert facts["pci"] is None and facts["fabric_manager"] is None and facts["imex"] is None
    assert facts["infiniband"] == []


def test_counter_window_growth_and_reset():
    window = CounterWindow(900)
    assert window.update("c", 100, 0) == 0
    assert window.update("c", 150, 60) == 50
    assert window.update("c", 150, 1000) == 0  # no growth in the last 900 s
    assert window.update("c", 5, 1010) == 0  # reset (driver reload): history restarts
    assert window.update("c", 25, 1020) == 20
    assert window.update("c", None, 1030) is None


# -- NVML ---------------------------------------------------------------------------------------------------------


def _adapter(model="H100-SXM-80GB", count=2, **kwargs):
    gpus = [SimulatedGpu.from_model(model, i, **kwargs) for i in range(count)]
    clock = [0.0]
    adapter = NvmlAdapter(SimulatedNvml(gpus), monotonic=lambda: clock[0])
    return adapter, gpus, clock


def test_gpu_configuration_fields_on_a_data_center_gpu():
    adapter, gpus, _ = _adapter()
    gpus[1].persistence, gpus[1].ecc_mode, gpus[1].mig_mode = 0, (1, 0), (0, 1)
    first, second = adapter.sample().gpus
    assert first["persistence_mode"] is True and second["persistence_mode"] is False
    assert second["ecc_mode"] == {"current": True, "pending": False}
    assert second["mig_mode"] == {"current": False, "pending": True}
    assert first["gsp_firmware_version"] == "550.54.15"
    assert first["fabric"]["state"] == "completed" and first["fabric"]["status"] == 0
    assert first["nvlink_errors"] == []


@pytest.mark.parametrize(("model", "vgpu", "none"), [
    ("RTX-4090", False, {"ecc_mode", "mig_mode", "gsp_firmware_version", "fabric", "nvlink_errors"}),
    ("A100-SXM4-80GB", False, {"fabric"}),  # Ampere: no fabric info API (the fabric manager's PCI view tells)
    ("L4", False, {"mig_mode", "fabric", "nvlink_errors"}),
    ("H100-SXM-80GB", True, {"mig_mode", "fabric", "nvlink_errors"}),  # a vGPU guest
])
def test_not_supported_is_null_never_a_fault(model, vgpu, none):
    adapter, *_ = _adapter(model, vgpu=vgpu)
    gpu = adapter.sample().gpus[0]
    fields = ("persistence_mode", "ecc_mode", "mig_mode", "gsp_firmware_version", "fabric", "nvlink_errors")
    assert {f for f in fields if gpu[f] is None} == none


def test_nvlink_error_growth_read_at_the_slow_cadence():
    adapter, gpus, clock = _adapter()
    gpus[0].nvlink_errors[(4, pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT)] = 10
    assert adapter.sample().gpus[0]["nvlink_errors"] == [
        {"link": 4, "replay": 0, "recovery": 0, "crc_flit": 10, "crc_data": 0,
         "recent": {"replay": 0, "recovery": 0, "crc_flit": 0, "crc_data": 0}}]
    gpus[0].nvlink_errors[(4, pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT)] = 300
    clock[0] = 30.0
    assert adapter.sample().gpus[0]["nvlink_errors"][0]["crc_flit"] == 10, "cached until 60 s have passed"
    clock[0] = 61.0
    entry = adapter.sample().gpus[0]["nvlink_errors"][0]
    assert (entry["crc_flit"], entry["recent"]["crc_flit"]) == (300, 290)


def test_fabric_info_falls_back_to_the_older_call_and_reports_not_started():
    gpus = [SimulatedGpu.from_model("H100-SXM-80GB", 0)]
    gpus[0].fabric_state = pynvml.NVML_GPU_FABRIC_STATE_NOT_STARTED
    adapter = NvmlAdapter(SimulatedNvml(gpus, missing_functions={"nvmlDeviceGetGpuFabricInfoV"}))
    fabric = adapter.sample().gpus[0]["fabric"]
    assert fabric == {"state": "not_started", "status": 0, "clique_id": 0, "cluster_uuid": None,
                      "health_mask": None}


def test_simulated_fabric_info_fills_the_real_struct_through_a_pointer_like_pynvml():
    nvml = SimulatedNvml([SimulatedGpu.from_model("H200", 0)])
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    info = pynvml.c_nvmlGpuFabricInfoV_t()
    assert nvml.nvmlDeviceGetGpuFabricInfoV(handle, ctypes.pointer(info)) == pynvml.NVML_SUCCESS
    assert info.state == pynvml.NVML_GPU_FABRIC_STATE_COMPLETED and any(info.clusterUuid)
    wrong = pynvml.c_nvmlGpuFabricInfoV_t()
    wrong.version = 1
    with pytest.raises(pynvml.NVMLError_ArgumentVersionMismatch):
        nvml.nvmlDeviceGetGpuFabricInfoV(handle, ctypes.pointer(wrong))
    assert nvml.nvmlDeviceGetGspFirmwareVersion(handle) == b"550.54.15"  # pynvml returns the buffer's bytes
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlDeviceGetNvLinkErrorCounter(handle, 18, pynvml.NVML_NVLINK_ERROR_DL_REPLAY)
    l4 = SimulatedNvml([SimulatedGpu.from_model("L4", 0)])
    l4.nvmlInit()
    with pytest.raises(pynvml.NVMLError_NotSupported):
        l4.nvmlDeviceGetMigMode(l4.nvmlDeviceGetHandleByIndex(0))


def test_a_counter_past_the_schemas_bound_is_clamped_not_a_refused_report(tmp_path):
    adapter, gpus, _ = _adapter()
    gpus[0].nvlink_errors[(0, pynvml.NVML_NVLINK_ERROR_DL_REPLAY)] = 2**64 - 1
    assert adapter.sample().gpus[0]["nvlink_errors"][0]["replay"] == 2**53 - 1
    _port(tmp_path, "mlx5_0", 1, symbol=2**64 - 1)
    port = FabricCollector(sys_root=tmp_path, host_root=tmp_path, proc_root=tmp_path).collect()["infiniband"][0]
    assert port["counters"]["symbol_error"] == 2**53 - 1
