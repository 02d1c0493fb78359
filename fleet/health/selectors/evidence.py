"""Evidence bundles: what a provider's support desk asks for, per finding or per node, as JSON-ready data.

Timestamps, the GPU table, an nvidia-smi-like snapshot, the relevant kernel-log lines, stack versions with
drift from the baseline, recent changes, and the responsibility boundary. `evidence_text` renders the same
bundle as plain text.
"""

from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from fleet.inventory.choices import BASELINE_STACK_FIELDS, STACK_FIELDS
from fleet.inventory.models import GPU, Node
from fleet.inventory.selectors import node_boundary, node_drift
from fleet.telemetry.choices import EventKind
from fleet.telemetry.models import ChangeLogEntry, Event, GPUStatus, NodeStatus

from ..choices import FindingState
from ..models import Finding
from ..texts import catalogue_text, evidence_rendered, finding_action, finding_summary

KERNEL_LOG_KINDS = [EventKind.XID, EventKind.SXID, EventKind.AER, EventKind.GPU_LOST, EventKind.PREEMPTION_NOTICE,
                    EventKind.MAINTENANCE, EventKind.REBALANCE]
NODE_LOG_WINDOW = timedelta(hours=24)
FINDING_LOG_LEAD = timedelta(hours=1)
CHANGES_WINDOW = timedelta(days=30)
MAX_LOG_LINES = 200
MAX_CHANGES = 50

_STATUS_FIELDS = ["received_at", "collected_at", "sequence", "agent_version", "interval_s", "silent", "silent_since",
                  "nvml_status", "nvml_message", "gpu_count_seen", "lost_gpus", "cpu_busy_pct", "cpu_steal_pct",
                  "cpu_iowait_pct", "mem_total_bytes", "mem_available_bytes", "load1", "disk_await_ms_max",
                  "disk_util_pct_max", "tcp_retrans_pct", "notice_kind", "notice_deadline", "checkpoint_age_s",
                  "checkpoint", "cloud", "system"]
_GPU_STATUS_FIELDS = ["collected_at", "lost", "utilization_gpu_pct", "utilization_memory_pct", "memory_used_bytes",
                      "memory_total_bytes", "temperature_c", "power_draw_w", "power_limit_w", "sm_clock_mhz",
                      "clock_event_reasons", "ecc_volatile_corrected", "ecc_volatile_uncorrected",
                      "ecc_aggregate_corrected", "ecc_aggregate_uncorrected", "retired_pages_count",
                      "retired_pages_pending", "remapped_rows_correctable", "remapped_rows_uncorrectable",
                      "remapped_rows_pending", "remapped_rows_failure", "pcie_gen_current", "pcie_gen_max",
                      "pcie_width_current", "pcie_width_max", "process_count", "process_memory_bytes", "processes"]
_STACK_FIELDS = ["collected_at", *STACK_FIELDS]


def finding_payload(finding: Finding) -> dict:
    return {
        "id": finding.pk, "rule": finding.rule.slug, "rule_title": catalogue_text(finding.rule.title),
        "state": finding.state, "step": finding.step, "layer": finding.layer, "severity": finding.severity,
        "summary": finding_summary(finding),
        "subject": finding.subject, "gpu_index": finding.gpu.index if finding.gpu else None,
        "responsible_party": finding.responsible_party, "responsibility_source": finding.responsibility_source,
        "action_kind": finding.action_kind, "recommended_action": finding_action(finding),
        "xid_policy_version": finding.xid_policy_version, "first_seen": finding.first_seen,
        "opened_at": finding.opened_at, "last_seen": finding.last_seen, "resolved_at": finding.resolved_at,
        "resolution": finding.resolution, "evidence": evidence_rendered(finding.evidence),
    }


def _node_payload(node: Node) -> dict:
    return {
        "id": node.pk, "hostname": node.hostname, "provider": node.provider.name,
        "provider_support_contact": node.provider.support_contact, "cloud": node.provider.cloud or None,
        "site": node.site.name if node.site else None, "region": node.site.region_code if node.site else None,
        "pool": node.pool.name if node.pool else None, "delivery_form": node.delivery_form,
        "billing_mode": node.billing_mode, "state": node.state, "instance_id": node.instance_id,
        "instance_type": node.instance_type, "machine_id": node.machine_id, "labels": node.labels,
        "expected_gpu_count": node.expected_gpu_count, "expected_gpu_model": node.expected_gpu_model,
    }


def _gpu_table(node: Node) -> list[dict]:
    statuses = {s["gpu_id"]: s for s in GPUStatus.objects.filter(node=node).values("gpu_id", *_GPU_STATUS_FIELDS)}
    table = []
    for gpu in GPU.objects.filter(node=node).order_by("index"):
        row = {"index": gpu.index, "uuid": gpu.uuid, "serial": gpu.serial, "pci_bus_id": gpu.pci_bus_id,
               "model": gpu.model, "memory_total_bytes": gpu.memory_total_bytes,
               "compute_capability": gpu.compute_capability, "present": gpu.present}
        status = statuses.get(gpu.pk)
        row["status"] = {k: v for k, v in status.items() if k != "gpu_id"} if status else None
        table.append(row)
    return table


def _kernel_log(node: Node, *, since: datetime, until: datetime, gpu_id: int | None = None) -> list[dict]:
    events = Event.objects.filter(node=node, kind__in=KERNEL_LOG_KINDS, at__gte=since, at__lte=until)
    if gpu_id is not None:
        events = events.filter(Q(gpu_id=gpu_id) | Q(gpu__isnull=True))
    rows = events.select_related("gpu").order_by("-at", "-id")[:MAX_LOG_LINES]
    return [{"at": e.at, "kind": e.kind, "code": e.code, "severity": e.severity,
             "gpu_index": e.gpu.index if e.gpu else None, "pci_bus_id": e.pci_bus_id or None,
             "line": e.raw or e.message} for e in reversed(list(rows))]


def _stack(node: Node) -> dict:
    stack = node.current_stack
    drift = node_drift(node=node)
    baseline = drift["baseline"]
    return {
        "current": {name: getattr(stack, name) for name in _STACK_FIELDS} if stack else None,
        "baseline": ({"name": baseline.name, **{name: getattr(baseline, name) for name in BASELINE_STACK_FIELDS},
                      "gpu_model": baseline.gpu_model, "gpu_memory_bytes": baseline.gpu_memory_bytes,
                      "gpu_count": baseline.gpu_count} if baseline else None),
        "drift": drift["drift"],
    }


def _changes(node: Node, since: datetime) -> list[dict]:
    rows = ChangeLogEntry.objects.filter(node=node, at__gte=since).order_by("-at", "-id")[:MAX_CHANGES]
    return [{"at": c.at, "field": c.field, "old": c.old, "new": c.new, "summary": c.summary} for c in rows]


def _bundle(node: Node, now: datetime, *, log_since: datetime, log_until: datetime,
            gpu_id: int | None = None) -> dict:
    node = Node.objects.select_related("provider", "site", "pool", "current_stack").get(pk=node.pk)
    status = NodeStatus.objects.filter(node=node).values(*_STATUS_FIELDS).first()
    gpus = _gpu_table(node)
    stack = _stack(node)
    return {
        "generated_at": now,
        "node": _node_payload(node),
        "boundary": [cell.as_dict() for cell in node_boundary(node=node)],
        "status": status,
        "gpus": gpus,
        "nvidia_smi": nvidia_smi_snapshot(gpus, stack["current"], status),
        "kernel_log": _kernel_log(node, since=log_since, until=log_until, gpu_id=gpu_id),
        "stack": stack,
        "changes": _changes(node, now - CHANGES_WINDOW),
    }


def finding_evidence(*, finding: Finding, now: datetime | None = None) -> dict:
    """Everything behind one finding, with the kernel log around its lifetime (its GPU's lines and node-wide ones)."""
    now = now or timezone.now()
    until = finding.resolved_at or now
    bundle = {"kind": "finding", "finding": finding_payload(finding)}
    bundle.update(_bundle(finding.node, now, log_since=finding.first_seen - FINDING_LOG_LEAD, log_until=until,
                          gpu_id=finding.gpu_id))
    return bundle


def node_evidence(*, node: Node, now: datetime | None = None) -> dict:
    """A node's full bundle: open findings, the last 24 h of kernel log, stack, GPUs and changes."""
    now = now or timezone.now()
    findings = (Finding.objects.filter(node=node, state=FindingState.OPEN).select_related("rule", "gpu")
                .order_by("step", "-opened_at"))
    bundle = {"kind": "node", "findings": [finding_payload(f) for f in findings]}
    bundle.update(_bundle(node, now, log_since=now - NODE_LOG_WINDOW, log_until=now))
    return bundle


def _mib(value) -> str:
    return "?" if value is None else f"{value // 2**20}MiB"


_WIDTHS = (41, 24, 22)
_BAR = "+" + "+".join("-" * w for w in _WIDTHS) + "+"


def _row(*cells: str) -> str:
    return "|" + "|".join(f" {cell}"[:w].ljust(w) for cell, w in zip(cells, _WIDTHS, strict=True)) + "|"


def nvidia_smi_snapshot(gpus: list[dict], stack: dict | None, status: dict | None) -> str:
    """A text table shaped like `nvidia-smi`'s, rebuilt from the latest report."""
    driver = (stack or {}).get("driver_version") or "?"
    cuda = (stack or {}).get("cuda_driver_version") or "?"
    at = status["collected_at"].strftime("%a %b %d %H:%M:%S %Y UTC") if status and status.get("collected_at") \
        else "no report"
    header = f" NVIDIA-SMI (rebuilt from the last report)  Driver Version: {driver}  CUDA Version: {cuda}"
    lines = [at, _BAR, "|" + header[:len(_BAR) - 3].ljust(len(_BAR) - 3) + " |", _BAR,
             _row("GPU  Name", "Bus-Id", "Volatile Uncorr. ECC"),
             _row("Temp  Pwr:Usage/Cap  Throttle", "Memory-Usage", "GPU-Util  PCIe"),
             _BAR.replace("-", "=")]
    processes = []
    for gpu in gpus:
        row = gpu.get("status") or {}
        if row.get("lost"):
            lines += [_row(f"{gpu['index']:>3}  {gpu['model']}", gpu["pci_bus_id"], "ERR! GPU is lost"), _BAR]
            continue
        ecc = row.get("ecc_volatile_uncorrected")
        temp, power, cap = row.get("temperature_c"), row.get("power_draw_w"), row.get("power_limit_w")
        util = row.get("utilization_gpu_pct")
        reasons = ",".join(r for r in row.get("clock_event_reasons") or [] if r != "GpuIdle") or "-"
        pcie = (f"Gen{row.get('pcie_gen_current')} x{row.get('pcie_width_current')}"
                if row.get("pcie_gen_current") is not None else "")
        lines.append(_row(f"{gpu['index']:>3}  {gpu['model']}", gpu["pci_bus_id"],
                          f"{'N/A' if ecc is None else ecc:>20}"))
        lines.append(_row(
            f"{'N/A' if temp is None else f'{temp:.0f}C':>4}  "
            f"{'N/A' if power is None else f'{power:.0f}W / {cap or 0:.0f}W':<15} {reasons}",
            f"{_mib(row.get('memory_used_bytes'))} / {_mib(row.get('memory_total_bytes'))}".rjust(22),
            f"{'N/A' if util is None else f'{util:.0f}%':>8}  {pcie}"))
        lines.append(_BAR)
        for process in row.get("processes") or []:
            if isinstance(process, dict):
                processes.append((gpu["index"], process.get("pid"), process.get("name") or "?",
                                  process.get("used_memory_bytes")))
    lines += ["", "Processes:", "  GPU   PID       Process name                       GPU Memory"]
    if processes:
        lines += [f"  {g:>3}   {pid!s:<9} {name[:34]:<34} {_mib(mem)}" for g, pid, name, mem in processes]
    else:
        lines.append("  No running processes found")
    return "\n".join(lines)
