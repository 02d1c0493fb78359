"""The GPU's surroundings that NVML does not report: the PCI bus, NVSwitch fabric services, IMEX, InfiniBand.

* PCI (``/sys/bus/pci/devices/*``): NVIDIA devices (vendor ``0x10de``) of class VGA (``0x0300xx``) or 3D
  controller (``0x0302xx``) are GPUs, class ``0x0680xx`` NVSwitches. With NVML's own count this tells a GPU
  that fell out of the driver (on the bus, not in NVML) from one gone from the bus (hardware, slot, riser).
  The bound driver is reported too: a GPU bound to ``vfio-pci`` is passed through to a VM on purpose.
* Fabric manager and IMEX: whether the NVIDIA services that HGX / NVL systems need are installed, configured
  and running (their processes, found by ``comm`` under /proc), and how many IMEX channel devices exist.
* InfiniBand / RoCE (``/sys/class/infiniband/<dev>/ports/<n>/``): state, physical state, rate, link layer and
  the error counters, with their growth over the last ``window_s`` seconds (counters are cumulative: their
  growth is the fault, not their value).

The PCI scan and the process scan are read every ``slow_refresh_s`` (they change on reboots and service
restarts, and a process scan costs a file read per process); the ports every cycle. Unreadable files give
``None`` for their field; a missing tree (no /sys/class/infiniband: no RDMA stack) gives an empty list.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

from fleet_agent.counters import CounterWindow
from fleet_agent.logutil import WarnOnce

log = logging.getLogger(__name__)

NVIDIA_VENDOR = "0x10de"
GPU_CLASSES = ("0x0300", "0x0302")  # VGA compatible, 3D controller (class code without the prog-if byte)
NVSWITCH_CLASS = "0x0680"  # bridge, other
MAX_PCI_GPUS = 64
MAX_IB_PORTS = 64
IB_COUNTERS = ("symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors")
FABRIC_MANAGER_COMM = "nv-fabricmanager"
IMEX_COMM = "nvidia-imex"
FABRIC_MANAGER_FILES = (
    "usr/bin/nv-fabricmanager",
    "usr/lib/systemd/system/nvidia-fabricmanager.service",
    "lib/systemd/system/nvidia-fabricmanager.service",
)
IMEX_CONFIG = "etc/nvidia-imex/nodes_config.cfg"
IMEX_CHANNELS = "dev/nvidia-caps-imex-channels"
_RATE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*Gb/sec")
ERROR_WINDOW_S = 900.0
MAX_COUNTER = 2**53 - 1  # the report schema's bound on counters


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None


def _enum_name(text: str | None) -> str | None:
    """``4: ACTIVE`` → ``ACTIVE`` (the kernel prints the number and the name)."""
    if text is None:
        return None
    return text.split(":", 1)[-1].strip()[:32] or None


def _rate_gbps(text: str | None) -> float | None:
    match = _RATE.match(text or "")
    return float(match.group(1)) if match else None


def _counter(path: Path) -> int | None:
    text = _read(path)
    try:
        return min(int(text), MAX_COUNTER) if text is not None else None
    except ValueError:
        return None


class FabricCollector:
    def __init__(
        self,
        *,
        sys_root: str | Path = "/sys",
        host_root: str | Path = "/",
        proc_root: str | Path = "/proc",
        slow_refresh_s: float = 60.0,
        window_s: float = ERROR_WINDOW_S,
        monotonic: Callable[[], float] = time.monotonic,
    ):
        self.sys_root = Path(sys_root)
        self.host_root = Path(host_root)
        self.proc_root = Path(proc_root)
        self.slow_refresh_s = slow_refresh_s
        self._monotonic = monotonic
        self._window = CounterWindow(window_s)
        self._slow: tuple[float, dict] | None = None
        self._seen_active: set[tuple[str, str]] = set()  # ports this agent has seen ACTIVE since it started
        self._warn = WarnOnce(log)

    def collect(self) -> dict:
        now = self._monotonic()
        if self._slow is None or now - self._slow[0] >= self.slow_refresh_s:
            self._slow = (now, self._slow_facts())
        return {**self._slow[1], "infiniband": self._infiniband(now), "window_s": self._window.window_s}

    def refresh(self) -> None:
        """Read the slow facts again at the next collect (after a reboot or a fault the agent was told of)."""
        self._slow = None

    # -- slow: PCI and services -----------------------------------------------------------------

    def _slow_facts(self) -> dict:
        comms = self._process_names({FABRIC_MANAGER_COMM, IMEX_COMM})
        fm_installed = any((self.host_root / rel).exists() for rel in FABRIC_MANAGER_FILES)
        imex_config = self.host_root / IMEX_CONFIG
        channels_dir = self.host_root / IMEX_CHANNELS
        try:
            channels = sum(1 for entry in channels_dir.iterdir() if entry.name.startswith("channel"))
        except OSError:
            channels = 0
        return {
            "pci": self._pci(),
            "fabric_manager": {"installed": fm_installed, "running": FABRIC_MANAGER_COMM in comms}
            if comms is not None else None,
            "imex": {"configured": imex_config.is_file(), "running": IMEX_COMM in comms,
                     "channels": min(channels, 4096)} if comms is not None else None,
        }

    def _pci(self) -> dict | None:
        devices = self.sys_root / "bus/pci/devices"
        try:
            entries = sorted(os.scandir(devices), key=lambda e: e.name)
        except OSError as err:
            self._warn("pci", "cannot scan %s: %s (no PCI view of the GPUs)", devices, err)
            return None
        gpus, nvswitches = [], 0
        for entry in entries:
            path = Path(entry.path)
            if _read(path / "vendor") != NVIDIA_VENDOR:
                continue
            klass = _read(path / "class") or ""
            if klass.startswith(NVSWITCH_CLASS):
                nvswitches += 1
            elif klass.startswith(GPU_CLASSES) and len(gpus) < MAX_PCI_GPUS:
                try:
                    driver = os.path.basename(os.readlink(path / "driver"))[:64]
                except OSError:
                    driver = None  # no driver bound (nvidia failed to probe it, or none loaded)
                gpus.append({"bus_id": entry.name[:32], "device_id": (_read(path / "device") or "")[:16] or None,
                             "driver": driver})
        return {"gpus": gpus, "nvswitches": nvswitches}

    def _process_names(self, wanted: set[str]) -> set[str] | None:
        """Which of ``wanted`` run now (by /proc/<pid>/comm); None when /proc cannot be listed."""
        found: set[str] = set()
        try:
            entries = os.scandir(self.proc_root)
        except OSError as err:
            self._warn("proc", "cannot list %s: %s (fabric manager / IMEX state unknown)", self.proc_root, err)
            return None
        with entries:
            for entry in entries:
                if not entry.name.isdigit():
                    continue
                try:
                    with open(os.path.join(entry.path, "comm"), "rb") as handle:
                        comm = handle.read(64).decode("ascii", "replace").strip()
                except OSError:
                    continue  # the process exited meanwhile
                if comm in wanted:
                    found.add(comm)
                    if found == wanted:
                        break
        return found

    # -- every cycle: InfiniBand / RoCE ports -----------------------------------------------------

    def _infiniband(self, now: float) -> list[dict]:
        root = self.sys_root / "class/infiniband"
        try:
            devices = sorted(os.listdir(root))
        except OSError:
            return []
        ports, seen = [], set()
        for device in devices:
            try:
                numbers = sorted(os.listdir(root / device / "ports"), key=lambda n: int(n) if n.isdigit() else 0)
            except OSError:
                continue
            for number in numbers:
                if len(ports) >= MAX_IB_PORTS or not number.isdigit():
                    break
                path = root / device / "ports" / number
                rate = _read(path / "rate")
                port = {
                    "device": device[:64],
                    "port": int(number),
                    "link_layer": (_read(path / "link_layer") or "")[:32] or None,
                    "state": _enum_name(_read(path / "state")),
                    "phys_state": _enum_name(_read(path / "phys_state")),
                    "rate": rate[:64] if rate else None,
                    "rate_gbps": _rate_gbps(rate),
                    "counters": {},
                    "recent": {},
                }
                for name in IB_COUNTERS:
                    value = _counter(path / "counters" / name)
                    key = (device, number, name)
                    seen.add(key)
                    port["counters"][name] = value
                    port["recent"][name] = self._window.update(key, value, now)
                if port["state"] == "ACTIVE":
                    self._seen_active.add((device, number))
                port["was_active"] = (device, number) in self._seen_active
                ports.append(port)
        self._window.forget(seen)
        return ports
