"""The ingest writer: drains the ingest stream (`services/stream.py`) in batches, `manage.py fleet_writer`.

Several writers share the stream through one consumer group. Each reads up to `INGEST_WRITER_BATCH` entries,
stores them in one transaction, and only then acknowledges and deletes them (XACK, XDEL) and takes them off
their node's set. A writer killed mid-batch leaves its entries pending in the group: after
`INGEST_WRITER_CLAIM_IDLE_S` another writer (or its own successor) claims them with XAUTOCLAIM and stores them
again, and the exactly-once guard per (node, agent instance, sequence) turns what was already committed into
duplicates. An entry that fails `INGEST_WRITER_MAX_DELIVERIES` times is moved to `<stream>:dead` (logged) so
that it cannot stall the rest.

Storage uses ingest's own functions (`ingest._status_writes`, `reports_ingest`), so both paths write the same
rows. On PostgreSQL the steady case of a whole batch is set-based across requests: one query for the GPU map
of every node in the batch, one statement that advances every node's agent epoch only where its reports
continue the stored sequence without a hole (rows locked in id order, so two writers never deadlock), then one
statement per table for all nodes' rows, in one transaction. A node that needs more (a GPU without a row, a
new agent instance, an overlap with stored sequences, a hole before or inside its sequences) is stored on its
own through `reports_ingest` after that commit.

Each (node, instance) of a batch contributes one status row and its history already folded per bucket
(`history_writes`), and a node takes part with one instance at most, so the merged statements never name one
row twice (`ON CONFLICT DO UPDATE` would refuse to update a row a second time).

A queued report at or below the acknowledged sequence is a replay unless the epoch recorded its sequence as a
gap (a batch written in the request while Redis was down jumped past it, or another writer stored later entries
first): then `reports_ingest` stores it once, under the epoch's row lock, and takes it out of the gap
(`services/ingest.py`).
"""

import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache

import orjson
from django.conf import settings
from django.db import (
    DatabaseError,
    InterfaceError,
    OperationalError,
    close_old_connections,
    connection,
    transaction,
)
from django.utils import timezone
from redis.exceptions import ResponseError

from fleet.core import rowsets
from fleet.core.runtime import cyclic_gc_paused
from fleet.inventory.models import GPU

from .. import metrics
from ..models import AgentEpoch
from .credentials import credential_cache_warm
from .ingest import _status_writes, contiguous, reports_ingest
from .stream import GROUP, STREAM_ERRORS, Entry, entry_decode, node_key, stream_name
from .stream import redis_client as _redis_client

logger = logging.getLogger(__name__)


@dataclass
class BatchOutcome:
    stored: int = 0
    duplicates: int = 0
    done: list[str] = field(default_factory=list)  # entry ids that may be acknowledged
    failed: list[str] = field(default_factory=list)  # entry ids to try again


@dataclass
class _Group:
    """The queued reports of one (node, agent instance) in a batch, sorted and without repeated sequences."""

    node_id: int
    instance_id: str
    reports: list[dict]
    received_at: datetime
    entry_ids: list[str]
    repeated: int = 0


def entries_store(entries: list[Entry]) -> BatchOutcome:
    """Store queued entries exactly once. Returns which entries are done (stored now or before) and which failed."""
    groups = _groups(entries)
    outcome = BatchOutcome()
    fast: set[tuple[int, str]] = set()
    if connection.vendor == "postgresql":
        try:
            fast = _store_steady(groups)
        except (OperationalError, InterfaceError):
            raise  # the database is unreachable: the caller retries the whole batch
        except DatabaseError:  # e.g. a GPU row deleted meanwhile: store node by node, each on its own
            logger.exception("batch write of %d queued reports failed; storing node by node",
                             sum(len(g.reports) for g in groups.values()))
            fast = set()
    for key, group in groups.items():
        outcome.duplicates += group.repeated
        if key in fast:
            outcome.stored += len(group.reports)
            outcome.done.extend(group.entry_ids)
            continue
        try:
            result = reports_ingest(node_id=group.node_id, reports=group.reports, now=group.received_at)
        except (OperationalError, InterfaceError):
            raise
        except Exception:  # one bad node must not stall the others; its entries are retried, then set aside
            logger.exception("queued reports of node %s could not be stored", group.node_id)
            outcome.failed.extend(group.entry_ids)
            continue
        # `accepted` counts late reports that filled a sequence gap (a synchronous batch overtook them, ingest.py)
        outcome.stored += result.accepted
        outcome.duplicates += result.duplicates
        outcome.done.extend(group.entry_ids)
    return outcome


def _groups(entries: list[Entry]) -> dict[tuple[int, str], _Group]:
    groups: dict[tuple[int, str], _Group] = {}
    for entry in entries:
        for report in entry.reports:
            key = (entry.node_id, report["agent"]["instance_id"])
            group = groups.get(key)
            if group is None:
                group = groups[key] = _Group(entry.node_id, key[1], [], entry.received_at, [])
            group.reports.append(report)
            group.received_at = max(group.received_at, entry.received_at)
            if entry.id not in group.entry_ids:
                group.entry_ids.append(entry.id)
    for group in groups.values():
        group.reports.sort(key=lambda r: r["sequence"])
        unique = [r for i, r in enumerate(group.reports) if i == 0 or r["sequence"] != group.reports[i - 1]["sequence"]]
        group.repeated = len(group.reports) - len(unique)
        group.reports = unique
    return groups


def _store_steady(groups: dict[tuple[int, str], _Group]) -> set[tuple[int, str]]:
    """PostgreSQL: the groups whose every report is new and names only known GPUs, stored together. Returns their
    keys; the rest is untouched."""
    node_ids = sorted({node_id for node_id, _ in groups})
    gpu_maps: dict[int, dict[str, int]] = {}
    for node_id, uuid, gpu_id in rowsets.fetch_all(_sql_gpu_maps(), node_ids):
        gpu_maps.setdefault(node_id, {})[uuid] = gpu_id
    candidates, seen_nodes = [], set()
    for key, group in groups.items():
        known = gpu_maps.get(group.node_id, {})
        if group.node_id in seen_nodes:  # two instances of one node in a batch: one status row, so one at a time
            continue
        if not contiguous(group.reports):  # a hole to record as a gap: the general path, under the row lock
            continue
        if any(g.get("uuid") and g["uuid"] not in known for r in group.reports for g in r.get("gpus") or []):
            continue
        seen_nodes.add(group.node_id)
        candidates.append(key)
    if not candidates:
        return set()
    now = timezone.now()
    guard = orjson.dumps([{"node_id": groups[k].node_id, "instance_id": groups[k].instance_id,
                           "first": groups[k].reports[0]["sequence"], "last": groups[k].reports[-1]["sequence"]}
                          for k in candidates]).decode()
    with transaction.atomic():
        advanced = {(node_id, instance_id) for node_id, instance_id in rowsets.fetch_all(
            _sql_epochs_advance(), guard, len(candidates), now)}
        writes = []
        for key in candidates:
            if key in advanced:
                group = groups[key]
                writes.extend(_status_writes(group.node_id, group.instance_id, group.reports,
                                             gpu_maps.get(group.node_id, {}), group.received_at))
        if writes:
            rowsets.execute(rowsets.merge(writes))
    return advanced


@cache
def _sql_gpu_maps() -> str:
    return f"SELECT node_id, uuid, id FROM {GPU._meta.db_table} WHERE node_id = ANY(%s)"


@cache
def _sql_epochs_advance() -> str:
    """Each (node, instance) of the batch moves to its last sequence only if its first follows the stored one
    (nothing jumped over). Rows are locked in id order first, so writers sharing nodes wait for each other
    instead of deadlocking.

    The LIMIT (the batch's row count) is there for the planner: it takes a set-returning function for 100 rows,
    and for 100 rows it hashed the whole epoch table (a sequential scan of every node's row, for every batch, so
    the cost grew with the fleet: 1.8 ms a batch at 10,000 nodes, more PostgreSQL time than any other statement
    of the soak); told the real count it looks up a steady batch's few rows in the unique index."""
    epochs = AgentEpoch._meta.db_table
    return (f"WITH v AS (SELECT * FROM jsonb_to_recordset(%s::jsonb) AS v(node_id bigint, instance_id text, "
            f"first bigint, last bigint) LIMIT %s), "
            f"locked AS (SELECT e.id, v.last FROM {epochs} e JOIN v ON e.node_id = v.node_id "
            f"AND e.instance_id = v.instance_id WHERE e.last_sequence = v.first - 1 ORDER BY e.id FOR UPDATE OF e) "
            f"UPDATE {epochs} e SET last_sequence = locked.last, updated_at = %s FROM locked "
            f"WHERE e.id = locked.id RETURNING e.node_id, e.instance_id")


class Writer:
    """One writer process's loop over the stream. `step()` handles one batch; `run()` loops until told to stop."""

    def __init__(self, *, consumer: str | None = None, batch: int | None = None, block_ms: int = 1000,
                 claim_idle_s: float | None = None):
        self.consumer = consumer or f"{socket.gethostname()}-{os.getpid()}"
        self.batch = batch or settings.INGEST_WRITER_BATCH
        self.block_ms = block_ms
        self.claim_idle_ms = int(1000 * (settings.INGEST_WRITER_CLAIM_IDLE_S if claim_idle_s is None
                                         else claim_idle_s))
        self._claim_cursor = "0-0"
        self._claim_at = 0.0
        self._group_ready = False
        self.stopping = False

    def ensure_group(self) -> None:
        try:
            # From the stream's start: entries queued before the first writer ever ran are read too.
            redis_client().xgroup_create(stream_name(), GROUP, id="0", mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        else:
            # A new group: the queue's first start, or a Redis that lost its data, and with it the credential
            # cache (one Redis by default). Warm it before the fleet's next reports all miss it at once.
            try:
                logger.info("credential cache warmed with %d live credentials", credential_cache_warm())
            except DatabaseError:
                logger.exception("could not warm the credential cache; reports fill it as they come")
        self._group_ready = True

    def read(self) -> list[tuple[str, dict]]:
        """Entries abandoned by a dead writer (claimed once they idled long enough), then new ones."""
        client = redis_client()
        if not self._group_ready:
            self.ensure_group()
        messages: list = []
        if time.monotonic() >= self._claim_at:
            cursor, claimed, *_ = client.xautoclaim(stream_name(), GROUP, self.consumer, self.claim_idle_ms,
                                                    start_id=self._claim_cursor, count=self.batch)
            messages.extend(m for m in claimed if m and m[1])
            self._claim_cursor = _text(cursor)
            if self._claim_cursor == "0-0":  # a full pass over the pending entries: rest a while
                self._claim_at = time.monotonic() + max(1.0, self.claim_idle_ms / 2000)
        room = self.batch - len(messages)
        if room > 0:
            block = None if messages else self.block_ms
            try:
                answer = client.xreadgroup(GROUP, self.consumer, {stream_name(): ">"}, count=room, block=block)
            except ResponseError as exc:
                if "NOGROUP" not in str(exc):
                    raise
                self._group_ready = False  # the stream was deleted (Redis lost its data): create it again
                return messages
            for _, rows in answer or []:
                messages.extend(rows)
        return [(_text(i), f) for i, f in messages]

    def step(self) -> int:
        """Read, store and acknowledge one batch; returns the number of entries handled."""
        messages = self.read()
        if not messages:
            return 0
        with cyclic_gc_paused():
            return self._handle(messages)

    def _handle(self, messages: list) -> int:
        started = time.perf_counter()
        entries, malformed = [], []
        for entry_id, fields in messages:
            entry = entry_decode(entry_id, fields)
            (entries.append(entry) if entry is not None else malformed.append((entry_id, fields)))
        outcome = self._store(entries)
        dead = self._dead_letters(outcome.failed, {e.id: e for e in entries}) + [i for i, _ in malformed]
        for _, fields in malformed:
            redis_client().xadd(f"{stream_name()}:dead", fields)
        self._acknowledge([e for e in entries if e.id in set(outcome.done) | set(dead)], [i for i, _ in malformed])
        metrics.writer_batch(stored=outcome.stored, duplicates=outcome.duplicates, dead=len(dead),
                             seconds=time.perf_counter() - started)
        return len(messages)

    def _store(self, entries: list[Entry]) -> BatchOutcome:
        """Store, retrying while the database is unreachable (the entries stay pending, nothing is acknowledged)."""
        while True:
            if not connection.in_atomic_block:  # (a test's transaction) otherwise as between requests
                close_old_connections()
            try:
                return entries_store(entries)
            except (OperationalError, InterfaceError) as exc:
                logger.warning("database unavailable (%s); retrying the batch in 1 s", exc)
                connection.close()
                if self.stopping:
                    raise
                time.sleep(1)

    def _dead_letters(self, failed: list[str], by_id: dict[str, Entry]) -> list[str]:
        """Failed entries delivered `INGEST_WRITER_MAX_DELIVERIES` times or more go to the dead-letter stream."""
        dead = []
        for entry_id in failed:
            info = redis_client().xpending_range(stream_name(), GROUP, min=entry_id, max=entry_id, count=1)
            if info and info[0]["times_delivered"] >= settings.INGEST_WRITER_MAX_DELIVERIES:
                entry = by_id[entry_id]
                redis_client().xadd(f"{stream_name()}:dead", {
                    "n": entry.node_id, "t": entry.received_at.isoformat(), "r": orjson.dumps(entry.reports),
                    "id": entry_id})
                logger.error("ingest stream entry %s (node %s) failed %d times; moved to %s:dead", entry_id,
                             entry.node_id, info[0]["times_delivered"], stream_name())
                dead.append(entry_id)
        return dead

    def _acknowledge(self, entries: list[Entry], other_ids: list[str]) -> None:
        ids = [e.id for e in entries] + other_ids
        if not ids:
            return
        pipe = redis_client().pipeline(transaction=True)
        pipe.xack(stream_name(), GROUP, *ids)
        pipe.xdel(stream_name(), *ids)
        for entry in entries:
            pipe.srem(node_key(entry.node_id), entry.id)
        pipe.execute()

    def run(self, *, should_stop: Callable[[], bool] = lambda: False) -> None:
        logger.info("ingest writer %s reading %s (group %s), batches of up to %d", self.consumer, stream_name(),
                    GROUP, self.batch)
        backoff = 0.5
        while not (self.stopping or should_stop()):
            try:
                self.step()
                backoff = 0.5
            except STREAM_ERRORS as exc:
                # Redis restarting: what was stored and not yet acknowledged is claimed again and found stored.
                logger.warning("ingest stream unavailable (%s); retrying in %.1f s", exc, backoff)
                time.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
        logger.info("ingest writer %s stopped", self.consumer)


def redis_client():
    return _redis_client(blocking=True)


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)

