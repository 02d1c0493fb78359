"""Host checks beyond the load figures: data volumes, processes stuck on the GPU, the peer-memory module
and the kernel's clock-sync state.

* **Volumes** — every mount of a data file system in ``/proc/1/mountinfo`` (init's, i.e. the host's mount
  table; ``/proc/self/mountinfo`` where that is not readable) (ext4, xfs, btrfs, zfs,
  NFS, Lustre, …; not pseudo, overlay or squashfs mounts): read-only flag, space and inode use from
  ``statvfs``. The ``statvfs`` runs in a worker thread per volume and the cycle waits on them no longer
  than ``probe_wait_s`` in all: a probe still unanswered after ``hung_after_s`` marks the volume hung (an
  NFS server gone away), and no second probe is started on it while the first is stuck.
* **D state** — every ``scan_every`` cycles, ``/proc/<pid>/stat`` of every process (at most
  ``MAX_PIDS``); a process in uninterruptible sleep has its ``/proc/<pid>/fd`` links read (at most
  ``MAX_FDS``) for ``/dev/nvidia*``. Only processes seen so in two scans in a row are reported: a
  moment of D state is ordinary I/O, two scans apart is a hang. Each such process's wait channel
  (``/proc/<pid>/wchan``) goes with it: a process stuck on an NFS or block-I/O wait holds the GPU but is the data
  path's fault, not the driver's.
* **Peer memory** — whether ``nvidia_peermem`` (or the legacy ``nv_peer_mem``) is in ``/proc/modules``,
  and how many RDMA devices ``/sys/class/infiniband`` has (InfiniBand or RoCE).
* **Clock** — ``adjtimex(2)`` in read-only mode (modes 0): the kernel's ``STA_UNSYNC`` status bit, the
  maximum error and the current offset, as chrony/ntpd/systemd-timesyncd leave them. One system call,
  no daemon-specific tool.

Nothing here raises or blocks: an unreadable source makes its field null.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from fleet_agent.logutil import WarnOnce

log = logging.getLogger(__name__)

MAX_VOLUMES = 32
MAX_PIDS = 16384
MAX_FDS = 1024
MAX_D_STATE = 32
MAX_DEVICES_PER_PROCESS = 8
# File systems that hold data (datasets, checkpoints, the OS): pseudo, overlay and image file systems are not.
DATA_FS_TYPES = frozenset({
    "ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "f2fs", "jfs", "reiserfs", "vfat", "exfat", "ntfs", "ntfs3",
    "nfs", "nfs4", "cifs", "smb3", "lustre", "gpfs", "beegfs", "ceph", "glusterfs", "fuse.glusterfs",
    "fuse.juicefs", "fuse.weka", "wekafs", "virtiofs", "9p",
})
NETWORK_FS_TYPES = frozenset({"nfs", "nfs4", "cifs", "smb3", "lustre", "gpfs", "beegfs", "ceph", "glusterfs",
                              "fuse.glusterfs", "fuse.juicefs", "fuse.weka", "wekafs"})
PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")
STA_UNSYNC = 0x0040
STA_NANO = 0x2000
TIME_ERROR = 5


class _Timex(ctypes.Structure):
    """``struct timex`` (linux/timex.h) on 64-bit Linux: 'long' members and the padding the kernel expects."""

    _fields_ = [
        ("modes", ctypes.c_uint), ("offset", ctypes.c_long), ("freq", ctypes.c_long),
        ("maxerror", ctypes.c_long), ("esterror", ctypes.c_long), ("status", ctypes.c_int),
        ("constant", ctypes.c_long), ("precision", ctypes.c_long), ("tolerance", ctypes.c_long),
        ("time_sec", ctypes.c_long), ("time_usec", ctypes.c_long), ("tick", ctypes.c_long),
        ("ppsfreq", ctypes.c_long), ("jitter", ctypes.c_long), ("shift", ctypes.c_int),
        ("stabil", ctypes.c_long), ("jitcnt", ctypes.c_long), ("calcnt", ctypes.c_long),
        ("errcnt", ctypes.c_long), ("stbcnt", ctypes.c_long), ("tai", ctypes.c_int),
        ("_padding", ctypes.c_int * 11),
    ]


_LIBC: list = []  # the loaded C library, once (find_library may run ldconfig: never per cycle)


def _libc():
    if not _LIBC:
        try:
            _LIBC.append(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True))
        except OSError:
            _LIBC.append(None)
    return _LIBC[0]


def kernel_timex() -> dict | None:
    """The kernel's NTP state via ``adjtimex`` (read only): state, status bits, maxerror (µs), offset (s)."""
    libc = _libc()
    if libc is None:
        return None
    timex = _Timex()
    timex.modes = 0  # read only: nothing is changed
    state = libc.adjtimex(ctypes.byref(timex))
    if state < 0:
        return None
    scale = 1e-9 if timex.status & STA_NANO else 1e-6
    return {"state": state, "status": timex.status, "maxerror_us": timex.maxerror,
            "offset_s": timex.offset * scale}


class _Probe:
    """One ``statvfs`` of one volume in a worker thread."""

    def __init__(self, path: str, statvfs: Callable[[str], os.statvfs_result], started: float):
        self.started = started
        self.result: os.statvfs_result | None = None
        self.error: OSError | None = None
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(path, statvfs), daemon=True,
                                        name=f"statvfs {path[:40]}")
        self._thread.start()

    def _run(self, path: str, statvfs: Callable[[str], os.statvfs_result]) -> None:
        try:
            self.result = statvfs(path)
        except OSError as err:
            self.error = err
        finally:
            self.done.set()


class HostHealthCollector:
    def __init__(
        self,
        proc_root: str | Path = "/proc",
        *,
        sys_root: str | Path = "/sys",
        host_root: str | Path = "/",
        statvfs: Callable[[str], os.statvfs_result] = os.statvfs,
        timex: Callable[[], dict | None] = kernel_timex,
        clock: Callable[[], float] = time.monotonic,
        probe_wait_s: float = 0.2,
        hung_after_s: float = 10.0,
        scan_every: int = 4,
    ):
        self.proc_root = Path(proc_root)
        self.sys_root = Path(sys_root)
        self.host_root = Path(host_root)
        self._statvfs = statvfs
        self._timex = timex
        self._clock = clock
        self.probe_wait_s = probe_wait_s
        self.hung_after_s = hung_after_s
        self.scan_every = max(1, scan_every)
        self._probes: dict[str, _Probe] = {}
        self._last_space: dict[str, dict] = {}
        self._cycle = 0
        self._d_state_before: set[int] = set()
        self._d_state_report: list[dict] | None = None
        self._warn = WarnOnce(log)

    def collect(self) -> dict:
        if self._cycle % self.scan_every == 0:
            self._d_state_report = self._scan_d_state()
        self._cycle += 1
        return {
            "volumes": self._volumes(),
            "gpu_d_state": self._d_state_report,
            "peermem": self._peermem(),
            "clock": self._clock_sync(),
        }

    # -- volumes --------------------------------------------------------------------------------

    def _mounts(self) -> list[tuple[str, str, str, bool]] | None:
        # The host's mount table is init's: an agent in a container with the host's /proc as proc_root sees the
        # host's mounts there, and its own (container) table under self/. Fall back to self/ where 1/ is hidden.
        text = None
        for relative in ("1/mountinfo", "self/mountinfo"):
            path = self.proc_root / relative
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
                break
            except OSError as err:
                error = err
        if text is None:
            self._warn("mountinfo", "cannot read %s: %s (volumes are reported as null)", path, error)
            return None
        mounts, seen = [], set()
        for line in text.splitlines():
            # id parent major:minor root mount-point options [optional fields] - fstype source super-options
            left, sep, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if not sep or len(fields) < 6 or len(tail) < 2:
                continue
            fs_type, source = tail[0], tail[1]
            mount_point = _unescape(fields[4])
            if fs_type not in DATA_FS_TYPES or mount_point in seen:
                continue
            seen.add(mount_point)
            read_only = "ro" in fields[5].split(",") or "ro" in (tail[2].split(",") if len(tail) > 2 else [])
            mounts.append((mount_point, fs_type, source, read_only))
            if len(mounts) >= MAX_VOLUMES:
                break
        return mounts

    def _volumes(self) -> list[dict] | None:
        mounts = self._mounts()
        if mounts is None:
            return None
        now = self._clock()
        # The cycle waits probe_wait_s in all, however many volumes hang (not probe_wait_s for each).
        deadline = time.monotonic() + self.probe_wait_s
        volumes = []
        for mount_point, fs_type, source, read_only in mounts:
            probe = self._probes.get(mount_point)
            if probe is None:
                target = str(self.host_root / mount_point.lstrip("/"))
                probe = self._probes[mount_point] = _Probe(target, self._statvfs, now)
                probe.done.wait(max(0.0, deadline - time.monotonic()))
            hung, stalled = False, None
            if probe.done.is_set():
                del self._probes[mount_point]  # the next cycle starts a fresh probe
                if probe.result is not None:
                    self._last_space[mount_point] = _space(probe.result)
                elif probe.error is not None:
                    self._warn(f"statvfs:{mount_point}", "statvfs %s: %s", mount_point, probe.error)
            else:
                stalled = round(now - probe.started, 1)
                hung = stalled >= self.hung_after_s
            volumes.append({"mount": mount_point[:256], "fs_type": fs_type[:32], "source": source[:256],
                            "network": fs_type in NETWORK_FS_TYPES, "read_only": read_only, "hung": hung,
                            "stalled_s": stalled, **self._last_space.get(mount_point, _NO_SPACE)})
        gone = set(self._probes) - {m[0] for m in mounts}
        for mount_point in gone:  # unmounted: forget it (a stuck thread is a daemon and ends with the agent)
            self._probes.pop(mount_point, None)
            self._last_space.pop(mount_point, None)
        return volumes

    # -- processes in D state holding GPU devices -----------------------------------------------

    def _scan_d_state(self) -> list[dict] | None:
        try:
            entries = os.listdir(self.proc_root)
        except OSError as err:
            self._warn("proc:list", "cannot list %s: %s", self.proc_root, err)
            return None
        stuck: dict[int, str] = {}
        scanned = 0
        root = str(self.proc_root)
        for entry in entries:
            if not entry.isdigit():
                continue
            scanned += 1
            if scanned > MAX_PIDS:
                break
            try:  # raw os calls: this loop runs over every process, a Path and a file object each cost more
                fd = os.open(f"{root}/{entry}/stat", os.O_RDONLY)
                try:
                    stat = os.read(fd, 512)
                finally:
                    os.close(fd)
            except OSError:
                continue  # exited meanwhile
            # "pid (comm) S ...": comm may hold spaces and parentheses, so split at the last ')'.
            close = stat.rfind(b")")
            if close < 0 or stat[close + 2:close + 3] != b"D":
                continue
            stuck[int(entry)] = stat[stat.find(b"(") + 1:close].decode("utf-8", "replace")
        found = []
        for pid in sorted(stuck):
            if pid not in self._d_state_before:
                continue
            devices = self._gpu_devices(pid)
            if devices:
                entry = {"pid": pid, "name": stuck[pid][:64], "devices": devices}
                wchan = self._wait_channel(pid)
                if wchan:
                    entry["wchan"] = wchan
                found.append(entry)
                if len(found) >= MAX_D_STATE:
                    break
        self._d_state_before = set(stuck)
        return found

    def _wait_channel(self, pid: int) -> str:
        """The kernel function the process sleeps in (/proc/<pid>/wchan: `rpc_wait_bit_killable` waits on NFS,
        an `nv…`/`uvm…` symbol inside the GPU driver); '' when unknown ("0": not sleeping, or hidden from us)."""
        try:
            fd = os.open(f"{self.proc_root}/{pid}/wchan", os.O_RDONLY)
            try:
                text = os.read(fd, 128).decode("ascii", "replace").strip()
            finally:
                os.close(fd)
        except OSError:
            return ""
        return "" if text in ("", "0") else text[:64]

    def _gpu_devices(self, pid: int) -> list[str]:
        directory = self.proc_root / str(pid) / "fd"
        devices: set[str] = set()
        try:
            with os.scandir(directory) as it:
                for count, entry in enumerate(it):
                    if count >= MAX_FDS:
                        break
                    try:
                        target = os.readlink(entry.path)
                    except OSError:
                        continue
                    if target.startswith("/dev/nvidia"):
                        devices.add(target[:64])
        except OSError:
            return []
        return sorted(devices)[:MAX_DEVICES_PER_PROCESS]

    # -- GPUDirect RDMA peer memory --------------------------------------------------------------

    def _peermem(self) -> dict | None:
        path = self.proc_root / "modules"
        try:
            text = path.read_text(encoding="ascii", errors="replace")
        except OSError as err:
            self._warn("modules", "cannot read %s: %s", path, err)
            return None
        loaded = {line.split(" ", 1)[0] for line in text.splitlines()}
        module = next((name for name in PEERMEM_MODULES if name in loaded), None)
        try:
            rdma = len(os.listdir(self.sys_root / "class/infiniband"))
        except OSError:
            rdma = 0
        return {"module": module, "rdma_devices": min(rdma, 1024), "nvidia_loaded": "nvidia" in loaded}

    # -- clock synchronisation -------------------------------------------------------------------

    def _clock_sync(self) -> dict | None:
        try:
            timex = self._timex()
        except Exception as err:  # noqa: BLE001 - a broken libc binding must not stop the report
            self._warn("adjtimex", "adjtimex failed: %s", err)
            return None
        if timex is None:
            return None
        status = int(timex["status"])
        return {"synced": not (status & STA_UNSYNC) and timex["state"] != TIME_ERROR,
                "maxerror_us": max(0, min(int(timex["maxerror_us"]), 10**12)),
                "offset_s": round(max(-1e6, min(float(timex["offset_s"]), 1e6)), 6)}


_NO_SPACE = {"size_bytes": None, "used_pct": None, "inodes_used_pct": None}


def _space(st: os.statvfs_result) -> dict:
    """Like df: used share of what a non-root user can reach (reserved blocks do not count as free)."""
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    available = st.f_bavail * st.f_frsize
    reachable = used + available
    inodes_used = st.f_files - st.f_ffree
    return {"size_bytes": st.f_blocks * st.f_frsize,
            "used_pct": round(100.0 * used / reachable, 2) if reachable > 0 else None,
            "inodes_used_pct": round(100.0 * inodes_used / st.f_files, 2) if st.f_files > 0 else None}


def _unescape(path: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal (``\\040``)."""
    if "\\" not in path:
        return path
    out, i = [], 0
    while i < len(path):
        if path[i] == "\\" and i + 4 <= len(path) and path[i + 1:i + 4].isdigit():
            out.append(chr(int(path[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(path[i])
            i += 1
    return "".join(out)
