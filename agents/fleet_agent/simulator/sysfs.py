"""A simulated /sys (PCI devices, InfiniBand ports) and the host files and processes of the NVIDIA fabric services,
in the kernel's formats, so the real ``FabricCollector`` reads them.

What is on the bus follows the simulated GPUs (``SimulatedGpu.on_bus``); NVSwitches, InfiniBand ports and the
fabric manager / IMEX daemons are set per node. ``write()`` renders everything; counters only grow.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from fleet_agent.simnvml import SimulatedGpu

_PHYS = {"LinkUp": 5, "Polling": 2, "Disabled": 3, "LinkErrorRecovery": 6}
_STATE = {"ACTIVE": 4, "DOWN": 1, "INIT": 2, "ARMED": 3}
_RATE_NAMES = {400: "4X NDR", 200: "4X HDR", 100: "4X EDR", 50: "2X HDR", 25: "1X EDR"}
# Other devices of a GPU server that a scan walks past: a host bridge, an Intel NIC, an NVMe drive.
_OTHER_DEVICES = (("0000:00:00.0", "0x8086", "0x060000"), ("0000:02:00.0", "0x8086", "0x020000"),
                  ("0000:03:00.0", "0x144d", "0x010802"))


@dataclass
class SimulatedPort:
    device: str
    port: int = 1
    link_layer: str = "InfiniBand"
    state: str = "ACTIVE"
    phys_state: str = "LinkUp"
    rate_gbps: int = 400
    counters: dict[str, int] = field(default_factory=lambda: {
        "symbol_error": 0, "link_downed": 0, "link_error_recovery": 0, "port_rcv_errors": 0})


class SimulatedSys:
    def __init__(self, root: Path, host_root: Path, proc_root: Path, gpus: list[SimulatedGpu], *,
                 nvswitches: int = 0, ib_ports: int = 0, ib_rate_gbps: int = 400, imex: bool = False):
        self.root = Path(root)
        self.host_root = Path(host_root)
        self.proc_root = Path(proc_root)
        self.gpus = gpus
        self.nvswitches = nvswitches
        self.ports = [SimulatedPort(device=f"mlx5_{i}", rate_gbps=ib_rate_gbps) for i in range(ib_ports)]
        self.fabric_manager_installed = nvswitches > 0
        self.fabric_manager_running = nvswitches > 0
        self.imex_configured = imex
        self.imex_running = imex
        self.imex_channels = 1 if imex else 0

    def write(self) -> None:
        self._write_pci()
        self._write_ports()
        self._write_services()

    # -- PCI ------------------------------------------------------------------------------------

    def _write_pci(self) -> None:
        devices = self.root / "bus/pci/devices"
        drivers = self.root / "bus/pci/drivers/nvidia"
        if devices.exists():
            shutil.rmtree(devices)
        devices.mkdir(parents=True)
        drivers.mkdir(parents=True, exist_ok=True)
        for address, vendor, klass in _OTHER_DEVICES:
            self._device(devices / address, vendor, klass, "0x0001", None)
        for gpu in self.gpus:
            if gpu.on_bus:
                # NVML's bus id has an 8-digit domain; sysfs names the device with 4.
                self._device(devices / gpu.bus_id[4:].lower(), "0x10de", "0x030200", "0x2330", drivers)
        for i in range(self.nvswitches):
            self._device(devices / f"0000:{0x05 + i:02x}:00.0", "0x10de", "0x068000", "0x22a3", drivers)

    @staticmethod
    def _device(path: Path, vendor: str, klass: str, device: str, driver: Path | None) -> None:
        path.mkdir()
        (path / "vendor").write_text(vendor + "\n")
        (path / "class").write_text(klass + "\n")
        (path / "device").write_text(device + "\n")
        if driver is not None:
            (path / "driver").symlink_to(driver)

    # -- InfiniBand -----------------------------------------------------------------------------

    def _write_ports(self) -> None:
        for port in self.ports:
            path = self.root / "class/infiniband" / port.device / "ports" / str(port.port)
            (path / "counters").mkdir(parents=True, exist_ok=True)
            (path / "state").write_text(f"{_STATE[port.state]}: {port.state}\n")
            (path / "phys_state").write_text(f"{_PHYS[port.phys_state]}: {port.phys_state}\n")
            name = _RATE_NAMES.get(port.rate_gbps, "4X")
            (path / "rate").write_text(f"{port.rate_gbps} Gb/sec ({name})\n")
            (path / "link_layer").write_text(port.link_layer + "\n")
            for counter, value in port.counters.items():
                (path / "counters" / counter).write_text(f"{value}\n")

    # -- fabric manager, IMEX -------------------------------------------------------------------

    def _write_services(self) -> None:
        binary = self.host_root / "usr/bin/nv-fabricmanager"
        if self.fabric_manager_installed:
            binary.parent.mkdir(parents=True, exist_ok=True)
            binary.write_text("#!/bin/sh\n")
        elif binary.exists():
            binary.unlink()
        config = self.host_root / "etc/nvidia-imex/nodes_config.cfg"
        if self.imex_configured:
            config.parent.mkdir(parents=True, exist_ok=True)
            config.write_text("10.0.0.1\n10.0.0.2\n")
        elif config.exists():
            config.unlink()
        channels = self.host_root / "dev/nvidia-caps-imex-channels"
        if channels.exists():
            shutil.rmtree(channels)
        if self.imex_channels:
            channels.mkdir(parents=True)
            for i in range(self.imex_channels):
                (channels / f"channel{i}").write_text("")
        self._process(2001, "nv-fabricmanager", self.fabric_manager_running)
        self._process(2002, "nvidia-imex", self.imex_running)

    def _process(self, pid: int, comm: str, running: bool) -> None:
        path = self.proc_root / str(pid)
        if running:
            path.mkdir(parents=True, exist_ok=True)
            (path / "comm").write_text(comm + "\n")
        elif path.exists():
            shutil.rmtree(path)
