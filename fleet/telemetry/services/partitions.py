"""Daily partitions of the raw history tables on PostgreSQL.

`telemetry_nodesample` and `telemetry_gpusample` are partitioned by range on `at`, one partition per UTC day,
named `<table>_pYYYYMMDD`. There is no default partition: a row must find its day's partition, so

* the periodic task `telemetry.create_history_partitions` keeps partitions from the start of the raw retention
  window to TELEMETRY_PARTITIONS_AHEAD_DAYS ahead, and
* ingest calls `ensure_days()` for the days of the rows it writes (a set lookup per process once a day is
  known, a catalogue query the first time, the CREATE only if the task has not run).

Retention (`drop_before`) detaches a whole expired partition with `DETACH PARTITION … CONCURRENTLY`, which takes
no lock that blocks inserts into the other partitions, and then drops it (a lock on that partition only). Inside
a transaction block (tests) the plain DETACH is used. A detach interrupted half-way is finalised on the next run,
a detached partition that was not dropped is dropped. Without a default partition CONCURRENTLY is allowed.

SQLite keeps plain tables; every function here does nothing there.
"""

import logging
import re
from collections.abc import Iterable
from datetime import UTC, date, datetime, time, timedelta
from time import perf_counter

from django.conf import settings
from django.db import DatabaseError, connection, transaction

logger = logging.getLogger(__name__)

TABLES = ("telemetry_nodesample", "telemetry_gpusample")
# Partitions are rebuilt with room for the minute's later reports on the same page, so folding a report into
# its bucket is a HOT update (no index write).
FILLFACTOR = 70
_NAME = re.compile(r"^(?P<table>telemetry_(?:node|gpu)sample)_p(?P<day>\d{8})$")
_known: set[tuple[str, date]] = set()


def supported(using=None) -> bool:
    return (using or connection).vendor == "postgresql"


def forget() -> None:
    """Forget which partitions this process has seen (after tables were recreated)."""
    _known.clear()


def missing_partition(exc: Exception) -> bool:
    """Whether a database error says a row found no partition for its day."""
    return "no partition of relation" in str(exc)


def partition_name(table: str, day: date) -> str:
    return f"{table}_p{day:%Y%m%d}"


def _day(moment: datetime) -> date:
    return moment.astimezone(UTC).date()


def ensure_days(days: Iterable[date], *, using=None) -> int:
    """Make sure every history table has a partition for each day. Returns how many were created."""
    using = using or connection
    if not supported(using):
        return 0
    missing = sorted({(table, day) for day in days for table in TABLES} - _known)
    created = 0
    for table, day in missing:
        if not _exists(using, partition_name(table, day)):
            created += _create(using, table, day)
        _known.add((table, day))
    return created


def ensure_range(first: datetime, last: datetime, *, using=None) -> int:
    start, end = _day(first), _day(last)
    return ensure_days((start + timedelta(days=i) for i in range((end - start).days + 1)), using=using)


def ensure_window(*, now: datetime) -> int:
    """The periodic task: partitions from the start of the raw window to TELEMETRY_PARTITIONS_AHEAD_DAYS ahead."""
    first = now - timedelta(hours=settings.TELEMETRY_RAW_RETENTION_HOURS)
    return ensure_range(first, now + timedelta(days=settings.TELEMETRY_PARTITIONS_AHEAD_DAYS))


def _exists(using, name: str) -> bool:
    with using.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [name])
        return cursor.fetchone()[0]


def _create(using, table: str, day: date) -> int:
    name = partition_name(table, day)
    start = datetime.combine(day, time.min, UTC)
    bounds = f"FROM ('{start.isoformat()}') TO ('{(start + timedelta(days=1)).isoformat()}')"
    try:
        # A savepoint: two processes racing to create the same partition must not abort the caller's transaction.
        with transaction.atomic(using=using.alias), using.cursor() as cursor:
            cursor.execute(f"CREATE TABLE IF NOT EXISTS {name} PARTITION OF {table} FOR VALUES {bounds} "
                           f"WITH (fillfactor = {FILLFACTOR})")
    except DatabaseError:
        if not _exists(using, name):
            raise
        return 0
    logger.info("created history partition %s", name)
    return 1


def partitions(*, using=None) -> list[dict]:
    """Every history partition (attached, being detached, or detached and left over), oldest first."""
    using = using or connection
    if not supported(using):
        return []
    with using.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, p.relname, i.inhdetachpending FROM pg_class c "
            "LEFT JOIN pg_inherits i ON i.inhrelid = c.oid LEFT JOIN pg_class p ON p.oid = i.inhparent "
            "WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace "
            "AND (c.relname LIKE 'telemetry\\_nodesample\\_p%%' OR c.relname LIKE 'telemetry\\_gpusample\\_p%%')")
        rows = cursor.fetchall()
    found = []
    for name, parent, pending in rows:
        match = _NAME.match(name)
        if match:
            day = datetime.strptime(match["day"], "%Y%m%d").date()
            found.append({"name": name, "table": match["table"], "day": day,
                          "attached": parent is not None and not pending, "detach_pending": bool(pending)})
    return sorted(found, key=lambda p: (p["day"], p["table"]))


def drop_before(cutoff: datetime, *, using=None, timings: dict | None = None) -> dict[str, int]:
    """Drop every partition whose whole day lies before `cutoff`. Returns dropped partitions per table.

    `timings`, when given, collects the seconds spent detaching and dropping (bench/retention.py)."""
    using = using or connection
    dropped = dict.fromkeys(TABLES, 0)
    if not supported(using):
        return dropped
    for part in partitions(using=using):
        if datetime.combine(part["day"] + timedelta(days=1), time.min, UTC) > cutoff:
            continue
        table, name = part["table"], part["name"]
        with using.cursor() as cursor:
            started = perf_counter()
            if part["detach_pending"]:
                cursor.execute(f"ALTER TABLE {table} DETACH PARTITION {name} FINALIZE")
            elif part["attached"]:
                mode = "" if using.in_atomic_block else " CONCURRENTLY"
                cursor.execute(f"ALTER TABLE {table} DETACH PARTITION {name}{mode}")
            detached = perf_counter()
            cursor.execute(f"DROP TABLE {name}")
        if timings is not None:
            timings["detach_s"] = timings.get("detach_s", 0.0) + detached - started
            timings["drop_s"] = timings.get("drop_s", 0.0) + perf_counter() - detached
        _known.discard((table, part["day"]))
        dropped[table] += 1
        logger.info("dropped history partition %s", name)
    return dropped
