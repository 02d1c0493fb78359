"""Step 1 — visibility: NVML initialises, every expected GPU is there and matches the baseline."""

from django.db.models import Q

from fleet.core.i18n import Msg
from fleet.inventory.choices import Layer
from fleet.inventory.models import GPU
from fleet.inventory.selectors import expected_gpu_count
from fleet.telemetry.choices import EventKind, NvmlStatus

from ..choices import Severity, TriageStep
from .base import Observation, Param, gpu_subject, node_rule

_NVML_PROBLEMS = {
    NvmlStatus.LIBRARY_NOT_FOUND: (
        Msg("the NVML library (libnvidia-ml.so.1) is missing"), Layer.GPU_DRIVER,
        Msg("install the NVIDIA driver (it ships libnvidia-ml) or fix the library path of the agent")),
    NvmlStatus.DRIVER_NOT_LOADED: (
        Msg("the NVIDIA kernel driver is not loaded"), Layer.GPU_DRIVER,
        Msg("load the driver: check the kernel log for NVRM errors, a DKMS module not rebuilt after a kernel "
            "upgrade, or Secure Boot rejecting the module")),
    NvmlStatus.NO_PERMISSION: (
        Msg("the agent may not open the GPU devices"), Layer.HOST_OS,
        Msg("give the agent access to /dev/nvidia* (run it as root or in the video group)")),
    NvmlStatus.ERROR: (
        Msg("NVML failed to initialise"), Layer.GPU_DRIVER,
        Msg("run nvidia-smi on the node and read the kernel log; reinstall the driver if nvidia-smi fails too")),
}


def _nvml_unavailable(node, params, ctx):
    if node.status is None:
        return None
    nvml = node.status.get("nvml_status") or NvmlStatus.OK
    if nvml == NvmlStatus.OK:
        return []
    what, layer, remedy = _NVML_PROBLEMS.get(nvml, _NVML_PROBLEMS[NvmlStatus.ERROR])
    message = node.status.get("nvml_message") or ""
    summary = Msg("NVML unavailable: {what} ({message})", what=what, message=message[:400]) if message else \
        Msg("NVML unavailable: {what}", what=what)
    return [Observation(summary=summary, layer=layer, remedy=remedy,
                        values={"nvml_status": nvml, "nvml_message": message})]


def _gpu_count_low(node, params, ctx):
    expected = expected_gpu_count(declared=node.expected_gpu_count, baseline=(node.baseline or {}).get("gpu_count"),
                                  pool=node.pool_gpus_per_node)
    if not expected or not node.nvml_ok:
        return None
    seen = node.status.get("gpu_count_seen")
    if seen is None and node.gpu_summary is not None:
        seen = node.gpu_summary["count"] - node.gpu_summary["lost_count"]
    if seen is None:
        return None
    if seen >= expected:
        return []
    # With the agent's PCI view: GPUs on the bus but not in NVML are gpu_missing_from_nvml's (a driver fault).
    on_bus = ((node.status.get("fabric") or {}).get("pci") or {}).get("gpus")
    if on_bus is not None and on_bus >= expected:
        return []
    values = {"gpu_count_seen": seen, "expected_gpu_count": expected}
    where = ""
    if on_bus is not None:
        values["pci_gpu_count"] = on_bus
        where = Msg("; {on_bus} on the PCI bus — the missing GPU(s) are gone from the bus", on_bus=on_bus)
    return [Observation(summary=Msg("{seen} of {expected} GPUs visible{where}", seen=seen, expected=expected,
                                    where=where), values=values)]


def _gpu_lost(node, params, ctx):
    """Lost in the latest report, or a `gpu_lost` event in the window (the report may not have caught up)."""
    if not (node.events or (node.status or {}).get("lost_gpus") or any(row.get("lost") for row in node.candidate_gpus)):
        return None if node.status is None else []  # nothing lost (the common case, decided without the walk below)
    window_start = ctx.now.timestamp() - params["window_s"]
    lost: dict[str, Observation] = {}

    def add(subject, identity, bus_id, source, at=None, line=None):
        observation = lost.get(subject)
        if observation is None:
            label = f"GPU {identity.index}" if identity else (
                Msg("GPU at {bus}", bus=GPU.normalize_bus_id(bus_id)) if bus_id else Msg("an unidentified GPU"))
            observation = lost[subject] = Observation(
                summary=Msg("{gpu} is lost (fallen off the bus or not responding)", gpu=label), subject=subject,
                gpu_id=identity.id if identity else None,
                values={"gpu_index": identity.index if identity else None,
                        "gpu_uuid": identity.uuid if identity else None,
                        "pci_bus_id": (identity.pci_bus_id if identity else bus_id) or None, "sources": []})
        if source not in observation.values["sources"]:
            observation.values["sources"].append(source)
        if at is not None and (observation.since is None or at < observation.since):
            observation.since = at
        if line:
            observation.log_lines.append(line)

    for row in node.candidate_gpus:
        if row.get("lost"):
            add(gpu_subject(row["gpu_id"]), node.gpus.get(row["gpu_id"]), row.get("gpu_pci_bus_id"), "gpu_status")
    for bus_id in (node.status or {}).get("lost_gpus") or []:
        subject, identity = node.gpu_ref(None, bus_id)
        add(subject, identity, bus_id, "visibility.lost_gpus")
    for event in node.events_of(EventKind.GPU_LOST):
        if event.at.timestamp() >= window_start:
            subject, identity = node.gpu_ref(event.gpu_id, event.pci_bus_id)
            add(subject, identity, event.pci_bus_id, "kernel_log", event.at, event.log_line())
    if node.status is None and not lost:
        return None
    return list(lost.values())


def _baseline_mismatch(node, params, ctx):
    baseline = node.baseline or {}
    expected_model = baseline.get("gpu_model") or node.expected_gpu_model
    expected_memory = baseline.get("gpu_memory_bytes")
    if not expected_model and not expected_memory:
        return []
    if not node.gpu_kinds:
        return None
    tolerance = params["memory_tolerance_pct"] / 100.0
    wrong = []
    for model, memory, _cc, count in node.gpu_kinds:
        problems = []
        if expected_model and model and model != expected_model:
            problems.append(f"model {model}")
        if expected_memory and memory and abs(memory - expected_memory) > expected_memory * tolerance:
            problems.append(f"{memory / 2**30:.1f} GiB")
        if problems:
            wrong.append({"count": count, "model": model, "memory_total_bytes": memory, "problems": problems})
    if not wrong:
        return []
    total = sum(item["count"] for item in wrong)
    described = "; ".join(f"{item['count']}× {', '.join(item['problems'])}" for item in wrong)
    expected = ", ".join(filter(None, [expected_model,
                                       f"{expected_memory / 2**30:.1f} GiB" if expected_memory else ""]))
    return [Observation(
        summary=Msg("{total} GPU(s) differ from the baseline ({described}); expected {expected}", total=total,
                    described=described[:300], expected=expected),
        values={"expected_model": expected_model or None, "expected_memory_bytes": expected_memory,
                "mismatched": wrong})]


def _node_silent(node, params, ctx):
    if node.is_spot or node.status is None:
        return None if node.status is None else []
    if not node.status.get("silent"):
        return []
    since = node.status.get("silent_since") or node.status.get("received_at")
    return [Observation(
        summary=Msg("No report since {at} UTC — the agent, the OS or the network of the node is down",
                    at=f"{node.status['received_at']:%Y-%m-%d %H:%M:%S}"),
        since=since, values={"last_report_at": node.status["received_at"].isoformat(),
                             "silent_since": since.isoformat() if since else None})]


RULES = [
    node_rule(
        slug="nvml_unavailable", title="NVML unavailable", step=TriageStep.VISIBILITY, layer=Layer.GPU_DRIVER,
        severity=Severity.CRITICAL, duration_s=30, clear_hold_s=60, check=_nvml_unavailable,
        description="The agent cannot initialise NVML: library missing, driver not loaded, no permission.",
        remedy="check the driver installation"),
    node_rule(
        slug="gpu_count_low", title="Fewer GPUs than expected", step=TriageStep.VISIBILITY, layer=Layer.HARDWARE,
        severity=Severity.CRITICAL, duration_s=30, clear_hold_s=60, check=_gpu_count_low, needs_nvml=True,
        description="NVML sees fewer GPUs than the node, its baseline or its pool expects.",
        remedy="check that every GPU is seated and powered (or passed through to the VM), then reboot once"),
    node_rule(
        slug="gpu_lost", title="GPU lost", step=TriageStep.VISIBILITY, layer=Layer.HARDWARE,
        severity=Severity.CRITICAL, duration_s=0, clear_hold_s=120, check=_gpu_lost,
        gpu_candidates=lambda params: Q(lost=True),
        params=(Param("window_s", "integer", 300, "How long a gpu_lost kernel-log event keeps the GPU lost "
                      "if later reports do not say so", minimum=0, maximum=86400),),
        description="A GPU fell off the bus or stopped responding (NVML GpuIsLost, kernel log).",
        remedy="reboot the machine; if it repeats, the GPU or its slot is faulty"),
    node_rule(
        slug="gpu_baseline_mismatch", title="GPU model or memory differs from the baseline",
        step=TriageStep.VISIBILITY, layer=Layer.HARDWARE, severity=Severity.WARNING, duration_s=60,
        clear_hold_s=60, check=_baseline_mismatch,
        params=(Param("memory_tolerance_pct", "number", 1.0, "Allowed difference of total GPU memory",
                      minimum=0, maximum=50),),
        description="The GPUs present are not the model or memory size the baseline (or node) pins.",
        remedy="confirm the instance type or server model that was delivered and ask for the right one"),
    node_rule(
        slug="node_silent", title="Node silent", step=TriageStep.VISIBILITY, layer=Layer.HOST_OS,
        severity=Severity.CRITICAL, duration_s=60, clear_hold_s=60, check=_node_silent, needs_report=False,
        description="An on-demand or reserved node stopped reporting (spot nodes have their own rule).",
        remedy="check that the node is up and the agent runs (systemctl status fleet-agent), then its network"),
]
