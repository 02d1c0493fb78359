"""Step 3 — capacity & data path: memory pressure, residual processes, input-bound GPUs, disk and network."""

from django.db.models import F, Q

from fleet.core.i18n import Join, Msg
from fleet.inventory.choices import Layer

from ..choices import Severity, TriageStep
from .base import Observation, Param, gpu_label, gpu_rule, node_rule

GIB = 2**30


def _memory_candidates(params) -> Q:
    return Q(memory_used_bytes__gt=F("memory_total_bytes") * (params["threshold_pct"] / 100.0))


def _memory_pressure(row, node, params):
    used, total = row.get("memory_used_bytes"), row.get("memory_total_bytes")
    if used is None or not total:
        return None
    used_pct = 100.0 * used / total
    if used_pct <= params["threshold_pct"]:
        return None
    return Observation(
        summary=Msg("{gpu} memory {used_pct:.1f} % used ({used_gib:.1f} of {total_gib:.1f} GiB; "
                    "threshold {threshold_pct:g} %) — out-of-memory risk", gpu=gpu_label(row), used_pct=used_pct,
                    used_gib=used / GIB, total_gib=total / GIB, threshold_pct=params["threshold_pct"]),
        values={"memory_used_bytes": used, "memory_total_bytes": total, "memory_used_pct": round(used_pct, 2),
                "threshold_pct": params["threshold_pct"]})


def _residual_candidates(params) -> Q:
    return Q(process_count__gt=0, process_memory_bytes__gte=params["min_memory_mib"] * 2**20,
             utilization_gpu_pct__lte=params["max_utilization_pct"])


def _residual_processes(row, node, params):
    count, memory, util = row.get("process_count") or 0, row.get("process_memory_bytes") or 0, \
        row.get("utilization_gpu_pct")
    if count <= 0 or util is None or util > params["max_utilization_pct"]:
        return None
    if memory < params["min_memory_mib"] * 2**20:
        return None
    pids = [p.get("pid") for p in row.get("processes") or [] if isinstance(p, dict)]
    shown = ", ".join(str(pid) for pid in pids[:8]) + (" …" if len(pids) > 8 else "")
    return Observation(
        summary=(Msg("{gpu}: {count} process(es) hold {memory_gib:.1f} GiB at {util:.0f} % utilisation (pids {pids})",
                     gpu=gpu_label(row), count=count, memory_gib=memory / GIB, util=util, pids=shown) if shown else
                 Msg("{gpu}: {count} process(es) hold {memory_gib:.1f} GiB at {util:.0f} % utilisation",
                     gpu=gpu_label(row), count=count, memory_gib=memory / GIB, util=util)),
        values={"process_count": count, "process_memory_bytes": memory, "utilization_gpu_pct": util,
                "processes": (row.get("processes") or [])[:16]})


def _pipeline_bottleneck(node, params, ctx):
    status = node.status
    cpu = status.get("cpu_busy_pct") if status else None
    if cpu is None:
        return None
    if cpu <= params["cpu_busy_pct"]:
        return []  # decided without the GPU aggregate, which is only loaded for CPU-saturated nodes
    util = (node.gpu_summary or {}).get("util_avg")
    if util is None:
        return None
    if util >= params["gpu_util_pct"]:
        return []
    return [Observation(
        summary=Msg("GPUs average {util:.0f} % busy while the CPU is {cpu:.0f} % busy — the input pipeline "
                    "(data loading, preprocessing) is the bottleneck, not the GPU", util=util, cpu=cpu),
        values={"gpu_util_avg_pct": round(util, 1), "cpu_busy_pct": cpu, "load1": status.get("load1"),
                "thresholds": {"gpu_util_pct": params["gpu_util_pct"], "cpu_busy_pct": params["cpu_busy_pct"]}})]


def _disk_io_wait(node, params, ctx):
    status = node.status
    if status is None:
        return None
    iowait, await_ms = status.get("cpu_iowait_pct"), status.get("disk_await_ms_max")
    if iowait is None and await_ms is None:
        return None
    reasons = []
    if iowait is not None and iowait > params["iowait_pct"]:
        reasons.append(Msg("CPU I/O wait {iowait:.1f} % (threshold {threshold:g} %)", iowait=iowait,
                           threshold=params["iowait_pct"]))
    if await_ms is not None and await_ms > params["await_ms"]:
        reasons.append(Msg("disk await {await_ms:.0f} ms (threshold {threshold:g} ms)", await_ms=await_ms,
                           threshold=params["await_ms"]))
    if not reasons:
        return []
    return [Observation(summary=Msg("High disk I/O wait: {reasons}", reasons=Join(reasons)),
                        values={"cpu_iowait_pct": iowait, "disk_await_ms_max": await_ms,
                                "disk_util_pct_max": status.get("disk_util_pct_max")})]


def _tcp_retransmits(node, params, ctx):
    status = node.status
    if status is None or status.get("tcp_retrans_pct") is None:
        return None
    retrans = status["tcp_retrans_pct"]
    if retrans <= params["threshold_pct"]:
        return []
    return [Observation(
        summary=Msg("TCP retransmits {retrans:.2f} % of sent segments (threshold {threshold_pct:g} %)",
                    retrans=retrans, threshold_pct=params["threshold_pct"]),
        values={"tcp_retrans_pct": retrans, "threshold_pct": params["threshold_pct"]})]


RULES = [
    gpu_rule(
        slug="gpu_memory_pressure", title="GPU memory nearly full", step=TriageStep.CAPACITY,
        layer=Layer.APPLICATION, severity=Severity.WARNING, duration_s=300, clear_hold_s=120,
        check_gpu=_memory_pressure, gpu_candidates=_memory_candidates, needs_nvml=True,
        params=(Param("threshold_pct", "number", 95.0, "Used share of GPU memory", minimum=1, maximum=100),),
        description="GPU memory stays above the threshold: the next allocation may fail with out-of-memory.",
        remedy="lower the batch size or activation memory, or enable gradient checkpointing"),
    gpu_rule(
        slug="residual_gpu_processes", title="Residual processes hold GPU memory",
        step=TriageStep.CAPACITY, layer=Layer.APPLICATION, severity=Severity.WARNING, duration_s=600,
        clear_hold_s=60, check_gpu=_residual_processes, gpu_candidates=_residual_candidates, needs_nvml=True,
        params=(Param("max_utilization_pct", "number", 0.0, "Utilisation at or below which the GPU counts as idle",
                      minimum=0, maximum=100),
                Param("min_memory_mib", "integer", 256, "Memory the processes must hold", minimum=0)),
        description="Processes keep GPU memory while the GPU does nothing (leftovers of a crashed or hung job).",
        remedy="find the leftover processes (nvidia-smi, the pids in the evidence) and stop them"),
    node_rule(
        slug="data_pipeline_bottleneck", title="GPUs starved by the CPU (data pipeline)",
        step=TriageStep.CAPACITY, layer=Layer.APPLICATION, severity=Severity.WARNING, duration_s=300,
        clear_hold_s=120, check=_pipeline_bottleneck, needs_nvml=True,
        params=(Param("gpu_util_pct", "number", 30.0, "Average GPU utilisation below which GPUs count as starved",
                      minimum=0, maximum=100),
                Param("cpu_busy_pct", "number", 90.0, "CPU busy share above which the CPU counts as saturated",
                      minimum=0, maximum=100)),
        description="Low GPU utilisation while the CPU is saturated: the input pipeline limits the job.",
        remedy="add data-loader workers, move preprocessing to the GPU, or cache the decoded dataset"),
    node_rule(
        slug="disk_io_wait", title="High disk I/O wait", step=TriageStep.CAPACITY, layer=Layer.HOST_OS,
        severity=Severity.WARNING, duration_s=300, clear_hold_s=120, check=_disk_io_wait,
        params=(Param("iowait_pct", "number", 20.0, "CPU time waiting for I/O", minimum=0, maximum=100),
                Param("await_ms", "number", 200.0, "Average request latency of the slowest disk", minimum=0)),
        description="The CPU waits on storage, or a disk answers slowly: data loading or checkpoints stall.",
        remedy="find the busy disk (evidence), move datasets to local NVMe or a faster volume"),
    node_rule(
        slug="tcp_retransmits", title="TCP retransmits high", step=TriageStep.CAPACITY, layer=Layer.HOST_OS,
        severity=Severity.WARNING, duration_s=300, clear_hold_s=120, check=_tcp_retransmits,
        params=(Param("threshold_pct", "number", 1.0, "Retransmitted share of sent TCP segments",
                      minimum=0, maximum=100),),
        description="Many TCP segments are retransmitted: packet loss on the path to storage or other nodes.",
        remedy="check the NIC counters, MTU and the path to the storage or peer nodes"),
]
