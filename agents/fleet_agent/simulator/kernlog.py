"""Simulated kernel log: real-format NVRM lines appended to a file the real collector tails."""

from __future__ import annotations

from pathlib import Path

# What the driver prints after the code, for the Xids the scenarios use (from real logs).
_UNKNOWN = "pid=<unknown>, name=<unknown>, "
XID_MESSAGES = {
    13: "pid=2971, name=python, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): "
    "Illegal Instruction Encoding",
    31: "pid=2971, name=python, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS "
    "GPCCLIENT_T1_0 faulted @ 0x7f3a_4f000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
    43: "pid=2971, name=python, Ch 00000010",
    48: _UNKNOWN + "An uncorrectable double bit error (DBE) has been detected on GPU in the "
    "framebuffer at partition 1, subpartition 0.",
    63: _UNKNOWN
    + "Row Remapper: New row (0x00000000000123ab) was marked for remapping, reset gpu to activate.",
    64: _UNKNOWN + "Row Remapper: Failed to remap row (0x00000000000123ab)",
    74: _UNKNOWN + "NVLink: fatal error detected on link 5(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
    79: _UNKNOWN + "GPU has fallen off the bus.",
    94: "pid=2971, name=python, Contained: SM (0x1). RST: No, D-RST: No",
    95: _UNKNOWN + "Uncontained: FBHUB. RST: Yes, D-RST: No",
    119: _UNKNOWN + "Timeout after 6s of waiting for RPC response from GPU4 GSP! Expected "
    "function 76 (GSP_RM_CONTROL) (0x20802a02 0x8).",
}


def kernel_bdf(nvml_bus_id: str) -> str:
    """NVML's ``00000000:18:00.0`` → the driver's ``0000:18:00`` as printed in Xid lines."""
    domain, bus, device_function = nvml_bus_id.split(":")
    return f"{domain[-4:]}:{bus.lower()}:{device_function.split('.')[0]}"


class SimulatedKernelLog:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.touch()
        self.lines_written = 0

    def _append(self, uptime_s: float, message: str) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(f"[{uptime_s:12.6f}] {message}\n")
        self.lines_written += 1

    def xid(self, uptime_s: float, bus_id: str, code: int, message: str | None = None) -> None:
        detail = message or XID_MESSAGES.get(code, _UNKNOWN)
        self._append(uptime_s, f"NVRM: Xid (PCI:{kernel_bdf(bus_id)}): {code}, {detail}")

    def fallen_off_bus(self, uptime_s: float, bus_id: str) -> None:
        self._append(uptime_s, f"NVRM: GPU {bus_id[4:]}: GPU has fallen off the bus.")

    def noise(self, uptime_s: float, message: str) -> None:
        """Ordinary kernel chatter the collector must skip."""
        self._append(uptime_s, message)
