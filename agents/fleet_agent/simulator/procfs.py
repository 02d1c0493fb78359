"""A simulated /proc tree in real kernel formats, so the real ``SystemCollector`` parses it.

Counters are cumulative like the kernel's: each ``advance(dt, load)`` adds what ``load`` would have
produced over ``dt`` seconds, and ``write()`` renders the files.
"""

from __future__ import annotations

import os
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
    psi_memory_full: float | None = None  # None: half of "some", as on a healthy host
    swap_in_pages_per_s: float = 0.0
    swap_out_pages_per_s: float = 0.0
    swap_used_pct: float = 0.5


# The mount table of a GPU node in /proc/self/mountinfo format: pseudo file systems, a container overlay and
# a snap image (which the collector must skip), the root disk, the EFI partition, local NVMe scratch and the
# shared checkpoint volume over NFS. (mount id, parent, major:minor, mount point, fs type, source, super options)
MOUNTS = (
    (22, 1, "0:21", "/sys", "sysfs", "sysfs", "rw"),
    (23, 1, "0:22", "/proc", "proc", "proc", "rw"),
    (24, 1, "0:5", "/dev", "devtmpfs", "udev", "rw,size=1048576k,nr_inodes=262144,mode=755"),
    (26, 1, "259:2", "/", "ext4", "/dev/nvme0n1p2", "rw,errors=remount-ro"),
    (28, 26, "0:25", "/run", "tmpfs", "tmpfs", "rw,size=104857600k,mode=755"),
    (31, 26, "7:0", "/snap/core20/2105", "squashfs", "/dev/loop0", "ro"),
    (33, 26, "259:1", "/boot/efi", "vfat", "/dev/nvme0n1p1", "rw,fmask=0077,dmask=0077,codepage=437"),
    (35, 26, "259:4", "/data", "xfs", "/dev/nvme1n1", "rw,attr2,inode64,logbufs=8,logbsize=32k,noquota"),
    (37, 26, "0:48", "/mnt/checkpoints", "nfs4", "10.0.0.20:/export/checkpoints",
     "rw,vers=4.1,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys"),
    (41, 28, "0:52", "/run/containerd/io.containerd.runtime.v2.task/k8s.io/3f2a/rootfs", "overlay", "overlay",
     "rw,lowerdir=/var/lib/containerd/l1,upperdir=/var/lib/containerd/u1,workdir=/var/lib/containerd/w1"),
)
MODULES = (
    ("nvidia_uvm", 1982464, 4, "-"),
    ("nvidia_drm", 122880, 0, "-"),
    ("nvidia_modeset", 1527808, 1, "nvidia_drm,"),
    ("nvidia", 56799232, 60, "nvidia_uvm,nvidia_peermem,nvidia_modeset,"),
    ("mlx5_ib", 466944, 0, "-"),
    ("ib_uverbs", 196608, 3, "nvidia_peermem,mlx5_ib,"),
    ("ib_core", 454656, 4, "ib_uverbs,mlx5_ib,"),
    ("mlx5_core", 2351104, 1, "mlx5_ib,"),
)
PEERMEM_MODULE = ("nvidia_peermem", 16384, 0, "-")


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
        self.vmstat = {"pswpin": 1_200, "pswpout": 3_400, "oom_kill": 0}
        self.swap_total = 8 * 2**30
        # mount point -> options the fault simulation changes ("ro" flips a volume read-only)
        self.read_only: set[str] = set()
        self.peermem_loaded = False
        # pid -> (comm, /dev/nvidia* it holds, the kernel function it sleeps in: /proc/<pid>/wchan)
        self.d_state: dict[int, tuple[str, list[str], str]] = {}
        self._pids_written: set[int] = set()
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
        self.vmstat["pswpin"] += int(load.swap_in_pages_per_s * dt)
        self.vmstat["pswpout"] += int(load.swap_out_pages_per_s * dt)
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
        memory_full = load.psi_memory_some / 2 if load.psi_memory_full is None else load.psi_memory_full
        self._write("pressure/memory", _psi(load.psi_memory_some, memory_full))
        self._write("vmstat", self._vmstat())
        (self.root / "self").mkdir(exist_ok=True)
        self._write("self/mountinfo", self._mountinfo())
        modules = list(MODULES) + ([PEERMEM_MODULE] if self.peermem_loaded else [])
        self._write("modules", "".join(f"{name} {size} {used} {by} Live 0x0000000000000000\n"
                                       for name, size, used, by in modules))
        self._write_processes()

    def oom_kill(self, count: int = 1) -> None:
        self.vmstat["oom_kill"] += count

    def _vmstat(self) -> str:
        rows = [("nr_free_pages", 1234567), ("nr_zone_inactive_anon", 4567), ("nr_dirty", 256),
                ("pgpgin", 987654321), ("pgpgout", 123456789), ("pswpin", self.vmstat["pswpin"]),
                ("pswpout", self.vmstat["pswpout"]), ("pgfault", 5555555555), ("pgmajfault", 12345),
                ("oom_kill", self.vmstat["oom_kill"])]
        return "".join(f"{key} {value}\n" for key, value in rows)

    def _mountinfo(self) -> str:
        lines = []
        for mount_id, parent, dev, point, fs_type, source, super_options in MOUNTS:
            ro = point in self.read_only
            options = ("ro" if ro else "rw") + ",relatime"
            if ro:
                super_options = super_options.replace("rw", "ro", 1)
            shared = "" if fs_type == "overlay" else f" shared:{mount_id}"
            lines.append(f"{mount_id} {parent} {dev} / {point} {options}{shared} - {fs_type} {source} "
                         f"{super_options}")
        return "\n".join(lines) + "\n"

    def _write_processes(self) -> None:
        """/proc/<pid>/stat (and fd links) for the init process, a healthy GPU job and the stuck ones."""
        processes = {1: ("systemd", "S", [], "ep_poll"),
                     41000: ("python", "R", ["/dev/nvidia0", "/dev/nvidiactl"], "0")}
        for pid, (name, devices, wchan) in self.d_state.items():
            processes[pid] = (name, "D", devices, wchan)
        for pid in self._pids_written - set(processes):
            directory = self.root / str(pid)
            for link in (directory / "fd").glob("*"):
                link.unlink()
            (directory / "stat").unlink(missing_ok=True)
            (directory / "wchan").unlink(missing_ok=True)
        for pid, (name, state, devices, wchan) in processes.items():
            directory = self.root / str(pid)
            (directory / "fd").mkdir(parents=True, exist_ok=True)
            self._write(f"{pid}/stat", f"{pid} ({name}) {state} 1 {pid} {pid} 0 -1 4194560 3 0 0 0 "
                                       f"12 4 0 0 20 0 1 0 {int(self.uptime * USER_HZ)} 0 0\n")
            self._write(f"{pid}/wchan", wchan)
            targets = ["/dev/null", "pipe:[424242]", *devices]
            wanted = {str(fd): target for fd, target in enumerate(targets)}
            for link in (directory / "fd").glob("*"):
                if link.name not in wanted or os.readlink(link) != wanted[link.name]:
                    link.unlink()
            for fd, target in wanted.items():
                if not (directory / "fd" / fd).is_symlink():
                    os.symlink(target, directory / "fd" / fd)
        self._pids_written = set(processes)

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
            ("SwapTotal", self.swap_total // 1024),
            ("SwapFree", int(self.swap_total // 1024 * (1 - self.load.swap_used_pct / 100.0))),
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
