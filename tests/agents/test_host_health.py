"""Host checks of the agent: mount table, statvfs in a worker thread, D-state scan, peer memory, adjtimex, and the
swap / OOM counters of /proc/vmstat, on files in the kernel's real formats."""

from __future__ import annotations

import json
import os
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fleet_agent.collectors.host_health import STA_UNSYNC, HostHealthCollector, kernel_timex
from fleet_agent.collectors.system import SystemCollector
from fleet_agent.simulator import SimulatedAgent, parse_scenario

SCENARIOS = Path(__file__).resolve().parents[2] / "agents" / "scenarios"
HOST_SCENARIOS = ["host_memory_exhausted", "oom_kill", "swap_storm", "volume_full", "volume_read_only",
                  "volume_hung", "gpu_d_state", "peermem_missing", "clock_unsynced"]

# From a real Ubuntu 22.04 GPU node (trimmed): note the escaped space in the last mount point.
MOUNTINFO = """\
22 29 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
23 29 0:22 / /proc rw,nosuid,nodev,noexec,relatime shared:13 - proc proc rw
29 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw,errors=remount-ro
31 29 7:0 / /snap/core20/2105 ro,nodev,relatime shared:9 - squashfs /dev/loop0 ro
33 29 259:1 / /boot/efi rw,relatime shared:11 - vfat /dev/nvme0n1p1 rw,fmask=0077,dmask=0077
35 29 259:4 / /data ro,relatime shared:12 - xfs /dev/nvme1n1 ro,attr2,inode64,noquota
37 29 0:48 / /mnt/ckpt rw,relatime shared:14 - nfs4 10.0.0.20:/export rw,vers=4.1,hard,proto=tcp
41 28 0:52 / /run/containerd/x/rootfs rw,relatime - overlay overlay rw,lowerdir=/a,upperdir=/b,workdir=/c
42 29 259:5 / /mnt/scratch\\040space rw,relatime shared:15 - ext4 /dev/nvme2n1 rw
"""


def _statvfs(used_pct: float = 50.0):
    def statvfs(path: str) -> os.statvfs_result:
        blocks = 1_000_000
        used = int(blocks * used_pct / 100)
        return os.statvfs_result((4096, 4096, blocks, blocks - used, blocks - used, 1000, 900, 900, 0, 255))

    return statvfs


def _proc(tmp_path: Path) -> Path:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "self/mountinfo").write_text(MOUNTINFO)
    (proc / "modules").write_text("nvidia_uvm 1982464 4 - Live 0x0\nnvidia 56799232 60 - Live 0x0\n")
    return proc


def _collector(tmp_path: Path, **kwargs) -> HostHealthCollector:
    kwargs.setdefault("statvfs", _statvfs())
    kwargs.setdefault("timex", lambda: {"state": 0, "status": 0x2001, "maxerror_us": 3000, "offset_s": 1e-5})
    return HostHealthCollector(_proc(tmp_path), sys_root=tmp_path / "sys", host_root=tmp_path / "host", **kwargs)


def test_mount_table_keeps_data_volumes_with_their_read_only_flag_and_space(tmp_path):
    volumes = _collector(tmp_path, statvfs=_statvfs(98.5)).collect()["volumes"]
    by_mount = {v["mount"]: v for v in volumes}
    # pseudo, image (squashfs) and overlay mounts are not data volumes; octal escapes are decoded
    assert list(by_mount) == ["/", "/boot/efi", "/data", "/mnt/ckpt", "/mnt/scratch space"]
    assert by_mount["/data"]["read_only"] and not by_mount["/"]["read_only"]
    assert by_mount["/mnt/ckpt"]["network"] and not by_mount["/data"]["network"]
    assert by_mount["/data"]["used_pct"] == pytest.approx(98.5)
    assert by_mount["/data"]["inodes_used_pct"] == pytest.approx(10.0)
    assert not any(v["hung"] for v in volumes)


def test_a_volume_whose_statvfs_never_returns_is_hung_and_never_blocks_the_cycle(tmp_path):
    release = threading.Event()
    calls: list[str] = []
    now = [0.0]

    def statvfs(path: str) -> os.statvfs_result:
        calls.append(path)
        if path.endswith("mnt/ckpt"):
            release.wait(30)  # a hard NFS mount whose server is gone
        return _statvfs()(path)

    collector = _collector(tmp_path, statvfs=statvfs, clock=lambda: now[0], probe_wait_s=0.05, hung_after_s=10)
    try:
        started = time.monotonic()
        first = {v["mount"]: v for v in collector.collect()["volumes"]}
        assert time.monotonic() - started < 1.0, "the cycle waited on the hung volume"
        assert first["/mnt/ckpt"]["hung"] is False and first["/mnt/ckpt"]["stalled_s"] == 0
        assert first["/data"]["used_pct"] == pytest.approx(50.0)

        now[0] = 15.0
        second = {v["mount"]: v for v in collector.collect()["volumes"]}
        assert second["/mnt/ckpt"]["hung"] is True and second["/mnt/ckpt"]["stalled_s"] == 15.0
        assert second["/data"]["hung"] is False
        assert sum(1 for c in calls if c.endswith("mnt/ckpt")) == 1, "a second probe was started on a stuck volume"
    finally:
        release.set()
    time.sleep(0.1)
    now[0] = 30.0
    third = {v["mount"]: v for v in collector.collect()["volumes"]}
    assert third["/mnt/ckpt"]["hung"] is False and third["/mnt/ckpt"]["used_pct"] == pytest.approx(50.0)


def _process(proc: Path, pid: int, name: str, state: str, fds: list[str]) -> None:
    (proc / str(pid) / "fd").mkdir(parents=True, exist_ok=True)
    (proc / str(pid) / "stat").write_text(f"{pid} ({name}) {state} 1 {pid} {pid} 0 -1 4194560 3 0 0 0 12 4\n")
    for fd, target in enumerate(fds):
        link = proc / str(pid) / "fd" / str(fd)
        if link.is_symlink():
            link.unlink()
        os.symlink(target, link)


def test_d_state_holders_of_gpu_devices_are_reported_after_two_scans(tmp_path):
    collector = _collector(tmp_path, scan_every=1)
    proc = collector.proc_root
    _process(proc, 4100, "python", "D", ["/dev/null", "/dev/nvidia3", "/dev/nvidiactl"])
    _process(proc, 4200, "rsync (copy) x", "D", ["/data/file"])  # D state, but not on a GPU
    _process(proc, 4300, "python", "R", ["/dev/nvidia0"])  # on a GPU, but running
    assert collector.collect()["gpu_d_state"] == [], "one scan in D state is ordinary I/O"
    assert collector.collect()["gpu_d_state"] == [
        {"pid": 4100, "name": "python", "devices": ["/dev/nvidia3", "/dev/nvidiactl"]}]
    _process(proc, 4100, "python", "S", ["/dev/nvidia3"])
    assert collector.collect()["gpu_d_state"] == []


def test_a_stuck_processs_wait_channel_goes_with_it(tmp_path):
    """/proc/<pid>/wchan names the kernel function the process sleeps in: NFS's RPC wait tells a job stuck on its
    data apart from one wedged in the driver; '0' (not sleeping, or hidden) is left out."""
    collector = _collector(tmp_path, scan_every=1)
    proc = collector.proc_root
    _process(proc, 4100, "python", "D", ["/dev/nvidia3"])
    (proc / "4100" / "wchan").write_text("rpc_wait_bit_killable")
    _process(proc, 4101, "python", "D", ["/dev/nvidia4"])
    (proc / "4101" / "wchan").write_text("0")
    collector.collect()
    assert collector.collect()["gpu_d_state"] == [
        {"pid": 4100, "name": "python", "devices": ["/dev/nvidia3"], "wchan": "rpc_wait_bit_killable"},
        {"pid": 4101, "name": "python", "devices": ["/dev/nvidia4"]}]


def test_d_state_scan_runs_every_few_cycles_and_keeps_its_result_between(tmp_path):
    collector = _collector(tmp_path, scan_every=3)
    _process(collector.proc_root, 4100, "python", "D", ["/dev/nvidia1"])
    results = [collector.collect()["gpu_d_state"] for _ in range(4)]
    assert results[:3] == [[], [], []]  # the first scan, kept for two more cycles
    assert results[3] == [{"pid": 4100, "name": "python", "devices": ["/dev/nvidia1"]}]


def test_peer_memory_module_and_rdma_devices(tmp_path):
    collector = _collector(tmp_path)
    (tmp_path / "sys/class/infiniband/mlx5_0").mkdir(parents=True)
    (tmp_path / "sys/class/infiniband/mlx5_1").mkdir()
    assert collector.collect()["peermem"] == {"module": None, "rdma_devices": 2, "nvidia_loaded": True}
    with (collector.proc_root / "modules").open("a") as fh:
        fh.write("nv_peer_mem 16384 0 - Live 0x0\n")
    assert collector.collect()["peermem"]["module"] == "nv_peer_mem"


def test_clock_sync_from_adjtimex_status(tmp_path):
    unsynced = {"state": 5, "status": 0x2001 | STA_UNSYNC, "maxerror_us": 16_000_000, "offset_s": 0.0}
    assert _collector(tmp_path / "a").collect()["clock"] == {"synced": True, "maxerror_us": 3000, "offset_s": 1e-5}
    assert _collector(tmp_path / "b", timex=lambda: unsynced).collect()["clock"]["synced"] is False


def test_the_real_adjtimex_call_reads_without_changing_anything():
    before = kernel_timex()
    assert before is not None, "adjtimex is available on Linux"
    assert {"state", "status", "maxerror_us", "offset_s"} <= set(before)
    assert kernel_timex()["status"] == before["status"]


def test_unreadable_sources_become_null_not_errors(tmp_path):
    collector = HostHealthCollector(tmp_path / "nowhere", sys_root=tmp_path / "nosys", timex=lambda: None)
    assert collector.collect() == {"volumes": None, "gpu_d_state": None, "peermem": None, "clock": None}


def test_vmstat_swap_rates_and_oom_kills(tmp_path):
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "meminfo").write_text("MemTotal:       1000000 kB\nMemAvailable:     20000 kB\n"
                                  "SwapTotal:       800000 kB\nSwapFree:         200000 kB\n")

    def vmstat(pswpin: int, pswpout: int, oom: int) -> None:
        (proc / "vmstat").write_text(f"nr_free_pages 100\npswpin {pswpin}\npswpout {pswpout}\npgfault 9\n"
                                     f"oom_kill {oom}\n")

    now, wall = [0.0], [datetime(2026, 12, 3, 12, 0, tzinfo=UTC)]
    collector = SystemCollector(proc, clock=lambda: now[0], wall_clock=lambda: wall[0])
    vmstat(1000, 2000, 3)
    collector.prime()
    now[0] = 10.0
    vmstat(51000, 102000, 3)
    first = collector.collect()
    assert (first["swap_in_pages_per_s"], first["swap_out_pages_per_s"]) == (5000.0, 10000.0)
    assert first["oom_kills"] == 0 and first["oom_kill_last_at"] is None
    assert (first["swap_total_bytes"], first["swap_free_bytes"]) == (800000 * 1024, 200000 * 1024)
    now[0], wall[0] = 20.0, datetime(2026, 12, 3, 12, 0, 10, tzinfo=UTC)
    vmstat(51000, 102000, 5)
    second = collector.collect()
    assert second["oom_kills"] == 2 and second["oom_kill_last_at"] == "2026-12-03T12:00:10Z"
    now[0] = 30.0
    third = collector.collect()
    assert third["oom_kills"] == 0 and third["oom_kill_last_at"] == "2026-12-03T12:00:10Z", "kept until restart"


@pytest.mark.parametrize("name", HOST_SCENARIOS)
def test_host_scenarios_produce_valid_reports_that_show_the_fault(name, tmp_path, assert_valid_report):
    loaded = parse_scenario(json.loads((SCENARIOS / f"{name}.json").read_text()), name)
    agent = SimulatedAgent.from_scenario(loaded, 0, work_dir=tmp_path)
    try:
        reports = [agent.step(t) for t in (0, 15, 31, 46)]
        for report in reports:
            assert_valid_report(report)
        before, during = reports[1]["system"], reports[3]["system"]
        assert before != during
    finally:
        agent.close()


def test_the_host_mount_table_of_init_wins_over_the_agents_own(tmp_path):
    """In a container given the host's /proc, self/ is the container's table and 1/ the host's."""
    collector = _collector(tmp_path)
    (collector.proc_root / "1").mkdir()
    (collector.proc_root / "1/mountinfo").write_text(
        "29 1 259:2 / / rw,relatime shared:1 - xfs /dev/sda1 rw\n"
        "40 29 259:9 / /scratch rw,relatime shared:2 - ext4 /dev/nvme3n1 rw\n")
    assert [v["mount"] for v in collector.collect()["volumes"]] == ["/", "/scratch"]
