"""The ingestion hot path: one batch of agent reports stored in a small, constant number of queries.

Two paths share the row building and differ in how they guard against replays:

* Steady state on PostgreSQL (a batch without inventory or events, i.e. nearly all of them): read the node's
  GPU map, then one statement that advances the agent epoch only if every report is new and, in the same
  statement, writes the latest node and GPU status and the history samples. Two round trips, no explicit
  transaction (`_ingest_steady`).
* Everything else, and every batch on SQLite: one transaction that locks the epoch row and reads the GPU map
  (one query), applies inventory and stack changes when the batch carries an inventory (its hash changed),
  writes the same rows plus events, and acknowledges the sequence. Urgent events schedule an immediate health
  evaluation after commit (`_ingest`).

Sequence gaps: the epoch's `last_sequence` alone cannot tell a replay from a report that arrives after a newer
one although it was never stored (it waited in the ingest queue while Redis was down and a batch written in the
request jumped past it, or a writer that died held it while another stored later entries). So the epoch also
keeps the ranges of sequences it jumped over (`AgentEpoch.gaps`). Only the general path, under the epoch's row
lock, advances the epoch across a hole and records it; the set-based fast paths (here and in the ingest writer)
advance it only when their batch continues the last sequence without a hole, and otherwise leave the batch to
the general path. A report at or below `last_sequence` is stored only when its sequence lies in a recorded gap,
in the transaction that takes it out of the gap: its history and events, not the latest status (which is
newer). Anything else at or below `last_sequence` is a replay. An agent may skip sequences for good (a report
set aside as poison, a spool that dropped its oldest); such a gap is never filled, so the list is bounded by
count (`MAX_SEQUENCE_GAPS`, the newest kept) and by age: each gap is kept as [first, last, recorded at (Unix
seconds)] and let go once older than the raw history's retention (`TELEMETRY_RAW_RETENTION_HOURS`), when
whatever history its late reports carried would be pruned anyway; such a report then counts as a replay.

Rows are written set-based (`fleet.core.rowsets`: one statement per table, the rows as one JSON parameter).
The hot path deliberately avoids ORM querysets: compiling a query cost more CPU than running it.
"""

import logging
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cache

import orjson
from django.conf import settings
from django.db import IntegrityError, connection, transaction

from fleet.core import rowsets
from fleet.inventory.models import GPU
from fleet.inventory.services import gpus_add_missing
from fleet_agent.protocol import NOTICE_EVENT_KINDS

from ..choices import ACTIONABLE_EVENT_KINDS, EventKind, EventSeverity
from ..models import AgentEpoch, Event, GPUStatus, NodeStatus
from ..signals import urgent_events_stored
from ..validation import parse_time
from . import partitions
from .fabric import fabric_digest
from .history import history_writes
from .inventory import inventory_apply

logger = logging.getLogger(__name__)

INT64_MAX = 2**63 - 1
# One gpu_uuid_conflict event per (node, uuid) in this window, however often the node repeats the claim.
CONFLICT_EVENT_EVERY = timedelta(hours=24)
# Sequence ranges an agent epoch remembers as jumped over (module docstring); the oldest go first.
MAX_SEQUENCE_GAPS = 32

_NODE_STATUS_FIELDS = (
    "received_at", "collected_at", "sequence", "agent_instance_id", "agent_version", "interval_s", "silent",
    "silent_since", "nvml_status", "nvml_message", "gpu_count_seen", "lost_gpus", "cpu_busy_pct", "cpu_steal_pct",
    "cpu_iowait_pct", "mem_total_bytes", "mem_available_bytes", "load1", "disk_await_ms_max", "disk_util_pct_max",
    "tcp_retrans_pct", "system", "cloud", "notice_kind", "notice_deadline", "checkpoint_age_s", "checkpoint",
    "fabric",
)
_GPU_STATUS_FIELDS = (
    "node_id", "collected_at", "lost", "utilization_gpu_pct", "utilization_memory_pct", "memory_used_bytes",
    "memory_total_bytes", "temperature_c", "power_draw_w", "power_limit_w", "sm_clock_mhz", "clock_event_reasons_mask",
    "clock_event_reasons", "ecc_volatile_corrected", "ecc_volatile_uncorrected", "ecc_aggregate_corrected",
    "ecc_aggregate_uncorrected", "retired_pages_count", "retired_pages_pending", "remapped_rows_correctable",
    "remapped_rows_uncorrectable", "remapped_rows_pending", "remapped_rows_failure", "pcie_gen_current",
    "pcie_gen_max", "pcie_width_current", "pcie_width_max", "process_count", "process_memory_bytes", "processes",
    "nvlink",
)


class NodeMismatch(Exception):
    """A report names a node other than the one whose credential sent it."""


@dataclass
class IngestResult:
    acked_sequence: int
    agent_instance_id: str
    accepted: int = 0
    duplicates: int = 0
    urgent_events: int = 0
    events: list[int] = field(default_factory=list)
    # Acknowledged once durable in the ingest stream, written by a writer process (services/stream.py).
    queued: bool = False
    # What stored reports lost on the way in: events over a limit, new GPUs over the per-node limit, GPU uuids
    # that belong to another node. Never silent: the response and a Prometheus counter carry it.
    dropped: dict[str, int] = field(default_factory=lambda: {"events": 0, "gpus": 0, "gpu_uuid_conflicts": 0})


def reports_ingest(*, node_id: int, reports: list[dict], now: datetime) -> IngestResult:
    """Store validated reports (sorted by sequence) for one node. Idempotent per (node, instance, sequence):
    a report at or below the instance's acknowledged sequence, or repeating one in the batch, is a duplicate."""
    instance_id = batch_instance(node_id, reports)
    # A sequence repeated inside the batch (an agent bug or a replay spliced in) is stored once.
    unique = [r for i, r in enumerate(reports) if i == 0 or r["sequence"] != reports[i - 1]["sequence"]]
    result = None
    if connection.vendor == "postgresql" and not any(r.get("inventory") or r.get("events") for r in unique):
        result = _ingest_steady(node_id, instance_id, unique, now)
    if result is None:
        try:
            result = _ingest(node_id, instance_id, unique, now)
        except IntegrityError as exc:
            # A history partition this process knew of is gone (dropped by hand, or created in a transaction
            # that rolled back): look again, create it, and store the batch once more (nothing was stored).
            if not partitions.missing_partition(exc):
                raise
            partitions.forget()
            result = _ingest(node_id, instance_id, unique, now)
    result.duplicates += len(reports) - len(unique)
    return result


def batch_instance(node_id: int, reports: list[dict]) -> str:
    """The agent instance that sent the batch; raises NodeMismatch or ValueError for a batch no path may store."""
    for claimed in claimed_nodes(reports):
        if claimed != node_id:
            raise NodeMismatch(f"report names node {claimed}, credential belongs to node {node_id}")
    return one_instance(reports)


def claimed_nodes(reports: list[dict]) -> set:
    """The node ids the batch's reports name (a report may name none): claims, checked against the credential."""
    return {(report.get("node") or {}).get("node_id") for report in reports} - {None}


def one_instance(reports: list[dict]) -> str:
    """The one agent instance that sent the batch; ValueError if there are several."""
    instances = {r["agent"]["instance_id"] for r in reports}
    if len(instances) != 1:
        raise ValueError("one batch must come from one agent instance")
    return instances.pop()


def _ingest_steady(node_id: int, instance_id: str, reports: list[dict], now: datetime) -> IngestResult | None:
    """The steady state on PostgreSQL (no inventory, no events: nearly every batch) in two round trips.

    Read the GPU map, then one statement that advances the epoch only if every report is new and, only if it did,
    writes the rows; PostgreSQL runs it atomically without an explicit transaction. Returns None when the batch
    needs the general path: a GPU without a row, a replay or overlap, a batch that does not continue the last
    sequence without a hole (a gap to record), a new agent instance, or a GPU row that went away meanwhile (the
    statement then stored nothing).
    """
    if not contiguous(reports):  # a hole in the batch: recorded as a gap, under the row lock (_ingest)
        return None
    gpu_ids = dict(rowsets.fetch_all(_sql_gpu_map(), node_id))
    if any(g.get("uuid") and g["uuid"] not in gpu_ids for r in reports for g in r.get("gpus") or []):
        return None
    guard = rowsets.statement(_sql_epoch_advance(), reports[-1]["sequence"], now, node_id, instance_id,
                              reports[0]["sequence"] - 1)
    writes = _status_writes(node_id, instance_id, reports, gpu_ids, now, guarded=True)
    try:
        with transaction.atomic() if connection.in_atomic_block else nullcontext():
            stored = rowsets.execute_guarded(guard, writes)
    except IntegrityError:
        return None
    if not stored:
        return None
    return IngestResult(acked_sequence=reports[-1]["sequence"], agent_instance_id=instance_id,
                        accepted=len(reports))


def _ingest(node_id: int, instance_id: str, reports: list[dict], now: datetime) -> IngestResult:
    """Every case, on every database, in one transaction that locks the agent's epoch first."""
    with transaction.atomic():
        # One round trip: the epoch row (locked) and the node's GPU map, a row per GPU.
        rows = rowsets.fetch_all(_sql_epoch_lock(), node_id, instance_id)
        if not rows:  # a new agent instance: its first batch (rare), so the extra round trips don't matter
            AgentEpoch.objects.bulk_create([AgentEpoch(node_id=node_id, instance_id=instance_id)],
                                           ignore_conflicts=True)
            rows = rowsets.fetch_all(_sql_epoch_lock(), node_id, instance_id)
        epoch_id, last_sequence, stored_gaps = rows[0][:3]
        gaps = gaps_update(gaps_decode(stored_gaps), last_sequence, [], now=now)  # without the expired ones
        fresh = [r for r in reports if r["sequence"] > last_sequence]
        # Never stored although at or below the acknowledged sequence (module docstring): stored now, all but
        # the latest status (which is newer).
        late = [r for r in reports if r["sequence"] <= last_sequence and in_gaps(r["sequence"], gaps)]
        result = IngestResult(acked_sequence=last_sequence, agent_instance_id=instance_id,
                              duplicates=len(reports) - len(fresh) - len(late))
        if not fresh and not late:
            return result

        capped = _cap_events(late + fresh, result.dropped)
        late, fresh = capped[:len(late)], capped[len(late):]
        inventory_reports = [r for r in fresh if r.get("inventory")]
        own = {uuid: pk for _, _, _, uuid, pk in rows if pk is not None}
        refused, conflicts = _refused_gpus(node_id, own, late + fresh, inventory_reports, result.dropped)
        if inventory_reports:
            gpu_ids = inventory_apply(node_id=node_id, report=inventory_reports[-1], now=now, refused=refused)
        else:
            gpu_ids = own
        gpu_ids = _ensure_reported_gpus(node_id, late + fresh, gpu_ids, refused)
        writes = _status_writes(node_id, instance_id, fresh, gpu_ids, now, late=late,
                                inventory=inventory_reports[-1]["inventory"] if inventory_reports else None)
        new_gaps = gaps_update(gaps, last_sequence, [r["sequence"] for r in fresh],
                               filled=[r["sequence"] for r in late], now=now)
        writes.append(rowsets.statement(_sql_epoch_ack(), fresh[-1]["sequence"] if fresh else last_sequence,
                                        connection.ops.adapt_datetimefield_value(now), gaps_encode(new_gaps),
                                        epoch_id))
        rowsets.execute(writes)
        if late:
            logger.warning("node %s: stored %d report(s) (sequence %s) inside a sequence gap, after newer ones "
                           "(history and events; the status stays the newest)", node_id, len(late),
                           ", ".join(str(r["sequence"]) for r in late))
        events = _events(node_id, late + fresh, gpu_ids)
        events += _conflict_events(node_id, conflicts, (fresh or late)[-1], now)
        if events:
            created = Event.objects.bulk_create(events)
            result.events = [e.pk for e in created if e.pk is not None]

        result.accepted = len(fresh) + len(late)
        result.acked_sequence = fresh[-1]["sequence"] if fresh else last_sequence
        result.urgent_events = sum(1 for e in events if e.kind in ACTIONABLE_EVENT_KINDS)
        if result.urgent_events:
            notices = [e.pk for e in events if e.kind == EventKind.PREEMPTION_NOTICE and e.pk is not None]
            transaction.on_commit(lambda: _after_urgent(node_id, notices))
    return result


def _status_writes(node_id: int, instance_id: str, reports: list[dict], gpu_ids: dict[str, int], now: datetime,
                   *, inventory: dict | None = None, guarded: bool = False,
                   late: list[dict] = ()) -> list[rowsets.Statement]:
    """The latest node and GPU status (upserts) and the history of new reports (folded into its buckets).

    `late`: reports older than the stored status (filling a sequence gap) whose history only is written."""
    node_samples, gpu_samples = [], []
    gpu_status: dict[int, dict] = {}
    for index, report in enumerate((*late, *reports)):
        at = parse_time(report["collected_at"])
        gpus = report.get("gpus") or []
        node_samples.append(_node_sample(node_id, at, report.get("system") or {}, gpus))
        for gpu in gpus:
            gpu_pk = gpu_ids.get(gpu.get("uuid"))
            if gpu_pk is not None:
                gpu_samples.append(_gpu_sample(gpu_pk, at, gpu))
                if index >= len(late):
                    gpu_status[gpu_pk] = _gpu_status(gpu_pk, node_id, at, gpu)
    writes = []
    if reports:
        status = _node_status(node_id, reports[-1], now, instance_id)
        update = _NODE_STATUS_FIELDS
        if inventory is not None:
            status["inventory_hash"] = inventory.get("hash", "")
            status["boot_id"] = (inventory.get("host") or {}).get("boot_id") or ""
            update = (*update, "inventory_hash", "boot_id")
        writes.append(rowsets.insert_rows(NodeStatus, [status], conflict="node_id", update=update, guarded=guarded))
    if gpu_status:
        writes.append(rowsets.insert_rows(GPUStatus, list(gpu_status.values()), conflict="gpu_id",
                                          update=_GPU_STATUS_FIELDS, guarded=guarded))
    # History goes into fixed-resolution buckets, not a row per report (services/history.py).
    writes += history_writes(node_samples, gpu_samples, now=now, guarded=guarded)
    return writes


def _events(node_id: int, reports: list[dict], gpu_ids: dict[str, int]) -> list[Event]:
    if not any(r.get("events") for r in reports):
        return []
    pci_to_gpu = dict(GPU.objects.filter(node_id=node_id).values_list("pci_bus_id", "pk"))
    events = []
    for report in reports:
        at = parse_time(report["collected_at"])
        notice = (report.get("cloud") or {}).get("notice")
        for event in report.get("events") or []:
            events.append(_event(node_id, at, event, gpu_ids, pci_to_gpu, notice))
    return events


# --- sequence gaps (module docstring) ------------------------------------------------------------------------

def contiguous(reports: list[dict]) -> bool:
    """Whether the batch's sequences (sorted, without repeats) follow each other without a hole."""
    return reports[-1]["sequence"] - reports[0]["sequence"] == len(reports) - 1


def gaps_decode(value) -> list[list]:
    """The stored gaps ([first, last, recorded at] ascending): the column's JSON as the driver hands it back. A gap
    stored before gaps had a time gets None, and the time of the next update that keeps it."""
    if isinstance(value, str | bytes):
        value = orjson.loads(value)
    return [[int(gap[0]), int(gap[1]), int(gap[2]) if len(gap) > 2 and gap[2] is not None else None]
            for gap in value or []]


def gaps_encode(gaps: list[list[int]]) -> str:
    return orjson.dumps(gaps).decode()


def in_gaps(sequence: int, gaps: list[list]) -> bool:
    return any(gap[0] <= sequence <= gap[1] for gap in gaps)


def gaps_update(gaps: list[list], last_sequence: int, stored: list[int], *, filled: list[int] = (),
                now: datetime) -> list[list]:
    """The gaps after storing the sequences `stored` (ascending, all above `last_sequence`) and `filled` (each
    inside a gap) at `now`: every hole the epoch jumps over is added (recorded now), filled sequences are taken out
    (splitting their gap, which keeps its time), gaps older than the raw history's retention are let go, and only
    the newest MAX_SEQUENCE_GAPS are kept. Sequences start at 1."""
    at = int(now.timestamp())
    oldest = at - settings.TELEMETRY_RAW_RETENTION_HOURS * 3600
    out = []
    taken = sorted(filled)
    for lo, hi, recorded in gaps:
        recorded = at if recorded is None else recorded
        for sequence in (s for s in taken if lo <= s <= hi):
            if sequence > lo:
                out.append([lo, sequence - 1, recorded])
            lo = sequence + 1
        if lo <= hi:
            out.append([lo, hi, recorded])
    previous = max(last_sequence, 0)
    for sequence in stored:
        if sequence > previous + 1:
            out.append([previous + 1, sequence - 1, at])
        previous = sequence
    return [gap for gap in out if gap[2] >= oldest][-MAX_SEQUENCE_GAPS:]


@cache
def _sql_epoch_lock() -> str:  # built on first use, once models are loaded
    epochs, gpus = AgentEpoch._meta.db_table, GPU._meta.db_table
    lock = " FOR UPDATE OF e" if connection.features.has_select_for_update_of else ""
    return (f"SELECT e.id, e.last_sequence, e.gaps, g.uuid, g.id FROM {epochs} e "
            f"LEFT JOIN {gpus} g ON g.node_id = e.node_id WHERE e.node_id = %s AND e.instance_id = %s{lock}")


@cache
def _sql_epoch_ack() -> str:
    gaps = "%s::jsonb" if connection.vendor == "postgresql" else "%s"
    return f"UPDATE {AgentEpoch._meta.db_table} SET last_sequence = %s, updated_at = %s, gaps = {gaps} WHERE id = %s"


@cache
def _sql_epoch_advance() -> str:
    """Move the epoch to the batch's last sequence only if its first follows the stored one (no gap to record);
    the row lock orders racing batches."""
    return (f"UPDATE {AgentEpoch._meta.db_table} SET last_sequence = %s, updated_at = %s "
            "WHERE node_id = %s AND instance_id = %s AND last_sequence = %s")


@cache
def _sql_gpu_map() -> str:
    return f"SELECT uuid, id FROM {GPU._meta.db_table} WHERE node_id = %s"


def _after_urgent(node_id: int, notice_event_ids: list[int]) -> None:
    """Tell the apps above (health evaluates the node now, billing records announced preemptions); their
    receivers enqueue through `failopen.enqueue`, so a dead broker only delays what the periodic tasks catch up."""
    urgent_events_stored.send(sender=Event, node_id=node_id, notice_event_ids=notice_event_ids)


def _ensure_reported_gpus(node_id: int, reports: list[dict], gpu_ids: dict[str, int],
                          refused: set[str]) -> dict[str, int]:
    """GPUs that report status before any inventory names them still get a row (rare: e.g. a hot-added GPU)."""
    missing = {}
    for report in reports:
        for gpu in report.get("gpus") or []:
            uuid = gpu.get("uuid")
            if uuid and uuid not in gpu_ids and uuid not in missing and uuid not in refused:
                missing[uuid] = gpu
    if missing:
        gpus_add_missing(node_id=node_id, gpus=list(missing.values()))
        gpu_ids = dict(GPU.objects.filter(node_id=node_id).values_list("uuid", "pk"))
    return gpu_ids


def _cap_events(reports: list[dict], dropped: dict[str, int]) -> list[dict]:
    """Keep at most AGENT_MAX_EVENTS_PER_REPORT events per report and AGENT_MAX_EVENTS_PER_BATCH in the batch.

    Urgent kinds (Xid, SXid, GPU lost, preemption notice) are kept before the rest, earlier reports before later
    ones; kept events stay in their reported order. The rest are counted in `dropped["events"]`.
    """
    per_report, per_batch = settings.AGENT_MAX_EVENTS_PER_REPORT, settings.AGENT_MAX_EVENTS_PER_BATCH
    counts = [len(r.get("events") or []) for r in reports]
    if max(counts) <= per_report and sum(counts) <= per_batch:
        return reports
    candidates = []  # (not urgent, report index, event index) of what each report may keep
    for r, report in enumerate(reports):
        events = report.get("events") or []
        ranked = sorted(range(len(events)), key=lambda i: events[i]["kind"] not in ACTIONABLE_EVENT_KINDS)
        candidates.extend((events[i]["kind"] not in ACTIONABLE_EVENT_KINDS, r, i) for i in ranked[:per_report])
    kept: dict[int, set[int]] = {}
    for _, r, i in sorted(candidates)[:per_batch]:
        kept.setdefault(r, set()).add(i)
    capped = []
    for r, report in enumerate(reports):
        keep = kept.get(r, set())
        if len(keep) < counts[r]:
            report = {**report, "events": [e for i, e in enumerate(report["events"]) if i in keep]}
        capped.append(report)
    lost = sum(counts) - sum(len(k) for k in kept.values())
    dropped["events"] += lost
    logger.warning("a report batch carried %d events over the limits (%d per report, %d per batch); dropped",
                   lost, per_report, per_batch)
    return capped


def _refused_gpus(node_id: int, own: dict[str, int], reports: list[dict], inventory_reports: list[dict],
                  dropped: dict[str, int]) -> tuple[set[str], dict[str, tuple[int, str]]]:
    """The GPU uuids in these reports that must not get a row on this node, and the conflicting ones' owners.

    A uuid that already belongs to another node is never moved (a report is a claim; a GPU that really moved is
    rare and an operator reassigns it); a new uuid past AGENT_MAX_GPUS_PER_NODE rows is not stored either. Costs
    a query only when the batch names a GPU this node has no row for.
    """
    named = [g.get("uuid") for g in (inventory_reports[-1]["inventory"].get("gpus") or [])] if inventory_reports \
        else []
    named += [g.get("uuid") for r in reports for g in r.get("gpus") or []]
    new = list(dict.fromkeys(u for u in named if u and u not in own))
    if not new:
        return set(), {}
    owners = {uuid: (owner, hostname) for uuid, owner, hostname in
              GPU.objects.filter(uuid__in=new).values_list("uuid", "node_id", "node__hostname")}
    conflicts = {uuid: owner for uuid, owner in owners.items() if owner[0] != node_id}
    room = max(0, settings.AGENT_MAX_GPUS_PER_NODE - len(own))
    unowned = [u for u in new if u not in owners]
    over_limit = unowned[room:]
    dropped["gpu_uuid_conflicts"] += len(conflicts)
    dropped["gpus"] += len(over_limit)
    if conflicts or over_limit:
        logger.warning("node %s named %d GPU(s) of other nodes and %d GPU(s) over its limit of %d",
                       node_id, len(conflicts), len(over_limit), settings.AGENT_MAX_GPUS_PER_NODE)
    return set(conflicts) | set(over_limit), conflicts


def _conflict_events(node_id: int, conflicts: dict[str, tuple[int, str]], report: dict, now: datetime) -> list[Event]:
    """One gpu_uuid_conflict event per claimed uuid on the reporting node, at most once per CONFLICT_EVENT_EVERY."""
    if not conflicts:
        return []
    recent = Event.objects.filter(node_id=node_id, kind=EventKind.GPU_UUID_CONFLICT,
                                  received_at__gte=now - CONFLICT_EVENT_EVERY).values_list("detail", flat=True)
    seen = {(detail or {}).get("gpu_uuid") for detail in recent}
    at = parse_time(report["collected_at"])
    return [Event(node_id=node_id, kind=EventKind.GPU_UUID_CONFLICT, severity=EventSeverity.WARNING, at=at,
                  message=(f"Reported GPU {uuid} belongs to node {hostname} (id {owner}); not moved, its readings not "
                           "stored here. If it was physically moved, reassign it to this node.")[:1000],
                  detail={"gpu_uuid": uuid, "owner_node_id": owner, "owner_hostname": hostname})
            for uuid, (owner, hostname) in conflicts.items() if uuid not in seen]


def _nested(data: dict | None, *keys):
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _node_status(node_id: int, report: dict, now: datetime, instance_id: str) -> dict:
    system = report.get("system") or {}
    visibility = report.get("visibility") or {}
    cloud = report.get("cloud") or {}
    notice = cloud.get("notice") or {}
    checkpoint = report.get("checkpoint") or {}
    disks = system.get("disks") or []
    awaits = [d["await_ms"] for d in disks if d.get("await_ms") is not None]
    utils = [d["util_pct"] for d in disks if d.get("util_pct") is not None]
    return dict(
        node_id=node_id, received_at=now, collected_at=parse_time(report["collected_at"]),
        sequence=report["sequence"], agent_instance_id=instance_id,
        agent_version=(report.get("agent") or {}).get("version") or "",
        interval_s=max(1, round(report.get("interval_s") or 15)),
        silent=False, silent_since=None,
        nvml_status=visibility.get("nvml") or "ok", nvml_message=(visibility.get("message") or "")[:500],
        gpu_count_seen=visibility.get("gpu_count"), lost_gpus=visibility.get("lost_gpus") or [],
        cpu_busy_pct=system.get("cpu_busy_pct"), cpu_steal_pct=system.get("cpu_steal_pct"),
        cpu_iowait_pct=system.get("cpu_iowait_pct"), mem_total_bytes=system.get("mem_total_bytes"),
        mem_available_bytes=system.get("mem_available_bytes"), load1=system.get("load1"),
        disk_await_ms_max=max(awaits) if awaits else None, disk_util_pct_max=max(utils) if utils else None,
        tcp_retrans_pct=system.get("tcp_retrans_pct"), system=system, cloud=cloud,
        notice_kind=notice.get("kind") or "",
        notice_deadline=parse_time(notice["deadline"]) if notice.get("deadline") else None,
        checkpoint_age_s=checkpoint.get("newest_age_s"), checkpoint=checkpoint, fabric=fabric_digest(report),
        inventory_hash="", boot_id="",  # set only by reports that carry an inventory
    )


def _gpu_status(gpu_pk: int, node_id: int, at: datetime, gpu: dict) -> dict:
    processes = gpu.get("processes") or []
    return dict(
        gpu_id=gpu_pk, node_id=node_id, collected_at=at, lost=bool(gpu.get("lost")),
        utilization_gpu_pct=gpu.get("utilization_gpu_pct"), utilization_memory_pct=gpu.get("utilization_memory_pct"),
        memory_used_bytes=gpu.get("memory_used_bytes"), memory_total_bytes=gpu.get("memory_total_bytes"),
        temperature_c=gpu.get("temperature_c"), power_draw_w=gpu.get("power_draw_w"),
        power_limit_w=gpu.get("power_limit_w"), sm_clock_mhz=gpu.get("sm_clock_mhz"),
        clock_event_reasons_mask=gpu.get("clock_event_reasons_mask"),
        clock_event_reasons=gpu.get("clock_event_reasons") or [],
        ecc_volatile_corrected=_nested(gpu, "ecc", "volatile_corrected"),
        ecc_volatile_uncorrected=_nested(gpu, "ecc", "volatile_uncorrected"),
        ecc_aggregate_corrected=_nested(gpu, "ecc", "aggregate_corrected"),
        ecc_aggregate_uncorrected=_nested(gpu, "ecc", "aggregate_uncorrected"),
        retired_pages_count=_nested(gpu, "retired_pages", "count"),
        retired_pages_pending=_nested(gpu, "retired_pages", "pending"),
        remapped_rows_correctable=_nested(gpu, "remapped_rows", "correctable"),
        remapped_rows_uncorrectable=_nested(gpu, "remapped_rows", "uncorrectable"),
        remapped_rows_pending=_nested(gpu, "remapped_rows", "pending"),
        remapped_rows_failure=_nested(gpu, "remapped_rows", "failure"),
        pcie_gen_current=_nested(gpu, "pcie", "gen_current"), pcie_gen_max=_nested(gpu, "pcie", "gen_max"),
        pcie_width_current=_nested(gpu, "pcie", "width_current"), pcie_width_max=_nested(gpu, "pcie", "width_max"),
        process_count=len(processes),
        # Each value fits 64 bits (the schema says so); their sum need not.
        process_memory_bytes=min(sum(p.get("used_memory_bytes") or 0 for p in processes), INT64_MAX),
        processes=processes[:64], nvlink=gpu.get("nvlink") or [],
    )


def _node_sample(node_id: int, at: datetime, system: dict, gpus: list[dict]) -> dict:
    total, available = system.get("mem_total_bytes"), system.get("mem_available_bytes")
    utils = [g["utilization_gpu_pct"] for g in gpus if g.get("utilization_gpu_pct") is not None]
    return dict(
        node_id=node_id, at=at, cpu_busy_pct=system.get("cpu_busy_pct"), cpu_steal_pct=system.get("cpu_steal_pct"),
        cpu_iowait_pct=system.get("cpu_iowait_pct"),
        mem_used_pct=round(100.0 * (total - available) / total, 2) if total and available is not None else None,
        load1=system.get("load1"), tcp_retrans_pct=system.get("tcp_retrans_pct"),
        gpu_util_avg_pct=round(sum(utils) / len(utils), 2) if utils else None,
    )


def _gpu_sample(gpu_pk: int, at: datetime, gpu: dict) -> dict:
    return dict(
        gpu_id=gpu_pk, at=at, utilization_gpu_pct=gpu.get("utilization_gpu_pct"),
        memory_used_bytes=gpu.get("memory_used_bytes"), temperature_c=gpu.get("temperature_c"),
        power_draw_w=gpu.get("power_draw_w"), sm_clock_mhz=gpu.get("sm_clock_mhz"),
        ecc_volatile_uncorrected=_nested(gpu, "ecc", "volatile_uncorrected"),
        clock_event_reasons_mask=gpu.get("clock_event_reasons_mask"),
    )


def _event(node_id: int, report_at: datetime, event: dict, gpu_ids: dict[str, int],
           pci_to_gpu: dict[str, int], notice: dict | None) -> Event:
    gpu_pk = gpu_ids.get(event.get("gpu_uuid") or "")
    if gpu_pk is None and event.get("pci_bus_id"):
        wanted = GPU.normalize_bus_id(event["pci_bus_id"])
        gpu_pk = next((pk for bus, pk in pci_to_gpu.items() if GPU.normalize_bus_id(bus) == wanted), None)
    detail = {k: v for k, v in event.items() if k not in ("kind", "at", "gpu_uuid", "pci_bus_id", "code",
                                                         "severity", "message", "raw")}
    if notice and event["kind"] in NOTICE_EVENT_KINDS:
        detail["notice"] = notice
    return Event(
        node_id=node_id, gpu_id=gpu_pk, kind=event["kind"], code=event.get("code"),
        severity=event.get("severity") or "info", at=parse_time(event["at"]) if event.get("at") else report_at,
        pci_bus_id=event.get("pci_bus_id") or "", message=(event.get("message") or "")[:1000],
        raw=(event.get("raw") or "")[:4000], detail=detail,
    )
