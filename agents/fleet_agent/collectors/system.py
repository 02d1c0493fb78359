"""Host metrics from /proc: CPU (busy, steal, iowait), memory and swap, load, disks, TCP retransmits, PSI,
swap-in/out rates and OOM kills (/proc/vmstat), plus the host checks of ``host_health`` when given one.

Rates need two samples; the collector keeps the previous one, so the first ``collect()`` reports
the rate fields as null unless ``prime()`` was called a moment earlier. Nothing here sleeps.
Unreadable files and malformed lines are skipped with one warning each; the fields they feed
become null and everything else is still reported.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from fleet_agent.collectors.host_health import HostHealthCollector
from fleet_agent.logutil import WarnOnce
from fleet_agent.timeutil import rfc3339, utc_now

log = logging.getLogger(__name__)

SECTOR_BYTES = 512  # /proc/diskstats counts 512-byte sectors whatever the device's block size
MAX_DISKS = 64
# Pseudo and stacked devices whose I/O is already counted on the physical disk, and partitions.
_SKIPPED_DISK = re.compile(r"^(loop|ram|zram|fd|sr)\d*")
_PARTITION = re.compile(r"^((?:sd|vd|xvd|hd)[a-z]+\d+|(?:nvme\d+n\d+|mmcblk\d+)p\d+)$")


@dataclass(frozen=True)
class _CpuTicks:
    busy: int
    iowait: int
    steal: int
    total: int


@dataclass(frozen=True)
class _DiskCounters:
    reads: int
    sectors_read: int
    ms_reading: int
    writes: int
    sectors_written: int
    ms_writing: int
    ms_doing_io: int


@dataclass(frozen=True)
class _Sample:
    at: float
    cpu: _CpuTicks | None
    disks: dict[str, _DiskCounters] | None
    tcp: tuple[int, int] | None  # (RetransSegs, OutSegs)
    vmstat: dict[str, int] | None = None  # pswpin, pswpout (pages), oom_kill (kernel >= 4.13)


class SystemCollector:
    def __init__(self, proc_root: str | Path = "/proc", *, clock: Callable[[], float] = time.monotonic,
                 host_health: HostHealthCollector | None = None, wall_clock: Callable[[], datetime] = utc_now):
        self.proc_root = Path(proc_root)
        self.host_health = host_health
        self._wall_clock = wall_clock
        self._last_oom_at: str | None = None  # when this agent last saw the OOM-kill counter move
        self._clock = clock
        self._previous: _Sample | None = None
        self._warn = WarnOnce(log)

    def prime(self) -> None:
        """Take the first sample of the rate counters without reporting anything."""
        self._previous = self._sample()

    def collect(self) -> dict:
        stat = self._read("stat")
        current = self._sample(stat)
        previous, self._previous = self._previous, current
        elapsed = current.at - previous.at if previous else 0.0
        usable = previous is not None and elapsed > 0

        cpu = _cpu_rates(previous.cpu, current.cpu) if usable else None
        memory = self._meminfo()
        load = self._loadavg()
        vm = _vmstat_rates(previous.vmstat, current.vmstat, elapsed) if usable else {}
        if vm.get("oom_kill"):
            self._last_oom_at = rfc3339(self._wall_clock())
        report = {
            "cpu_busy_pct": cpu["busy"] if cpu else None,
            "cpu_steal_pct": cpu["steal"] if cpu else None,
            "cpu_iowait_pct": cpu["iowait"] if cpu else None,
            "cpu_count": _cpu_count(stat),
            "mem_total_bytes": memory.get("MemTotal"),
            "mem_available_bytes": memory.get("MemAvailable"),
            "load1": load[0] if load else None,
            "load5": load[1] if load else None,
            "load15": load[2] if load else None,
            "disks": _disk_rates(previous.disks, current.disks, elapsed) if usable else None,
            "tcp_retrans_pct": _retrans_pct(previous.tcp, current.tcp) if usable else None,
            "pressure": self._pressure(),
            "swap_total_bytes": memory.get("SwapTotal"),
            "swap_free_bytes": memory.get("SwapFree"),
            "swap_in_pages_per_s": vm.get("pswpin"),
            "swap_out_pages_per_s": vm.get("pswpout"),
            "oom_kills": vm.get("oom_kill"),
            "oom_kill_last_at": self._last_oom_at,
        }
        if self.host_health is not None:
            report.update(self.host_health.collect())
        return report

    # -- sampling -------------------------------------------------------------------------------

    def _sample(self, stat: str | None = None) -> _Sample:
        if stat is None:
            stat = self._read("stat")
        return _Sample(
            at=self._clock(),
            cpu=self._cpu_ticks(stat),
            disks=self._diskstats(),
            tcp=self._tcp_counters(),
            vmstat=self._vmstat(),
        )

    def _read(self, relative: str) -> str | None:
        path = self.proc_root / relative
        try:
            return path.read_text(encoding="ascii", errors="replace")
        except OSError as err:
            self._warn(f"read:{relative}", "cannot read %s: %s (its fields are reported as null)", path, err)
            return None

    def _cpu_ticks(self, stat: str | None) -> _CpuTicks | None:
        if stat is None:
            return None
        for line in stat.splitlines():
            if not line.startswith("cpu "):
                continue
            try:
                values = [int(v) for v in line.split()[1:]]
            except ValueError:
                break
            if len(values) < 4:
                break
            # user nice system idle iowait irq softirq steal [guest guest_nice]; guest time is already
            # included in user/nice, so it is left out of the total.
            user, nice, system, idle, iowait, irq, softirq, steal = (values + [0] * 8)[:8]
            return _CpuTicks(
                busy=user + nice + system + irq + softirq,
                iowait=iowait,
                steal=steal,
                total=user + nice + system + idle + iowait + irq + softirq + steal,
            )
        self._warn("stat:cpu", "%s has no usable aggregate 'cpu' line", self.proc_root / "stat")
        return None

    def _meminfo(self) -> dict[str, int]:
        text = self._read("meminfo")
        values: dict[str, int] = {}
        for line in (text or "").splitlines():
            key, _, rest = line.partition(":")
            parts = rest.split()
            if key in ("MemTotal", "MemAvailable", "SwapTotal", "SwapFree") and parts:
                try:
                    multiplier = 1024 if parts[1:2] == ["kB"] else 1
                    values[key] = int(parts[0]) * multiplier
                except ValueError:
                    self._warn(f"meminfo:{key}", "malformed %s line in meminfo: %r", key, line)
        return values

    def _loadavg(self) -> tuple[float, float, float] | None:
        text = self._read("loadavg")
        if text is None:
            return None
        try:
            one, five, fifteen = (float(v) for v in text.split()[:3])
        except ValueError:
            self._warn("loadavg", "malformed loadavg: %r", text[:80])
            return None
        return one, five, fifteen

    def _diskstats(self) -> dict[str, _DiskCounters] | None:
        text = self._read("diskstats")
        if text is None:
            return None
        disks: dict[str, _DiskCounters] = {}
        for line in text.splitlines():
            parts = line.split()
            # major minor name + 11 fields (kernel < 4.18), 15 (+discards) or 17 (+flushes).
            if len(parts) < 14:
                if parts:
                    self._warn("diskstats:short", "skipping malformed diskstats line: %r", line[:120])
                continue
            name = parts[2]
            if _SKIPPED_DISK.match(name) or _PARTITION.match(name):
                continue
            try:
                fields = [int(v) for v in parts[3:14]]
            except ValueError:
                self._warn(f"diskstats:{name}", "skipping malformed diskstats line: %r", line[:120])
                continue
            disks[name] = _DiskCounters(
                reads=fields[0],
                sectors_read=fields[2],
                ms_reading=fields[3],
                writes=fields[4],
                sectors_written=fields[6],
                ms_writing=fields[7],
                ms_doing_io=fields[9],
            )
            if len(disks) >= MAX_DISKS:
                break
        return disks

    def _vmstat(self) -> dict[str, int] | None:
        text = self._read("vmstat")
        if text is None:
            return None
        values: dict[str, int] = {}
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key in ("pswpin", "pswpout", "oom_kill"):
                try:
                    values[key] = int(value)
                except ValueError:
                    self._warn(f"vmstat:{key}", "malformed vmstat line: %r", line[:80])
        return values

    def _tcp_counters(self) -> tuple[int, int] | None:
        text = self._read("net/snmp")
        if text is None:
            return None
        tcp_lines = [line.split()[1:] for line in text.splitlines() if line.startswith("Tcp:")]
        if len(tcp_lines) >= 2:
            header, values = tcp_lines[0], tcp_lines[1]
            try:
                table = dict(zip(header, (int(v) for v in values), strict=False))
                return table["RetransSegs"], table["OutSegs"]
            except (KeyError, ValueError):
                pass
        self._warn("snmp:tcp", "%s has no usable Tcp: header/value pair", self.proc_root / "net/snmp")
        return None

    def _pressure(self) -> dict | None:
        directory = self.proc_root / "pressure"
        if not directory.is_dir():
            return None  # kernel without PSI (before 4.20, or psi=0): not a problem worth a warning
        result: dict[str, dict] = {}
        for resource in ("cpu", "io", "memory"):
            text = self._read(f"pressure/{resource}")
            if text is None:
                continue
            entry: dict[str, float] = {}
            for line in text.splitlines():
                kind, _, rest = line.partition(" ")
                if kind not in ("some", "full"):
                    continue
                for item in rest.split():
                    key, _, value = item.partition("=")
                    if key == "avg10":
                        try:
                            entry[f"{kind}_avg10"] = float(value)
                        except ValueError:
                            self._warn(f"psi:{resource}", "malformed pressure line: %r", line)
            result[resource] = entry
        return result or None


def _pct(part: float, whole: float) -> float:
    return round(max(0.0, min(100.0, 100.0 * part / whole)), 2) if whole > 0 else 0.0


def _cpu_rates(before: _CpuTicks | None, after: _CpuTicks | None) -> dict[str, float] | None:
    if before is None or after is None:
        return None
    total = after.total - before.total
    if total <= 0:  # counters did not move or were reset (e.g. CPU hot-unplug)
        return None
    return {
        "busy": _pct(after.busy - before.busy, total),
        "iowait": _pct(after.iowait - before.iowait, total),
        "steal": _pct(after.steal - before.steal, total),
    }


def _cpu_count(stat: str | None) -> int | None:
    if stat is None:
        return None
    count = sum(1 for line in stat.splitlines() if line.startswith("cpu") and line[3:4].isdigit())
    return count or None


def _disk_rates(
    before: dict[str, _DiskCounters] | None, after: dict[str, _DiskCounters] | None, elapsed: float
) -> list[dict] | None:
    if before is None or after is None:
        return None
    disks = []
    for name, now in after.items():
        then = before.get(name)
        if then is None:
            continue  # appeared since the last sample; rates from the next one
        ios = (now.reads - then.reads) + (now.writes - then.writes)
        io_ms = (now.ms_reading - then.ms_reading) + (now.ms_writing - then.ms_writing)
        disks.append(
            {
                "name": name,
                "read_bytes_per_s": round(
                    max(0, now.sectors_read - then.sectors_read) * SECTOR_BYTES / elapsed, 1
                ),
                "write_bytes_per_s": round(
                    max(0, now.sectors_written - then.sectors_written) * SECTOR_BYTES / elapsed, 1
                ),
                "await_ms": round(io_ms / ios, 3) if ios > 0 else 0.0,
                "util_pct": _pct(now.ms_doing_io - then.ms_doing_io, elapsed * 1000.0),
            }
        )
    return disks


def _vmstat_rates(before: dict[str, int] | None, after: dict[str, int] | None, elapsed: float) -> dict:
    """Swap pages per second and OOM kills since the previous sample (absent when the kernel lacks them)."""
    if before is None or after is None:
        return {}
    rates: dict = {}
    for key in ("pswpin", "pswpout"):
        if key in before and key in after and after[key] >= before[key]:
            rates[key] = round((after[key] - before[key]) / elapsed, 1)
    if "oom_kill" in before and "oom_kill" in after and after["oom_kill"] >= before["oom_kill"]:
        rates["oom_kill"] = after["oom_kill"] - before["oom_kill"]
    return rates


def _retrans_pct(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    if before is None or after is None:
        return None
    retrans, sent = after[0] - before[0], after[1] - before[1]
    if retrans < 0 or sent < 0:
        return None  # counter reset (namespace change); next sample is fine again
    return round(min(100.0, 100.0 * retrans / sent), 4) if sent > 0 else 0.0
