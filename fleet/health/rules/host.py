"""Host checks: memory and the data path (step 3), the host's software chain (step 2: clock sync, GPUDirect
RDMA peer memory) and processes wedged in the GPU driver (step 4).

All of them read the report's `system` section (`fleet_agent.collectors.system` and `.host_health`, stored
whole in `NodeStatus.system`); docs/health.md lists the sources behind each threshold.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

from django.utils.dateparse import parse_datetime

from fleet.core.i18n import Join, Msg
from fleet.inventory.choices import Layer

from ..choices import Severity, TriageStep
from .base import Explains, Observation, Param, node_rule

WEDGED_DRIVER_EXPLAINS = Explains(("residual_gpu_processes",))

# Wait channels (/proc/<pid>/wchan: the kernel function a sleeping process waits in) that are storage, not the GPU
# driver: SunRPC/NFS, block I/O and page-cache waits, journalling file systems, and the network and parallel file
# systems' clients. A process in D state here holds its GPU only because its job touches the data path.
STORAGE_WAIT_PREFIXES = (
    "rpc_", "__rpc_", "nfs_", "nfs4_", "__nfs",  # NFS over SunRPC
    "io_schedule", "bit_wait_io", "blk_", "wait_on_page_bit", "folio_wait_bit", "__folio_lock", "__lock_page",
    "wait_on_buffer", "__wait_on_buffer", "jbd2_", "xfs_", "ext4_", "btrfs_",  # block I/O, local file systems
    "ptlrpc_", "ll_", "ldlm_", "cl_sync_io", "osc_",  # Lustre
    "cifs_", "smb2_", "wait_for_response",  # SMB
    "ceph_", "fuse_", "request_wait_answer", "beegfs", "gpfs", "mmfs",  # Ceph, FUSE, BeeGFS, GPFS
)


def waits_on_storage(process: dict) -> bool:
    wchan = process.get("wchan")
    return isinstance(wchan, str) and wchan.startswith(STORAGE_WAIT_PREFIXES)

GIB = 2**30


def _system(node) -> dict | None:
    status = node.status
    if status is None:
        return None
    return status.get("system") or None


def _memory_psi(system: dict) -> tuple[float | None, float | None]:
    memory = (system.get("pressure") or {}).get("memory") or {}
    return memory.get("some_avg10"), memory.get("full_avg10")


# -- step 3: memory ------------------------------------------------------------------------------------------


def _host_memory_exhausted(node, params, ctx):
    system = _system(node)
    if system is None:
        return None
    total, available = system.get("mem_total_bytes"), system.get("mem_available_bytes")
    some, full = _memory_psi(system)
    if (available is None or not total) and full is None:
        return None
    reasons = []
    available_pct = 100.0 * available / total if available is not None and total else None
    if available_pct is not None and available_pct < params["available_pct"]:
        reasons.append(Msg("{available_gib:.1f} GiB available of {total_gib:.0f} GiB ({available_pct:.1f} %, "
                           "threshold {threshold:g} %)", available_gib=available / GIB, total_gib=total / GIB,
                           available_pct=available_pct, threshold=params["available_pct"]))
    if full is not None and full >= params["psi_full_avg10"]:
        reasons.append(Msg("all tasks stalled on memory {full:.0f} % of the last 10 s (PSI memory full, threshold "
                           "{threshold:g} %)", full=full, threshold=params["psi_full_avg10"]))
    if not reasons:
        return []
    return [Observation(
        summary=Msg("Host memory exhausted: {reasons} — the kernel is reclaiming and the OOM killer is next",
                    reasons=Join(reasons)),
        values={"mem_available_bytes": available, "mem_total_bytes": total,
                "mem_available_pct": round(available_pct, 2) if available_pct is not None else None,
                "psi_memory_some_avg10": some, "psi_memory_full_avg10": full,
                "cpu_busy_pct": system.get("cpu_busy_pct"),
                "thresholds": {"available_pct": params["available_pct"],
                               "psi_full_avg10": params["psi_full_avg10"]}})]


def _report_age_s(node, ctx, stamp: str | None) -> float | None:
    """Seconds since an agent-clock time stamp, without trusting the agent's clock: the distance to the report's
    own collection time (both agent clock) plus the report's age on the server (both server clock)."""
    status = node.status
    moment = parse_datetime(stamp) if isinstance(stamp, str) else None
    collected, received = status.get("collected_at_oom"), status.get("received_at")
    if moment is None or not isinstance(collected, datetime) or not isinstance(received, datetime):
        return None
    return max(0.0, (collected - moment).total_seconds()) + max(0.0, (ctx.now - received).total_seconds())


def _oom_kill(node, params, ctx):
    system = _system(node)
    if system is None or ("oom_kills" not in system and "oom_kill_last_at" not in system):
        return None  # an agent that does not report OOM kills (older, or a kernel without vmstat oom_kill)
    last_at = system.get("oom_kill_last_at")
    if not last_at:
        return []
    age = _report_age_s(node, ctx, last_at)
    if age is None or age > params["window_s"]:
        return []
    total, available = system.get("mem_total_bytes"), system.get("mem_available_bytes")
    return [Observation(
        summary=Msg("The kernel's OOM killer killed processes {minutes:.0f} min ago{count} — host memory (or a "
                    "container's memory limit) ran out; a training process or data loader may be gone",
                    minutes=age / 60,
                    count=Msg(" ({count} in the last report interval)", count=system["oom_kills"])
                    if system.get("oom_kills") else ""),
        values={"oom_kill_last_at": last_at, "oom_kills_last_interval": system.get("oom_kills"),
                "age_s": round(age), "window_s": params["window_s"], "mem_available_bytes": available,
                "mem_total_bytes": total})]


def _swap_storm(node, params, ctx):
    system = _system(node)
    if system is None:
        return None
    swap_in, swap_out = system.get("swap_in_pages_per_s"), system.get("swap_out_pages_per_s")
    if swap_in is None and swap_out is None:
        return None
    swap_in, swap_out = swap_in or 0.0, swap_out or 0.0
    if swap_in + swap_out < params["pages_per_s"]:
        return []
    total, free = system.get("swap_total_bytes"), system.get("swap_free_bytes")
    used = Msg("; swap {pct:.0f} % used", pct=100.0 * (total - free) / total) if total and free is not None else ""
    return [Observation(
        summary=Msg("Swap storm: {swap_in:.0f} pages/s swapped in and {swap_out:.0f} out (threshold "
                    "{threshold:g} pages/s together){used} — the host thrashes", swap_in=swap_in, swap_out=swap_out,
                    threshold=params["pages_per_s"], used=used),
        values={"swap_in_pages_per_s": swap_in, "swap_out_pages_per_s": swap_out, "swap_total_bytes": total,
                "swap_free_bytes": free, "mem_available_bytes": system.get("mem_available_bytes"),
                "threshold_pages_per_s": params["pages_per_s"]})]


# -- step 3: data volumes ------------------------------------------------------------------------------------


def _volume_subject(mount: str) -> str:
    """A finding subject (at most 64 characters) for a mount point."""
    if len(mount) <= 57:
        return f"volume:{mount}"
    return f"volume:{mount[:40]}~{hashlib.sha1(mount.encode(), usedforsecurity=False).hexdigest()[:12]}"


def _ignored(mount: str, params) -> bool:
    return any(mount == prefix or mount.startswith(prefix.rstrip("/") + "/") for prefix in params["ignore_mounts"])


def _volumes(node) -> list | None:
    system = _system(node)
    return None if system is None else system.get("volumes")


# The three volume checks run on every node of the fleet: the healthy path is one comparison per volume, the
# ignore list and the summary are looked at only for a volume that trips.


def _volume_full(node, params, ctx):
    volumes = _volumes(node)
    if volumes is None:
        return None
    threshold, found = params["used_pct"], []
    for volume in volumes:
        used, inodes = volume.get("used_pct"), volume.get("inodes_used_pct")
        if (used is None or used < threshold) and (inodes is None or inodes < threshold):
            continue
        mount = volume.get("mount")
        if not mount or _ignored(mount, params):
            continue
        reasons = []
        if used is not None and used >= threshold:
            reasons.append(Msg("{pct:.1f} % of its space used", pct=used))
        if inodes is not None and inodes >= threshold:
            reasons.append(Msg("{pct:.1f} % of its inodes used", pct=inodes))
        found.append(Observation(
            summary=Msg("Volume {mount} ({fs_type}) is full: {reasons} (threshold {threshold:g} %) — checkpoints "
                        "and logs can no longer be written", mount=mount, fs_type=volume.get("fs_type"),
                        reasons=Join(reasons, Msg(" and ")), threshold=threshold),
            subject=_volume_subject(mount),
            values={**volume, "threshold_pct": threshold}))
    return found


def _volume_read_only(node, params, ctx):
    volumes = _volumes(node)
    if volumes is None:
        return None
    found = []
    for volume in volumes:
        if not volume.get("read_only"):
            continue
        mount = volume.get("mount")
        if not mount or _ignored(mount, params):
            continue
        found.append(Observation(
            summary=Msg("Volume {mount} ({fs_type}, {source}) is mounted read-only — the kernel remounts a file "
                        "system read-only after I/O or journal errors", mount=mount, fs_type=volume.get("fs_type"),
                        source=volume.get("source") or "?"),
            subject=_volume_subject(mount), values=volume))
    return found


def _volume_hung(node, params, ctx):
    volumes = _volumes(node)
    if volumes is None:
        return None
    found = []
    for volume in volumes:
        stalled = volume.get("stalled_s")
        if not (volume.get("hung") or (stalled is not None and stalled >= params["stalled_s"])):
            continue
        mount = volume.get("mount")
        if not mount:
            continue
        kind = Msg("network volume") if volume.get("network") else Msg("volume")
        found.append(Observation(
            summary=Msg("The {kind} {mount} ({fs_type}, {source}) does not answer: a statvfs has been waiting "
                        "{stalled:.0f} s — every job touching it hangs (checkpoints, datasets)", kind=kind,
                        mount=mount, fs_type=volume.get("fs_type"), source=volume.get("source") or "?",
                        stalled=stalled or 0),
            subject=_volume_subject(mount), values=volume))
    return found


# -- step 2: host software chain -----------------------------------------------------------------------------


def _clock_unsynced(node, params, ctx):
    system = _system(node)
    clock = (system or {}).get("clock")
    if not isinstance(clock, dict) or "synced" not in clock:
        return None
    maxerror_ms = (clock.get("maxerror_us") or 0) / 1000.0
    offset_ms = abs(clock.get("offset_s") or 0.0) * 1000.0
    reasons = []
    if not clock["synced"]:
        reasons.append(Msg("the kernel marks the clock unsynchronised (STA_UNSYNC)"))
    if maxerror_ms > params["max_error_ms"]:
        reasons.append(Msg("maximum error {error:.0f} ms (threshold {threshold:g} ms)", error=maxerror_ms,
                           threshold=params["max_error_ms"]))
    if offset_ms > params["max_error_ms"]:
        reasons.append(Msg("offset {offset:.0f} ms", offset=offset_ms))
    if not reasons:
        return []
    return [Observation(
        summary=Msg("Clock not synchronised: {reasons} — log time points (what provider tickets rely on) cannot "
                    "be trusted", reasons=Join(reasons)),
        values={**clock, "max_error_ms": params["max_error_ms"]})]


def _peermem_missing(node, params, ctx):
    system = _system(node)
    peermem = (system or {}).get("peermem")
    if not isinstance(peermem, dict):
        return None
    if peermem.get("module") or not peermem.get("nvidia_loaded", True):
        return []
    rdma = peermem.get("rdma_devices") or 0
    expected = params["expect_with_rdma"] and rdma > 0
    if not expected:
        return []
    return [Observation(
        summary=Msg("GPUDirect RDMA peer-memory module not loaded (no nvidia_peermem or nv_peer_mem) on a node "
                    "with {rdma} RDMA device(s) — NCCL falls back to staging through host memory", rdma=rdma),
        values={**peermem, "expected_because": "InfiniBand / RoCE devices present"})]


# -- step 4: processes wedged in the driver ------------------------------------------------------------------


def _d_state(node, *, storage: bool) -> list[dict] | None:
    """The processes in D state holding GPU devices that wait on storage (`storage`) or elsewhere (the driver)."""
    system = _system(node)
    if system is None or system.get("gpu_d_state") is None:
        return None
    return [p for p in system["gpu_d_state"] if isinstance(p, dict) and waits_on_storage(p) is storage]


def _shown(stuck: list[dict]) -> str:
    return (", ".join(f"{p.get('name')} (pid {p.get('pid')})" for p in stuck[:6]) + (" …" if len(stuck) > 6 else ""))


def _gpu_devices_held(stuck: list[dict]) -> list[str]:
    return sorted({d for p in stuck for d in p.get("devices") or [] if d[len("/dev/nvidia"):].isdigit()})


def _storage_d_state(node, params, ctx):
    stuck = _d_state(node, storage=True)
    if not stuck:
        return stuck
    waits = ", ".join(sorted({p["wchan"] for p in stuck}))
    return [Observation(
        summary=Msg("{count} GPU process(es) stuck waiting on storage ({waits}) while holding {devices}: {shown} "
                    "— the data path is the fault, not the GPU driver", count=len(stuck), waits=waits[:120],
                    devices=", ".join(_gpu_devices_held(stuck)) or Msg("the NVIDIA control device"),
                    shown=_shown(stuck)[:300]),
        values={"processes": stuck, "devices": _gpu_devices_held(stuck), "wait_channels": sorted(
            {p["wchan"] for p in stuck})},
        # They hold their GPUs' memory because they cannot finish, not because anyone forgot them.
        explains=(WEDGED_DRIVER_EXPLAINS,))]


def _gpu_d_state(node, params, ctx):
    stuck = _d_state(node, storage=False)
    if not stuck:
        return stuck
    devices, shown = _gpu_devices_held(stuck), _shown(stuck)
    return [Observation(
        summary=Msg("{count} process(es) stuck in uninterruptible sleep holding {devices}: {shown} — they cannot "
                    "be killed; the GPU driver is wedged", count=len(stuck),
                    devices=", ".join(devices) or Msg("the NVIDIA control device"), shown=shown[:300]),
        values={"processes": stuck, "devices": devices},
        # The wedged processes are what holds the GPU memory the residual-processes rule sees: one fault, and the
        # headline is the driver, not "stop the leftover processes" (they cannot be stopped).
        explains=(WEDGED_DRIVER_EXPLAINS,))]


RULES = [
    node_rule(
        slug="host_memory_exhausted", title="Host memory exhausted", step=TriageStep.CAPACITY,
        layer=Layer.APPLICATION, severity=Severity.CRITICAL, duration_s=120, clear_hold_s=120,
        check=_host_memory_exhausted,
        params=(Param("available_pct", "number", 3.0, "MemAvailable share of MemTotal below which memory counts "
                      "as exhausted", minimum=0, maximum=100),
                Param("psi_full_avg10", "number", 20.0, "PSI memory 'full' avg10 (share of time every task "
                      "waited on memory) at or above which memory counts as exhausted", minimum=0, maximum=100)),
        description="The host's available memory is near zero or every task is stalled on memory reclaim: data "
                    "loaders slow to a crawl and the OOM killer is next. A finding of its own, whatever the CPU "
                    "does (reclaim keeps the CPU busy; the input pipeline is a symptom here, not the cause).",
        remedy="find the process that grew (evidence, `ps aux --sort=-rss`): fewer data-loader workers, smaller "
               "prefetch or pinned-memory buffers, or a node with more memory"),
    node_rule(
        slug="host_oom_kill", title="OOM killer fired", step=TriageStep.CAPACITY, layer=Layer.APPLICATION,
        severity=Severity.CRITICAL, duration_s=0, clear_hold_s=0, check=_oom_kill,
        params=(Param("window_s", "integer", 1800, "How long after the last OOM kill the finding stays open",
                      minimum=60, maximum=7 * 86400),),
        description="The kernel's out-of-memory killer killed a process (the `oom_kill` counter of /proc/vmstat "
                    "rose; the kernel log names the victim). The counter counts container (memory cgroup) kills "
                    "too: the kernel log line says which (`Memory cgroup out of memory` vs `Out of memory`).",
        remedy="read the OOM lines in the kernel log (`journalctl -k | grep -i 'killed process'`) for the victim, "
               "restart the job from its last checkpoint with a smaller host-memory footprint"),
    node_rule(
        slug="swap_storm", title="Swap storm", step=TriageStep.CAPACITY, layer=Layer.HOST_OS,
        severity=Severity.CRITICAL, duration_s=120, clear_hold_s=120, check=_swap_storm,
        params=(Param("pages_per_s", "number", 5000.0, "Pages swapped in plus out per second (pswpin + pswpout "
                      "of /proc/vmstat)", minimum=1),),
        description="The host moves pages to and from swap at a high rate: everything on it, the input pipeline "
                    "included, runs at disk speed.",
        remedy="find what grew, free memory or move the job to a larger node; GPU nodes are best run without swap "
               "(or with vm.swappiness low) so that overcommit fails fast instead of thrashing"),
    node_rule(
        slug="volume_full", title="Data volume full", step=TriageStep.CAPACITY, layer=Layer.HOST_OS,
        severity=Severity.CRITICAL, duration_s=60, clear_hold_s=120, check=_volume_full,
        params=(Param("used_pct", "number", 97.0, "Used share of a volume's space or inodes (as df reports it)",
                      minimum=1, maximum=100),
                Param("ignore_mounts", "string_list", ["/boot", "/boot/efi"], "Mount points (and what lies under "
                      "them) not judged")),
        description="A data volume (root, local NVMe, network storage) is out of space or inodes: checkpoint "
                    "writes and logs fail.",
        remedy="free space on the volume (old checkpoints, caches, core dumps) or grow it; check the job's "
               "checkpoint retention"),
    node_rule(
        slug="volume_read_only", title="Data volume read-only", step=TriageStep.CAPACITY, layer=Layer.HOST_OS,
        severity=Severity.CRITICAL, duration_s=0, clear_hold_s=60, check=_volume_read_only,
        params=(Param("ignore_mounts", "string_list", ["/boot/efi"], "Mount points that are read-only on purpose "
                      "(and what lies under them)"),),
        description="A data volume is mounted read-only — usually the kernel's reaction to I/O or journal errors "
                    "(errors=remount-ro), sometimes a storage array fencing the host.",
        remedy="read the kernel log for the file system's errors (EXT4-fs error, XFS metadata I/O error), check "
               "the disk's SMART / NVMe log, fsck and remount; replace the disk if it reports media errors"),
    node_rule(
        slug="volume_hung", title="Volume not responding", step=TriageStep.CAPACITY, layer=Layer.HOST_OS,
        severity=Severity.CRITICAL, duration_s=0, clear_hold_s=60, check=_volume_hung,
        params=(Param("stalled_s", "number", 10.0, "How long a statvfs of the volume may take before it counts as "
                      "hung", minimum=1),),
        description="A statvfs of a mounted volume does not return (an NFS or parallel-file-system server gone "
                    "away on a hard mount): every process touching it hangs in D state.",
        # The hung volume is the cause the stuck GPU jobs wait on: it names the mount and speaks for them.
        explains=(Explains(("storage_d_state",), same_gpu=False),),
        remedy="check the storage server and the network path to it (`nfs: server … not responding` in the "
               "kernel log); jobs resume when it answers — do not reboot before it is back"),
    node_rule(
        slug="clock_unsynced", title="Clock not synchronised", step=TriageStep.SOFTWARE_CHAIN,
        layer=Layer.HOST_OS, severity=Severity.WARNING, duration_s=600, clear_hold_s=120,
        check=_clock_unsynced,
        params=(Param("max_error_ms", "number", 500.0, "Kernel maximum error (adjtimex maxerror) or offset above "
                      "which the clock counts as unsynchronised", minimum=1),),
        description="The kernel reports the clock unsynchronised (adjtimex STA_UNSYNC) or its error bound too "
                    "large: chrony / ntpd / timesyncd lost its sources. Kernel-log and report time points — what "
                    "provider tickets and Xid correlation rely on — drift.",
        remedy="check the time daemon (`chronyc tracking`, `timedatectl timesync-status`) and its sources; in a "
               "cloud, the provider's time service (e.g. 169.254.169.123 on AWS)"),
    node_rule(
        slug="peermem_missing", title="GPUDirect RDMA peer memory missing", step=TriageStep.SOFTWARE_CHAIN,
        layer=Layer.GPU_DRIVER, severity=Severity.WARNING, duration_s=300, clear_hold_s=60,
        check=_peermem_missing,
        params=(Param("expect_with_rdma", "boolean", True, "Expect the peer-memory module on every node with "
                      "InfiniBand / RoCE devices (turn off per pool where NCCL uses DMA-BUF instead)"),),
        description="The node has RDMA NICs but neither nvidia_peermem nor the legacy nv_peer_mem module is "
                    "loaded: GPUDirect RDMA is off and NCCL stages traffic through host memory (lower bandwidth, "
                    "more CPU).",
        remedy="`modprobe nvidia-peermem` (shipped with the driver since R470) and make it load at boot; with "
               "open kernel modules and Linux ≥ 5.12, DMA-BUF works without it — then turn the rule off"),
    node_rule(
        slug="storage_d_state", title="GPU jobs stuck on storage", step=TriageStep.CAPACITY, layer=Layer.HOST_OS,
        severity=Severity.CRITICAL, duration_s=120, clear_hold_s=60, check=_storage_d_state,
        description="Processes holding /dev/nvidia* stay in uninterruptible sleep (D state) across scans while "
                    "they wait on storage — their wait channel is NFS/SunRPC, block I/O or a network or parallel "
                    "file system's client: the GPU and its driver are fine, the job cannot read or write its data.",
        remedy="find the volume they wait on (`cat /proc/<pid>/stack`, `nfs: server … not responding` in the kernel "
               "log) and bring the storage or the network path to it back; the jobs resume when it answers — do "
               "not reset the GPU or reboot for it"),
    node_rule(
        slug="gpu_d_state", title="Processes stuck in the GPU driver", step=TriageStep.PLATFORM_HARDWARE,
        layer=Layer.GPU_DRIVER, severity=Severity.CRITICAL, duration_s=120, clear_hold_s=60,
        check=_gpu_d_state,
        description="Processes holding /dev/nvidia* stay in uninterruptible sleep (D state) across scans: they "
                    "wait inside the driver and cannot be killed; the GPU will not be usable again without a "
                    "reset or reboot.",
        remedy="collect `cat /proc/<pid>/stack` and the kernel log (hung-task and Xid lines), run "
               "nvidia-bug-report.sh, then drain and reboot the node (a GPU reset fails while they hold it)"),
]
