"""Bulk loading of everything the rules read, in a constant number of queries whatever the fleet size.

Per call: nodes (with pool and current stack joined), node status, a per-node GPU aggregate, the distinct GPU
kinds per node, GPU status rows that match some rule's prefilter, baselines, actionable events of the short window,
Xid occurrences and reboots of the long window, and the identities of GPUs named by events. Nothing here is
per node.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import orjson
from django.db.models import Avg, Case, Count, F, Func, Max, Q, TextField, When
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast
from django.db.models.lookups import IsNull

from fleet.billing.selectors import checkpoint_max_age, checkpoint_policies_by_pool
from fleet.inventory.choices import BASELINE_STACK_FIELDS, STACK_FIELDS, STACK_LIST_FIELDS
from fleet.inventory.models import GPU, Node
from fleet.inventory.selectors import node_baselines
from fleet.telemetry.choices import ACTIONABLE_EVENT_KINDS, EventKind
from fleet.telemetry.models import ChangeLogEntry, Event, GPUStatus, NodeStatus

from ..rules.facts import EventFact, GpuIdentity, NodeFacts, XidOccurrence

# ChangeLogEntry fields that mark a reboot: ingestion logs `boot_id` when the agent's boot id changes, and
# remediation logs `reboot` when it reboots a node.
REBOOT_CHANGE_FIELDS = ["boot_id", "reboot"]
# ChangeLogEntry fields that record a disruption we asked for (remediation writes them when its reboot or stack
# rollback step starts; the reboot itself is counted when the new boot id arrives), read in the same query.
REQUESTED_CHANGE_FIELDS = ["reboot_requested", "driver_change"]

NODE_STATUS_FIELDS = [
    "node_id", "received_at", "interval_s", "silent", "silent_since", "nvml_status", "nvml_message",
    "gpu_count_seen", "cpu_busy_pct", "cpu_steal_pct", "cpu_iowait_pct", "load1", "disk_await_ms_max",
    "disk_util_pct_max", "tcp_retrans_pct", "notice_kind", "notice_deadline", "checkpoint_age_s",
    "mem_total_bytes", "mem_available_bytes",
]
NODE_STATUS_JSON_FIELDS = ["lost_gpus", "checkpoint"]
# What the host rules (rules/host.py) read of the stored `system` section (which also holds per-disk rates and
# more). The section is read whole, as one text, and these keys kept: on PostgreSQL every `system ->> key`
# decompresses the whole value again, so a dozen keys cost twice the one text (docs/performance.md).
SYSTEM_SCALAR_KEYS = ["swap_in_pages_per_s", "swap_out_pages_per_s", "swap_total_bytes", "swap_free_bytes",
                      "oom_kills"]
SYSTEM_JSON_KEYS = ["volumes", "gpu_d_state", "peermem", "clock"]
GPU_STATUS_FIELDS = [
    "gpu_id", "node_id", "collected_at", "lost", "utilization_gpu_pct", "memory_used_bytes", "memory_total_bytes",
    "temperature_c", "power_draw_w", "power_limit_w", "sm_clock_mhz", "clock_event_reasons_mask",
    "clock_event_reasons", "ecc_volatile_uncorrected", "ecc_aggregate_uncorrected", "retired_pages_count",
    "retired_pages_pending", "remapped_rows_correctable", "remapped_rows_uncorrectable", "remapped_rows_pending",
    "remapped_rows_failure", "pcie_gen_current", "pcie_gen_max", "pcie_width_current", "pcie_width_max",
    "process_count", "process_memory_bytes", "processes",
]
BASELINE_FIELDS = ["id", "name", "pool_id", "node_id", *BASELINE_STACK_FIELDS, "gpu_model", "gpu_memory_bytes",
                   "gpu_count", "mig_mode", "gsp_firmware_version", "ib_port_count", "ib_rate_gbps"]
_NODE_FIELDS = ["id", "hostname", "provider_id", "pool_id", "delivery_form", "billing_mode", "state",
                "expected_gpu_count", "expected_gpu_model", "pool__gpus_per_node", "pool__gpu_model",
                "current_stack_id", "site_id", "site__name", "pool__site_id", "pool__site__name"]


@dataclass(frozen=True)
class FactWindows:
    """How far back events are read: with log text (short) and as bare occurrences for escalation (long)."""

    events_s: int
    history_s: int
    diag_s: int = 0  # DCGM diagnostic runs: a failed test stands until a later run at its level passes it


def _scoped(queryset, node_ids: list[int] | None, field: str = "node_id"):
    return queryset if node_ids is None else queryset.filter(**{f"{field}__in": node_ids})


class _JsonCache:
    """JSON columns read as text and decoded once per distinct value: across a fleet most stacks, lost-GPU lists
    and checkpoint sections are identical, so 10,000 rows decode a handful of strings. The decoded values are
    shared between nodes and must not be mutated."""

    def __init__(self):
        self._cache: dict[str, object] = {}

    def __call__(self, text):
        if not isinstance(text, str):  # None, or a backend that decoded it already
            return text
        value = self._cache.get(text)
        if value is None:
            value = self._cache[text] = self.once(text)
        return value

    @staticmethod
    def once(text):
        """Decode a value no other row shares (not kept)."""
        if not isinstance(text, str):
            return text
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:  # text orjson refuses and json takes (escaped lone surrogates)
            return json.loads(text)


def _as_text(field: str):
    return Cast(field, TextField())


def facts_load(*, node_ids: list[int] | None, now: datetime, windows: FactWindows, gpu_filter: Q | None,
               gpu_annotations: dict[str, tuple[str, int]] | None = None,
               needs_gpu_summary: Callable[[NodeFacts], bool] | None = None) -> dict[int, NodeFacts]:
    """Facts for the given nodes (every node when `node_ids` is None), keyed by node id.

    `gpu_filter` selects the GPU status rows some rule may find true (with `gpu_annotations` for bit masks);
    `needs_gpu_summary` says for which nodes the per-node GPU aggregate is needed (default: all).
    """
    facts: dict[int, NodeFacts] = {}
    decode = _JsonCache()
    stacks: dict[tuple, tuple[int, dict]] = {}  # stack content as read -> (its key, the decoded stack), once each
    stack_columns = {f"stack_{name}": _as_text(f"current_stack__{name}") if name in STACK_LIST_FIELDS
                     else F(f"current_stack__{name}") for name in STACK_FIELDS}
    nodes = _scoped(Node.objects.order_by(), node_ids, "pk").annotate(**stack_columns)
    for row in nodes.values_list(*_NODE_FIELDS, *stack_columns):
        (node_id, hostname, provider_id, pool_id, delivery_form, billing_mode, state, expected_count,
         expected_model, pool_gpus, pool_model, stack_id, site_id, site_name, pool_site_id, pool_site_name) = row[:16]
        node = NodeFacts(id=node_id, hostname=hostname, provider_id=provider_id, pool_id=pool_id,
                         delivery_form=delivery_form, billing_mode=billing_mode, state=state,
                         expected_gpu_count=expected_count, expected_gpu_model=expected_model,
                         pool_gpus_per_node=pool_gpus, pool_gpu_model=pool_model or "",
                         site_id=site_id if site_id is not None else pool_site_id,
                         site_name=(site_name if site_id is not None else pool_site_name) or "")
        if stack_id is not None:
            content = row[16:]
            known = stacks.get(content)
            if known is None:
                known = stacks[content] = (len(stacks), {
                    name: decode(value) if name in STACK_LIST_FIELDS else value
                    for name, value in zip(STACK_FIELDS, content, strict=True)})
            node.stack_key, node.stack = known
        facts[node_id] = node
    if not facts:
        return facts

    json_columns = {f"{name}_text": _as_text(name) for name in NODE_STATUS_JSON_FIELDS}
    json_columns["fabric_text"] = _FirstOfKey("fabric", "fabric_key")
    json_columns["system_text"] = _system_text()
    # When the report carrying a notice was taken (node clock); read only for the few nodes with a notice.
    notice_at = Case(When(~Q(notice_kind=""), then=F("collected_at")), default=None)
    # Likewise for the few nodes that report an OOM kill (the host rule measures its age from the report's time).
    # (The key as text is SQL NULL both when it is absent and when it is JSON null.)
    oom_reported_at = Case(When(IsNull(KeyTextTransform("oom_kill_last_at", "system"), False),
                                then=F("collected_at")), default=None)
    statuses = _scoped(NodeStatus.objects.order_by(), node_ids).annotate(
        **json_columns, notice_reported_at=notice_at, collected_at_oom=oom_reported_at)
    fabrics: dict[str, object] = {}  # content key -> the digest, from the one row of each key that carries it
    shared: list[tuple[dict, str]] = []
    for status in statuses.values(*NODE_STATUS_FIELDS, "fabric_key", *json_columns, "notice_reported_at",
                                  "collected_at_oom"):
        node = facts.get(status["node_id"])
        if node is not None:
            for name in NODE_STATUS_JSON_FIELDS:
                status[name] = decode(status.pop(f"{name}_text"))
            status["system"] = _system_facts(status, decode.once(status.pop("system_text")))
            key, fabric = status.pop("fabric_key"), status.pop("fabric_text")
            if fabric is None and key is not None:
                shared.append((status, key))
            else:
                status["fabric"] = decode(fabric)
                if key is not None:
                    fabrics[key] = status["fabric"]
            node.status = status
    for status, key in shared:  # the statement returned each key's digest on one of its rows
        status["fabric"] = fabrics.get(key)

    # The per-node GPU aggregate costs a pass over every GPU status row, so it is computed only for the nodes a
    # rule will read it for. Status rows of GPUs that left the inventory are never refreshed: they do not count.
    summary_nodes = [n.id for n in facts.values() if needs_gpu_summary is None or needs_gpu_summary(n)]
    if summary_nodes:
        summaries = (GPUStatus.objects.filter(gpu__present=True, node_id__in=summary_nodes).order_by()
                     .values("node_id")
                     .annotate(count=Count("pk"), lost_count=Count("pk", filter=Q(lost=True)),
                               util_avg=Avg("utilization_gpu_pct", filter=Q(lost=False)),
                               util_max=Max("utilization_gpu_pct")))
        for summary in summaries:
            facts[summary["node_id"]].gpu_summary = summary

    kinds = (_scoped(GPU.objects.filter(present=True).order_by(), node_ids)
             .values_list("node_id", "model", "memory_total_bytes", "compute_capability").annotate(n=Count("pk")))
    for node_id, model, memory, capability, count in kinds:
        node = facts.get(node_id)
        if node is not None:
            node.gpu_kinds.append((model, memory, capability, count))

    if gpu_filter is not None:
        annotations = {name: F(field).bitand(mask) for name, (field, mask) in (gpu_annotations or {}).items()}
        rows = (_scoped(GPUStatus.objects.filter(gpu__present=True).order_by(), node_ids).annotate(**annotations)
                .filter(gpu_filter)
                .values(*GPU_STATUS_FIELDS, gpu_index=F("gpu__index"), gpu_uuid=F("gpu__uuid"),
                        gpu_pci_bus_id=F("gpu__pci_bus_id"), gpu_model=F("gpu__model"),
                        gpu_serial=F("gpu__serial")))
        for row in rows:
            node = facts.get(row["node_id"])
            if node is not None:
                node.candidate_gpus.append(row)
                node.gpus[row["gpu_id"]] = GpuIdentity(row["gpu_id"], row["gpu_index"], row["gpu_uuid"],
                                                       row["gpu_pci_bus_id"], row["gpu_model"], row["gpu_serial"])

    _attach_baselines(facts)
    _attach_checkpoint_policies(facts)
    _attach_events(facts, node_ids, now, windows)
    return facts


class _FirstOfKey(Func):
    """`column` as text on one row of each distinct `key` and NULL on the other rows of that key (rows whose key is
    NULL, as on SQLite where the key is not computed, all carry their own): a JSON value many rows share is sent
    and decoded once per statement instead of once per row."""

    arity = 2
    output_field = TextField()
    contains_over_clause = True

    def as_postgresql(self, compiler, connection, **extra_context):
        column, key = (compiler.compile(expression) for expression in self.get_source_expressions())
        sql = (f"CASE WHEN {key[0]} IS NULL OR row_number() OVER (PARTITION BY {key[0]}) = 1 "
               f"THEN ({column[0]})::text END")
        return sql, (*key[1], *key[1], *column[1])

    def as_sql(self, compiler, connection, **extra_context):
        return compiler.compile(_as_text(self.get_source_expressions()[0]))


def _system_text():
    """The `system` column as text (bench/rules.py replaces it to time the cycle without the section)."""
    return _as_text("system")


def _number(value):
    """A number the agent reported: JSON numbers as they are, numeric text parsed; anything else (booleans,
    objects, other text) is no number."""
    if isinstance(value, bool):
        return None
    if value is None or isinstance(value, int | float):
        return value
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _system_facts(status: dict, section) -> dict:
    """The host rules' part of the `system` section (absent keys stay absent, so a rule can tell an older agent
    that never reports them from a healthy value)."""
    system: dict = {"mem_total_bytes": status["mem_total_bytes"], "mem_available_bytes": status["mem_available_bytes"],
                    "cpu_busy_pct": status["cpu_busy_pct"]}
    if not isinstance(section, dict):
        return system
    for key in SYSTEM_SCALAR_KEYS:
        value = section.get(key)
        if value is not None:
            system[key] = _number(value)
    last_oom = section.get("oom_kill_last_at")
    if last_oom is not None or "oom_kills" in system:
        system["oom_kill_last_at"] = last_oom
    memory = section.get("pressure")
    memory = memory.get("memory") if isinstance(memory, dict) else None
    if isinstance(memory, dict):
        some, full = memory.get("some_avg10"), memory.get("full_avg10")
        if some is not None or full is not None:
            system["pressure"] = {"memory": {"some_avg10": _number(some), "full_avg10": _number(full)}}
    for key in SYSTEM_JSON_KEYS:
        value = section.get(key)
        if value is not None:
            system[key] = value
    return system


def _attach_checkpoint_policies(facts: dict[int, NodeFacts]) -> None:
    """The pool's checkpoint policy (billing decides which nodes it covers), for nodes that report checkpoints."""
    reporting = [n for n in facts.values() if n.status is not None and (
        n.status.get("checkpoint_age_s") is not None or (n.status.get("checkpoint") or {}).get("dirs"))]
    if reporting:
        policies = checkpoint_policies_by_pool(n.pool_id for n in reporting)
        for node in reporting:
            node.checkpoint_max_age_s = checkpoint_max_age(policies.get(node.pool_id), node.billing_mode)


def _attach_baselines(facts: dict[int, NodeFacts]) -> None:
    baselines = node_baselines(nodes=[(n.id, n.pool_id) for n in facts.values()], fields=BASELINE_FIELDS)
    for node_id, baseline in baselines.items():
        facts[node_id].baseline = baseline


def _attach_events(facts: dict[int, NodeFacts], node_ids: list[int] | None, now: datetime,
                   windows: FactWindows) -> None:
    recent = Q(kind__in=ACTIONABLE_EVENT_KINDS - {EventKind.DIAG}, at__gte=now - timedelta(seconds=windows.events_s))
    if windows.diag_s:
        recent |= Q(kind=EventKind.DIAG, at__gte=now - timedelta(seconds=windows.diag_s))
    events = (_scoped(Event.objects.order_by("at", "id"), node_ids)
              .filter(recent)
              .values_list("id", "node_id", "kind", "code", "severity", "at", "gpu_id", "pci_bus_id", "message",
                           "raw", "detail"))
    needs_identity: set[int] = set()
    needs_bus_map: set[int] = set()
    for event_id, node_id, kind, code, severity, at, gpu_id, bus_id, message, raw, detail in events:
        node = facts.get(node_id)
        if node is None:
            continue
        node.events.append(EventFact(event_id, kind, code, severity, at, gpu_id, bus_id, message, raw, detail or {}))
        if kind == EventKind.DIAG:
            needs_bus_map.add(node_id)  # a run names its failing GPUs by index inside the event
        elif gpu_id is not None and gpu_id not in node.gpus:
            needs_identity.add(gpu_id)
        elif gpu_id is None and bus_id:
            needs_bus_map.add(node_id)

    history = (_scoped(Event.objects.order_by(), node_ids)
               .filter(kind=EventKind.XID, code__isnull=False, at__gte=now - timedelta(seconds=windows.history_s))
               .values_list("node_id", "gpu_id", "pci_bus_id", "code", "at"))
    for node_id, gpu_id, bus_id, code, at in history:
        node = facts.get(node_id)
        if node is None:
            continue
        node.xid_history.append(XidOccurrence(gpu_id, bus_id, code, at))
        if gpu_id is not None and gpu_id not in node.gpus:
            needs_identity.add(gpu_id)
        elif gpu_id is None and bus_id:
            needs_bus_map.add(node_id)

    reboots = (_scoped(ChangeLogEntry.objects.order_by(), node_ids)
               .filter(field__in=sorted({*REBOOT_CHANGE_FIELDS, *REQUESTED_CHANGE_FIELDS}),
                       at__gte=now - timedelta(seconds=windows.history_s))
               .values_list("node_id", "at", "field", "summary"))
    for node_id, at, field, summary in reboots:
        node = facts.get(node_id)
        if node is None:
            continue
        if field in REBOOT_CHANGE_FIELDS:
            node.reboots.append(at)
        if field == "boot_id":
            node.boots.append(at)
        if field in REQUESTED_CHANGE_FIELDS:
            node.requested_changes.append((at, field, summary))

    for node in facts.values():
        if node.status and (node.status.get("lost_gpus") or (node.status.get("fabric") or {}).get("attention")):
            needs_bus_map.add(node.id)  # the fabric rules name GPUs by bus id too
    if needs_identity or needs_bus_map:
        identities = GPU.objects.order_by().filter(Q(pk__in=needs_identity) | Q(node_id__in=needs_bus_map))
        for gpu_id, node_id, index, uuid, bus_id, model, serial in identities.values_list(
                "id", "node_id", "index", "uuid", "pci_bus_id", "model", "serial"):
            node = facts.get(node_id)
            if node is not None:
                node.gpus.setdefault(gpu_id, GpuIdentity(gpu_id, index, uuid, bus_id, model, serial))
