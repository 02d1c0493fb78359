"""A simulated /proc tree in real kernel formats, so the real ``SystemCollector`` parses it.

Counters are cumulative like the kernel's: each ``advance(dt, load)`` adds what ``load`` would have
produced over ``dt`` seconds, and ``write()`` renders the files.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

USER_HZ = 100
DISKS = ("nvme0n1", "nvme1n1")


@dataclass
class Load:
    """What the node is doing right now, in the units operators think in."""

    cpu_busy_pct: float = 35.0
    steal_pct: float = 0.0
    iowait_pct: float = 0.5
    mem_available_pct: float = 60.0
    disk_read_bytes_per_s: float = 150e6
    disk_write_bytes_per_s: float = 40e6
    disk_await_ms: float = 0.3
    disk_util_pct: float = 12.0
    tcp_out_segs_per_s: float = 20000.0
    tcp_retrans_pct: float = 0.02
    psi_cpu_some: float = 0.5
    psi_io_some: float = 0.2
    psi_memory_some: float = 0.0


class SimulatedProc:
    def __init__(
        self,
        root: Path,
        *,
        cpu_count: int,
        mem_total_bytes: int,
        kernel: str,
        cpu_model: str,
        boot_epoch: float,
        rng: random.Random,
    ):
        self.root = Path(root)
        self.cpu_count = cpu_count
        self.mem_total = mem_total_bytes
        self.kernel = kernel
        self.boot_epoch = boot_epoch
        self.uptime = 3600.0 * 24 * 3  # the node has been up a few days
        self._rng = rng
        # user nice system idle iowait irq softirq steal guest guest_nice (USER_HZ ticks)
        self.cpu = [
            int(self.uptime * USER_HZ * cpu_count * share)
            for share in (0.30, 0.0, 0.05, 0.64, 0.005, 0.0, 0.005, 0.0)
        ] + [0, 0]
        self.disks = {name: [0] * 17 for name in DISKS}
        self.tcp = {"OutSegs": 10_000_000, "RetransSegs": 2_000, "InSegs": 9_000_000}
        self.load = Load()
        self._load_avg = [1.0, 1.0, 1.0]
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "sys/kernel").mkdir(parents=True, exist_ok=True)
        (self.root / "net").mkdir(exist_ok=True)
        (self.root / "pressure").mkdir(exist_ok=True)
        (self.root / "sys/kernel/osrelease").write_text(kernel + "\n")
        (self.root / "sys/kernel/random").mkdir(parents=True, exist_ok=True)
        (self.root / "sys/kernel/random/boot_id").write_text(f"{rng.getrandbits(128):032x}\n")
        (self.root / "cpuinfo").write_text(
            "".join(
                f"processor\t: {i}\nvendor_id\t: GenuineIntel\nmodel name\t: {cpu_model}\n\n"
                for i in range(min(cpu_count, 4))
            )
        )

    def advance(self, dt: float, load: Load) -> None:
        self.load = load
        if dt <= 0:
            return
        self.uptime += dt
        ticks = dt * USER_HZ * self.cpu_count
        jitter = 1.0 + self._rng.uniform(-0.03, 0.03)
        busy = min(100.0, load.cpu_busy_pct * jitter)
        steal = min(100.0 - busy, load.steal_pct)
        iowait = min(100.0 - busy - steal, load.iowait_pct)
        idle = max(0.0, 100.0 - busy - steal - iowait)
        for position, pct in (
            (0, busy * 0.85),
            (2, busy * 0.12),
            (6, busy * 0.03),
            (3, idle),
            (4, iowait),
            (7, steal),
        ):
            self.cpu[position] += int(ticks * pct / 100.0)
        for counters in self.disks.values():
            reads = max(1, int(load.disk_read_bytes_per_s * dt / 131072))  # 128 KiB requests
            writes = max(1, int(load.disk_write_bytes_per_s * dt / 131072))
            counters[0] += reads
            counters[2] += int(load.disk_read_bytes_per_s * dt / 512)
            counters[3] += int(reads * load.disk_await_ms)
            counters[4] += writes
            counters[6] += int(load.disk_write_bytes_per_s * dt / 512)
            counters[7] += int(writes * load.disk_await_ms)
            counters[9] += int(dt * 1000 * load.disk_util_pct / 100.0)
            counters[10] += int((reads + writes) * load.disk_await_ms)
        out = int(load.tcp_out_segs_per_s * dt)
        self.tcp["OutSegs"] += out
        self.tcp["InSegs"] += int(out * 0.9)
        self.tcp["RetransSegs"] += int(round(out * load.tcp_retrans_pct / 100.0))
        runnable = self.cpu_count * busy / 100.0
        for i, window in enumerate((60.0, 300.0, 900.0)):
            weight = min(1.0, dt / window)
            self._load_avg[i] += (runnable - self._load_avg[i]) * weight

    def write(self) -> None:
        self._write("stat", self._stat())
        self._write("meminfo", self._meminfo())
        self._write(
            "loadavg",
            f"{self._load_avg[0]:.2f} {self._load_avg[1]:.2f} {self._load_avg[2]:.2f} "
            f"3/{900 + self.cpu_count} 424242\n",
        )
        self._write("diskstats", self._diskstats())
        self._write("net/snmp", self._snmp())
        self._write("uptime", f"{self.uptime:.2f} {self.uptime * self.cpu_count * 0.6:.2f}\n")
        load = self.load
        self._write("pressure/cpu", _psi(load.psi_cpu_some, 0.0))
        self._write("pressure/io", _psi(load.psi_io_some, load.psi_io_some / 2))
        self._write("pressure/memory", _psi(load.psi_memory_some, load.psi_memory_some / 2))

    def _write(self, relative: str, text: str) -> None:
        (self.root / relative).write_text(text, encoding="ascii")

    def _stat(self) -> str:
        per_cpu = " ".join(str(value // self.cpu_count) for value in self.cpu)
        lines = ["cpu  " + " ".join(str(v) for v in self.cpu)]
        lines += [f"cpu{i} {per_cpu}" for i in range(self.cpu_count)]
        lines += [
            "intr 123456789 0 0 0",
            f"ctxt {int(self.uptime * 50000)}",
            f"btime {int(self.boot_epoch)}",
            f"processes {int(self.uptime * 3)}",
            "procs_running 3",
            "procs_blocked 0",
            "softirq 1234567 0 0 0 0 0 0 0 0 0 0",
        ]
        return "\n".join(lines) + "\n"

    def _meminfo(self) -> str:
        total_kb = self.mem_total // 1024
        available_kb = int(total_kb * self.load.mem_available_pct / 100.0)
        rows = [
            ("MemTotal", total_kb),
            ("MemFree", int(available_kb * 0.4)),
            ("MemAvailable", available_kb),
            ("Buffers", 123456),
            ("Cached", int(available_kb * 0.5)),
            ("SwapCached", 0),
            ("Active", int(total_kb * 0.3)),
            ("Inactive", int(total_kb * 0.1)),
            ("SwapTotal", 0),
            ("SwapFree", 0),
            ("Dirty", 1024),
            ("Shmem", 65536),
            ("HugePages_Total", 0),
        ]
        return "".join(
            f"{key + ':':<16}{value:>10}{'' if key.startswith('HugePages') else ' kB'}\n"
            for key, value in rows
        )

    def _diskstats(self) -> str:
        lines = ["   7       0 loop0 52 0 2162 12 0 0 0 0 0 24 12 0 0 0 0 0 0"]
        for minor, (name, c) in enumerate(self.disks.items()):
            lines.append(f" 259       {minor * 2} {name} " + " ".join(str(v) for v in c))
            # a partition, which the collector must not count twice
            lines.append(f" 259       {minor * 2 + 1} {name}p1 " + " ".join(str(v // 2) for v in c))
        return "\n".join(lines) + "\n"

    def _snmp(self) -> str:
        tcp_keys = [
            "RtoAlgorithm",
            "RtoMin",
            "RtoMax",
            "MaxConn",
            "ActiveOpens",
            "PassiveOpens",
            "AttemptFails",
            "EstabResets",
            "CurrEstab",
            "InSegs",
            "OutSegs",
            "RetransSegs",
            "InErrs",
            "OutRsts",
            "InCsumErrors",
        ]
        tcp_values = {
            "RtoAlgorithm": 1,
            "RtoMin": 200,
            "RtoMax": 120000,
            "MaxConn": -1,
            "ActiveOpens": 1234,
            "PassiveOpens": 567,
            "AttemptFails": 3,
            "EstabResets": 9,
            "CurrEstab": 42,
            "InErrs": 0,
            "OutRsts": 77,
            "InCsumErrors": 0,
            **self.tcp,
        }
        return (
            "Ip: Forwarding DefaultTTL InReceives InHdrErrors\n"
            "Ip: 1 64 123456789 0\n"
            "Icmp: InMsgs InErrors\n"
            "Icmp: 12 0\n"
            f"Tcp: {' '.join(tcp_keys)}\n"
            f"Tcp: {' '.join(str(tcp_values[k]) for k in tcp_keys)}\n"
            "Udp: InDatagrams NoPorts InErrors OutDatagrams\n"
            "Udp: 1234 5 0 1200\n"
        )


def _psi(some: float, full: float) -> str:
    return (
        f"some avg10={some:.2f} avg60={some:.2f} avg300={some:.2f} total={int(some * 1e6)}\n"
        f"full avg10={full:.2f} avg60={full:.2f} avg300={full:.2f} total={int(full * 1e6)}\n"
    )
