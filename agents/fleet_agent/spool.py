"""The durable on-disk spool: every report is written here before anyone tries to send it.

One SQLite database (WAL) per agent state directory holds:

* ``reports`` — spooled report bodies keyed by sequence, flagged ``precious`` when they carry events
  or an inventory, and ``urgent`` when they must not wait for the next interval;
* ``meta`` — the agent instance id (created once, the sequence epoch), the last sequence handed
  out, the last sequence the server acknowledged and the inventory hash it acknowledged;
* ``rejected`` — reports the server refused as invalid, kept (bounded) for inspection instead of
  blocking the queue forever.

The spool is bounded in bytes. When full, the oldest metric-only reports go first; reports with
events or inventory are dropped only when nothing else is left. ``ack(n)`` removes everything ≤ n.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
MAX_REJECTED_KEPT = 100

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
"""


@dataclass(frozen=True)
class SpooledReport:
    sequence: int
    body: bytes
    urgent: bool


def encode_report(report: dict) -> bytes:
    return json.dumps(report, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class Spool:
    """Thread-safe: the collector thread writes while the delivery thread reads and acks."""

    def __init__(self, path: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES, durable: bool = True):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        # FULL syncs the WAL on every commit (a report survives a power cut once spooled); NORMAL is
        # for the simulator, where hundreds of agents share one disk and a crash loses nothing real.
        self._db.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
        with self._lock, self._db:
            self._db.executescript(_SCHEMA)
        self.instance_id = self._ensure_instance_id()
        self._bytes = self._db.execute("SELECT COALESCE(SUM(size), 0) FROM reports").fetchone()[0]

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

    def _ensure_instance_id(self) -> str:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                value = self._get("instance_id")
                if value is None:
                    value = str(uuid.uuid4())
                    self._set("instance_id", value)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            return value

    def next_sequence(self) -> int:
        """Hand out the next sequence number; persisted, so it only grows across restarts."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                sequence = int(self._get("last_sequence") or 0) + 1
                self._set("last_sequence", str(sequence))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
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
        precious = bool(report.get("events")) or inventory is not None
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(
                    "INSERT OR REPLACE INTO reports (sequence, body, size, precious, urgent, inventory_hash,"
                    " spooled_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        report["sequence"],
                        body,
                        len(body),
                        int(precious),
                        int(urgent),
                        inventory["hash"] if inventory else None,
                        time.time(),
                    ),
                )
                self._bytes += len(body)
                self._enforce_bound()
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                self._bytes = self._db.execute("SELECT COALESCE(SUM(size), 0) FROM reports").fetchone()[0]
                raise

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
        """The oldest unacknowledged reports, at most ``limit`` and about ``max_bytes`` in total."""
        with self._lock:
            rows = self._db.execute(
                "SELECT sequence, body, urgent FROM reports ORDER BY sequence LIMIT ?", (limit,)
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
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
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
                if sequence > int(self._get("last_acked_sequence") or 0):
                    self._set("last_acked_sequence", str(sequence))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._bytes -= size
            return removed

    def reject(self, sequence: int, reason: str) -> None:
        """Move a report the server refused as invalid out of the queue (kept for inspection)."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute(
                    "SELECT body, size FROM reports WHERE sequence = ?", (sequence,)
                ).fetchone()
                if row is not None:
                    self._db.execute(
                        "INSERT OR REPLACE INTO rejected (sequence, body, reason, rejected_at)"
                        " VALUES (?, ?, ?, ?)",
                        (sequence, row[0], reason[:2000], time.time()),
                    )
                    self._db.execute("DELETE FROM reports WHERE sequence = ?", (sequence,))
                    self._bytes -= row[1]
                self._db.execute(
                    "DELETE FROM rejected WHERE sequence NOT IN"
                    " (SELECT sequence FROM rejected ORDER BY sequence DESC LIMIT ?)",
                    (MAX_REJECTED_KEPT,),
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def depth(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM reports").fetchone()[0]

    def size_bytes(self) -> int:
        with self._lock:
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


def read_spool_state(path: str | Path) -> dict | None:
    """Instance id and counters of an existing spool, read-only (for ``status`` and ``collect``)."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
            depth, size = db.execute("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM reports").fetchone()
            rejected = db.execute("SELECT COUNT(*) FROM rejected").fetchone()[0]
        finally:
            db.close()
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
    }
