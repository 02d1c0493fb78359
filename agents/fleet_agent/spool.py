"""The durable on-disk spool: every report is written here before anyone tries to send it.

One SQLite database (WAL) per agent state directory holds:

* ``reports`` — spooled report bodies keyed by sequence, flagged ``precious`` when they carry events
  or an inventory, and ``urgent`` when they must not wait for the next interval;
* ``meta`` — the agent instance id (created once, the sequence epoch), the last sequence handed
  out, the last sequence the server acknowledged and the inventory hash it acknowledged;
* ``rejected`` — reports set aside because the server refused them as invalid or failed on them
  again and again: out of the queue so that they never block it, kept for an operator to inspect,
  export, re-queue (under a new sequence) or drop (``fleet-agent spool …``);
* ``server_errors`` — how many times the server answered a server error to a report sent alone, so
  that the count that sets it aside survives a restart;
* ``actions`` — every action the server sent (by id), so that each runs at most once across restarts: queued,
  running, then finished with its outcome, which rides the next report (``reported_seq``).

The spool is bounded in bytes. When full, the oldest metric-only reports go first; reports with
events or inventory are dropped only when nothing else is left. ``ack(n)`` removes everything ≤ n.
The rejected table has its own bound; what it drops is logged and counted (``rejected_dropped``).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from fleet_agent.timeutil import rfc3339

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
MAX_REJECTED_KEPT = 1000
# A sequence handed out but not yet spooled holds back delivery of anything above it (see
# ``pending``) for at most this long: a report whose build failed never spools its sequence.
RESERVATION_TTL_S = 60.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS reports (
    sequence INTEGER PRIMARY KEY,
    body BLOB NOT NULL,
    size INTEGER NOT NULL,
    precious INTEGER NOT NULL,
    urgent INTEGER NOT NULL,
    inventory_hash TEXT,
    spooled_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS reports_by_value ON reports (precious, sequence);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rejected (
    sequence INTEGER PRIMARY KEY,
    body BLOB NOT NULL,
    reason TEXT NOT NULL,
    rejected_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS server_errors (
    sequence INTEGER PRIMARY KEY,
    count INTEGER NOT NULL,
    last_error TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS actions (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    state TEXT NOT NULL,
    boot_id TEXT NOT NULL DEFAULT '',
    received_at REAL NOT NULL,
    result TEXT,
    reported_seq INTEGER
);
"""
ACTIONS_KEPT_S = 30 * 86400  # how long a finished, reported action id is remembered (the server stops at 7 days)


@dataclass(frozen=True)
class SpooledReport:
    sequence: int
    body: bytes
    urgent: bool


@dataclass(frozen=True)
class RejectedReport:
    sequence: int
    body: bytes
    reason: str
    rejected_at: float  # Unix time


def encode_report(report: dict) -> bytes:
    return json.dumps(report, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class Spool:
    """Thread-safe: the collector thread writes while the delivery thread reads and acks.

    Other processes (``fleet-agent spool …`` while the daemon runs) may write to the same file; SQLite
    serialises the writes and ``put`` notices their commits (``PRAGMA data_version``).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_rejected_bytes: int | None = None,
        durable: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        # Set-aside reports get a bound of their own, so that a stream of them cannot push live
        # reports out of the spool.
        self.max_rejected_bytes = max_rejected_bytes if max_rejected_bytes is not None else max(max_bytes // 4, 1)
        self._clock = clock
        self._lock = threading.Lock()
        self._reserved: dict[int, float] = {}  # sequence handed out -> when, until it is spooled
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        # FULL syncs the WAL on every commit (a report survives a power cut once spooled); NORMAL is
        # for the simulator, where hundreds of agents share one disk and a crash loses nothing real.
        self._db.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
        with self._lock, self._db:
            self._db.executescript(_SCHEMA)
        self.instance_id = self._ensure_instance_id()
        self._data_version = -1
        with self._lock:
            self._sync_bytes()

    # -- plumbing -------------------------------------------------------------------------------

    @contextmanager
    def _write(self) -> Iterator[None]:
        """One write transaction under the thread lock (IMMEDIATE: other processes wait, not fail)."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                self._data_version = -1  # recount the bytes on next use
                raise

    def _sync_bytes(self) -> None:
        """Recount the queued bytes when another connection committed since we last looked."""
        version = self._db.execute("PRAGMA data_version").fetchone()[0]
        if version != self._data_version:
            self._bytes = self._db.execute("SELECT COALESCE(SUM(size), 0) FROM reports").fetchone()[0]
            self._data_version = version

    # -- meta -----------------------------------------------------------------------------------

    def _get(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def _set(self, key: str, value: str) -> None:
        self._db.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?)"
            " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def _add(self, key: str, amount: int) -> None:
        self._set(key, str(int(self._get(key) or 0) + amount))

    def _ensure_instance_id(self) -> str:
        with self._write():
            value = self._get("instance_id")
            if value is None:
                value = str(uuid.uuid4())
                self._set("instance_id", value)
        return value

    def _allocate_sequence(self) -> int:
        sequence = int(self._get("last_sequence") or 0) + 1
        self._set("last_sequence", str(sequence))
        return sequence

    def next_sequence(self) -> int:
        """Hand out the next sequence number; persisted, so it only grows across restarts.

        Delivery holds back anything above it until it is spooled (``put``): otherwise a report
        spooled meanwhile by another process under a higher sequence could be acknowledged first,
        and the server, which keeps only sequences above the highest it stored, would drop this one.
        """
        with self._write():
            sequence = self._allocate_sequence()
            self._reserved[sequence] = self._clock()
        return sequence

    def last_sequence(self) -> int:
        with self._lock:
            return int(self._get("last_sequence") or 0)

    def last_acked_sequence(self) -> int:
        with self._lock:
            return int(self._get("last_acked_sequence") or 0)

    def acked_inventory_hash(self) -> str | None:
        with self._lock:
            return self._get("acked_inventory_hash")

    # -- queue ----------------------------------------------------------------------------------

    def put(self, report: dict, *, urgent: bool = False) -> None:
        body = encode_report(report)
        inventory = report.get("inventory") or None
        results = report.get("action_results") or []
        precious = bool(report.get("events")) or inventory is not None or bool(results)
        with self._write():
            self._sync_bytes()
            self._insert(report["sequence"], body, precious=precious, urgent=urgent,
                         inventory_hash=inventory["hash"] if inventory else None)
            self._enforce_bound()
            self._reserved.pop(report["sequence"], None)
            # In the same transaction: the outcomes now travel in this report, and only in it.
            self._db.executemany("UPDATE actions SET reported_seq = ? WHERE id = ?",
                                 [(report["sequence"], result["id"]) for result in results])

    def _insert(self, sequence: int, body: bytes, *, precious: bool, urgent: bool, inventory_hash: str | None) -> None:
        replaced = self._db.execute("SELECT size FROM reports WHERE sequence = ?", (sequence,)).fetchone()
        self._db.execute(
            "INSERT OR REPLACE INTO reports (sequence, body, size, precious, urgent, inventory_hash,"
            " spooled_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (sequence, body, len(body), int(precious), int(urgent), inventory_hash, time.time()),
        )
        self._bytes += len(body) - (replaced[0] if replaced else 0)

    def _enforce_bound(self) -> None:
        if self._bytes <= self.max_bytes:
            return
        dropped = {0: 0, 1: 0}
        for precious in (0, 1):
            # Oldest first, in chunks; the newest report is never dropped (it was just written).
            while self._bytes > self.max_bytes:
                rows = self._db.execute(
                    "SELECT sequence, size FROM reports WHERE precious = ? AND sequence <"
                    " (SELECT MAX(sequence) FROM reports) ORDER BY sequence LIMIT 64",
                    (precious,),
                ).fetchall()
                if not rows:
                    break
                for sequence, size in rows:
                    if self._bytes <= self.max_bytes:
                        break
                    self._db.execute("DELETE FROM reports WHERE sequence = ?", (sequence,))
                    self._bytes -= size
                    dropped[precious] += 1
        if dropped[0] or dropped[1]:
            log.warning(
                "spool full (%d bytes max): dropped %d metric-only and %d event/inventory reports",
                self.max_bytes,
                dropped[0],
                dropped[1],
            )

    def pending(self, limit: int = 100, max_bytes: int | None = None) -> list[SpooledReport]:
        """The oldest unacknowledged reports, at most ``limit`` and about ``max_bytes`` in total.

        Stops below the lowest sequence handed out and not yet spooled (see ``next_sequence``).
        """
        with self._lock:
            now = self._clock()
            self._reserved = {seq: at for seq, at in self._reserved.items() if now - at < RESERVATION_TTL_S}
            below = min(self._reserved, default=None)
            rows = self._db.execute(
                "SELECT sequence, body, urgent FROM reports WHERE ? IS NULL OR sequence < ?"
                " ORDER BY sequence LIMIT ?",
                (below, below, limit),
            ).fetchall()
        batch: list[SpooledReport] = []
        total = 0
        for sequence, body, urgent in rows:
            if max_bytes is not None and batch and total + len(body) > max_bytes:
                break
            batch.append(SpooledReport(sequence, bytes(body), bool(urgent)))
            total += len(body)
        return batch

    def ack(self, sequence: int) -> int:
        """The server stored everything ≤ ``sequence``: forget it. Returns how many were removed."""
        with self._write():
            self._sync_bytes()
            row = self._db.execute(
                "SELECT inventory_hash FROM reports WHERE sequence <= ? AND inventory_hash IS NOT NULL"
                " ORDER BY sequence DESC LIMIT 1",
                (sequence,),
            ).fetchone()
            if row is not None:
                self._set("acked_inventory_hash", row[0])
            size = self._db.execute(
                "SELECT COALESCE(SUM(size), 0) FROM reports WHERE sequence <= ?", (sequence,)
            ).fetchone()[0]
            removed = self._db.execute("DELETE FROM reports WHERE sequence <= ?", (sequence,)).rowcount
            self._db.execute("DELETE FROM server_errors WHERE sequence <= ?", (sequence,))
            if sequence > int(self._get("last_acked_sequence") or 0):
                self._set("last_acked_sequence", str(sequence))
            self._bytes -= size
        return removed

    # -- reports the server will not take -------------------------------------------------------

    def record_server_error(self, sequence: int, error: str) -> int:
        """Count one server error for a report sent alone; returns its count so far."""
        with self._write():
            self._db.execute(
                "INSERT INTO server_errors (sequence, count, last_error) VALUES (?, 1, ?)"
                " ON CONFLICT(sequence) DO UPDATE SET count = count + 1, last_error = excluded.last_error",
                (sequence, error[:2000]),
            )
            return self._db.execute("SELECT count FROM server_errors WHERE sequence = ?", (sequence,)).fetchone()[0]

    def server_errors(self, sequence: int) -> int:
        with self._lock:
            row = self._db.execute("SELECT count FROM server_errors WHERE sequence = ?", (sequence,)).fetchone()
            return row[0] if row else 0

    def reject(self, sequence: int, reason: str) -> bool:
        """Set a report aside: out of the queue, into ``rejected`` (kept for inspection and retry).

        Returns False when the report is no longer queued (acknowledged or dropped meanwhile).
        """
        with self._write():
            self._sync_bytes()
            row = self._db.execute("SELECT body, size FROM reports WHERE sequence = ?", (sequence,)).fetchone()
            self._db.execute("DELETE FROM server_errors WHERE sequence = ?", (sequence,))
            if row is None:
                return False
            self._db.execute(
                "INSERT OR REPLACE INTO rejected (sequence, body, reason, rejected_at) VALUES (?, ?, ?, ?)",
                (sequence, row[0], reason[:2000], time.time()),
            )
            self._db.execute("DELETE FROM reports WHERE sequence = ?", (sequence,))
            self._bytes -= row[1]
            self._add("rejected_total", 1)
            self._bound_rejected()
        return True

    def _bound_rejected(self) -> None:
        count, size = self._db.execute("SELECT COUNT(*), COALESCE(SUM(LENGTH(body)), 0) FROM rejected").fetchone()
        if count <= MAX_REJECTED_KEPT and size <= self.max_rejected_bytes:
            return
        dropped = []
        # Oldest first; the newest one is always kept.
        for sequence, length in self._db.execute(
            "SELECT sequence, LENGTH(body) FROM rejected ORDER BY rejected_at, sequence"
        ).fetchall()[:-1]:
            if count <= MAX_REJECTED_KEPT and size <= self.max_rejected_bytes:
                break
            dropped.append(sequence)
            count, size = count - 1, size - length
        self._db.executemany("DELETE FROM rejected WHERE sequence = ?", [(seq,) for seq in dropped])
        self._add("rejected_dropped", len(dropped))
        log.warning(
            "rejected reports exceed %d reports / %d bytes: dropped the %d oldest (sequences %s)",
            MAX_REJECTED_KEPT, self.max_rejected_bytes, len(dropped), _ranges(dropped),
        )

    def rejected_reports(self, sequences: Iterable[int] | None = None) -> list[RejectedReport]:
        """Set-aside reports, oldest first (all of them, or those with the given sequences)."""
        with self._lock:
            return self._rejected_rows(sequences)

    def requeue_rejected(self, sequences: Iterable[int] | None = None) -> list[tuple[int, int]]:
        """Put set-aside reports back in the queue under new sequences; returns (old, new) pairs.

        A new sequence, because the server has acknowledged past the old one and would take the
        report for a duplicate. Its inventory is left out: it is stale by now, and applying it would
        roll the node's inventory back (the agent sends the current one whenever it differs from the
        acknowledged one). The rest is unchanged (``collected_at`` stays the time of collection).
        Re-queued reports are never urgent: they are old news.
        """
        moved = []
        with self._write():
            self._sync_bytes()
            for report in self._rejected_rows(sequences):
                body = json.loads(report.body)
                body["sequence"] = self._allocate_sequence()
                body["inventory"] = None
                self._insert(body["sequence"], encode_report(body), urgent=False,
                             precious=bool(body.get("events")), inventory_hash=None)
                self._db.execute("DELETE FROM rejected WHERE sequence = ?", (report.sequence,))
                moved.append((report.sequence, body["sequence"]))
            self._enforce_bound()
        return moved

    def drop_rejected(self, sequences: Iterable[int] | None = None) -> list[int]:
        """Delete set-aside reports for good (an operator's decision); returns their sequences."""
        with self._write():
            dropped = [report.sequence for report in self._rejected_rows(sequences)]
            self._db.executemany("DELETE FROM rejected WHERE sequence = ?", [(seq,) for seq in dropped])
        if dropped:
            log.warning("dropped %d rejected report(s) on request: sequences %s", len(dropped), _ranges(dropped))
        return dropped

    def _rejected_rows(self, sequences: Iterable[int] | None) -> list[RejectedReport]:
        return _select_rejected(self._db, sequences)

    # -- actions ----------------------------------------------------------------------------------

    def action_known(self, action_id: str) -> bool:
        with self._lock:
            return self._db.execute("SELECT 1 FROM actions WHERE id = ?", (action_id,)).fetchone() is not None

    def action_claim(self, action_id: str, kind: str, body: dict, *, boot_id: str = "") -> bool:
        """Record an action before anything runs; False when this id was seen before (it never runs twice)."""
        with self._write():
            return self._db.execute(
                "INSERT OR IGNORE INTO actions (id, kind, body, state, boot_id, received_at) VALUES (?, ?, ?, 'queued',"
                " ?, ?)", (action_id, kind, json.dumps(body, sort_keys=True), boot_id, time.time())).rowcount == 1

    def action_start(self, action_id: str) -> bool:
        with self._write():
            return self._db.execute("UPDATE actions SET state = 'running' WHERE id = ? AND state = 'queued'",
                                    (action_id,)).rowcount == 1

    def action_finish(self, action_id: str, kind: str, result: dict) -> None:
        """The outcome, kept until a report carries it (an action refused on arrival is recorded here directly)."""
        with self._write():
            self._db.execute(
                "INSERT INTO actions (id, kind, body, state, received_at, result) VALUES (?, ?, '{}', 'finished', ?, ?)"
                " ON CONFLICT(id) DO UPDATE SET state = 'finished', result = excluded.result",
                (action_id, kind, time.time(), json.dumps(result)))

    def actions_in_state(self, state: str) -> list[tuple[str, str, dict, str]]:
        """(id, kind, body, boot id at claim) of the actions in ``state``, oldest first."""
        with self._lock:
            rows = self._db.execute("SELECT id, kind, body, boot_id FROM actions WHERE state = ? ORDER BY received_at",
                                    (state,)).fetchall()
        return [(row[0], row[1], json.loads(row[2]), row[3]) for row in rows]

    def action_results_unreported(self, limit: int = 100) -> list[dict]:
        with self._lock:
            rows = self._db.execute(
                "SELECT result FROM actions WHERE state = 'finished' AND reported_seq IS NULL ORDER BY received_at"
                " LIMIT ?", (limit,)).fetchall()
        return [json.loads(row[0]) for row in rows]

    def actions_prune(self, *, now: float | None = None) -> int:
        cutoff = (now if now is not None else time.time()) - ACTIONS_KEPT_S
        with self._write():
            return self._db.execute("DELETE FROM actions WHERE state = 'finished' AND reported_seq IS NOT NULL AND"
                                    " received_at < ?", (cutoff,)).rowcount

    # -- state ----------------------------------------------------------------------------------

    def depth(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM reports").fetchone()[0]

    def size_bytes(self) -> int:
        with self._lock:
            self._sync_bytes()
            return self._bytes

    def rejected_count(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM rejected").fetchone()[0]

    def has_urgent(self) -> bool:
        with self._lock:
            return self._db.execute("SELECT 1 FROM reports WHERE urgent = 1 LIMIT 1").fetchone() is not None

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _ranges(sequences: list[int]) -> str:
    """``1-3, 7`` for [1, 2, 3, 7]: short log lines even when many reports are named."""
    runs: list[list[int]] = []  # [first, last]
    for sequence in sorted(sequences):
        if runs and sequence == runs[-1][1] + 1:
            runs[-1][1] = sequence
        else:
            runs.append([sequence, sequence])
    return ", ".join(str(first) if first == last else f"{first}-{last}" for first, last in runs)


def _select_rejected(db: sqlite3.Connection, sequences: Iterable[int] | None) -> list[RejectedReport]:
    rows = db.execute("SELECT sequence, body, reason, rejected_at FROM rejected ORDER BY rejected_at, sequence")
    wanted = None if sequences is None else set(sequences)
    return [RejectedReport(seq, bytes(body), reason, at) for seq, body, reason, at in rows
            if wanted is None or seq in wanted]


@contextmanager
def _read_only(path: Path) -> Iterator[sqlite3.Connection]:
    # Read-only, so that an operator's `status` run as another user never creates files the agent
    # then cannot open.
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        yield db
    finally:
        db.close()


def read_rejected(path: str | Path, sequences: Iterable[int] | None = None) -> list[RejectedReport] | None:
    """The set-aside reports of an existing spool, read-only; None when there is no spool."""
    path = Path(path)
    if not path.exists():
        return None
    with _read_only(path) as db:
        return _select_rejected(db, sequences)


def read_spool_state(path: str | Path) -> dict | None:
    """Instance id and counters of an existing spool, read-only (for ``status`` and ``collect``)."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        with _read_only(path) as db:
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
            depth, size = db.execute("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM reports").fetchone()
            rejected = db.execute("SELECT COUNT(*) FROM rejected").fetchone()[0]
            latest = db.execute(
                "SELECT sequence, reason, rejected_at FROM rejected ORDER BY rejected_at DESC, sequence DESC LIMIT 1"
            ).fetchone()
    except sqlite3.Error as err:
        log.warning("cannot read spool %s: %s", path, err)
        return None
    return {
        "instance_id": meta.get("instance_id"),
        "last_sequence": int(meta.get("last_sequence", 0)),
        "last_acked_sequence": int(meta.get("last_acked_sequence", 0)),
        "acked_inventory_hash": meta.get("acked_inventory_hash"),
        "depth": depth,
        "bytes": size,
        "rejected": rejected,
        "rejected_total": int(meta.get("rejected_total", 0)),
        "rejected_dropped": int(meta.get("rejected_dropped", 0)),
        "last_rejection": None if latest is None else {
            "sequence": latest[0],
            "reason": latest[1],
            "rejected_at": rfc3339(datetime.fromtimestamp(latest[2], UTC)),
        },
    }
