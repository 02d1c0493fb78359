"""Daily partitions of the history tables on PostgreSQL: the raw history and the 5-minute rollups.

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

The rollups (`telemetry_nodesamplerollup`, `telemetry_gpusamplerollup`, `ROLLUP_TABLES`) are partitioned the same
way on `bucket`, for the rollup retention window (TELEMETRY_ROLLUP_RETENTION_DAYS) and the days ahead; the
rollup task makes the partitions of the days it writes. They also have a default partition
(`<table>_default`), so a rollup row whose day has no partition yet (one written outside the rollup task)
is kept rather than refused; retention deletes from it what is past the window. A table with a default partition
cannot detach one CONCURRENTLY, so the rollups' whole days are detached plainly: a short lock on the parent,
which only the rollup task and the charts use.

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
ROLLUP_TABLES = ("telemetry_nodesamplerollup", "telemetry_gpusamplerollup")
# Partitions are rebuilt with room for the minute's later reports on the same page, so folding a report into
# its bucket is a HOT update (no index write).
FILLFACTOR = 70
_NAME = re.compile(r"^(?P<table>telemetry_(?:node|gpu)sample(?:rollup)?)_p(?P<day>\d{8})$")
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


def default_name(table: str) -> str:
    return f"{table}_default"


def _day(moment: datetime) -> date:
    return moment.astimezone(UTC).date()


def ensure_days(days: Iterable[date], *, tables: tuple[str, ...] = TABLES, using=None) -> int:
    """Make sure each of `tables` (the raw history unless told) has a partition for each day. Returns how many
    were created."""
    using = using or connection
    if not supported(using):
        return 0
    missing = sorted({(table, day) for day in days for table in tables} - _known)
    created = 0
    for table, day in missing:
        if not _exists(using, partition_name(table, day)):
            created += _create(using, table, day)
        _known.add((table, day))
    return created


def ensure_range(first: datetime, last: datetime, *, tables: tuple[str, ...] = TABLES, using=None) -> int:
    start, end = _day(first), _day(last)
    return ensure_days((start + timedelta(days=i) for i in range((end - start).days + 1)), tables=tables,
                       using=using)


def ensure_window(*, now: datetime) -> int:
    """The periodic task: partitions from the start of each retention window (raw history, rollups) to
    TELEMETRY_PARTITIONS_AHEAD_DAYS ahead."""
    ahead = now + timedelta(days=settings.TELEMETRY_PARTITIONS_AHEAD_DAYS)
    raw = ensure_range(now - timedelta(hours=settings.TELEMETRY_RAW_RETENTION_HOURS), ahead)
    return raw + ensure_range(now - timedelta(days=settings.TELEMETRY_ROLLUP_RETENTION_DAYS), ahead,
                              tables=ROLLUP_TABLES)


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
            if table in ROLLUP_TABLES:
                # Rows of this day that went to the default partition move to the new one, which is then attached
                # (attaching checks that the default keeps no row of its range).
                end = start + timedelta(days=1)
                cursor.execute(f"CREATE TABLE {name} (LIKE {table} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)")
                cursor.execute(f"WITH moved AS (DELETE FROM {default_name(table)} WHERE bucket >= %s "  # noqa: S608
                               f"AND bucket < %s RETURNING *) INSERT INTO {name} SELECT * FROM moved", [start, end])
                cursor.execute(f"ALTER TABLE {table} ATTACH PARTITION {name} FOR VALUES {bounds}")
            else:
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
            "AND (c.relname LIKE 'telemetry\\_nodesample\\_p%%' OR c.relname LIKE 'telemetry\\_gpusample\\_p%%' "
            "OR c.relname LIKE 'telemetry\\_nodesamplerollup\\_p%%' "
            "OR c.relname LIKE 'telemetry\\_gpusamplerollup\\_p%%')")
        rows = cursor.fetchall()
    found = []
    for name, parent, pending in rows:
        match = _NAME.match(name)
        if match:
            day = datetime.strptime(match["day"], "%Y%m%d").date()
            found.append({"name": name, "table": match["table"], "day": day,
                          "attached": parent is not None and not pending, "detach_pending": bool(pending)})
    return sorted(found, key=lambda p: (p["day"], p["table"]))


def drop_before(cutoff: datetime, *, tables: tuple[str, ...] = TABLES, using=None,
                timings: dict | None = None) -> dict[str, int]:
    """Drop every partition of `tables` (the raw history unless told) whose whole day lies before `cutoff`.
    Returns dropped partitions per table.

    `timings`, when given, collects the seconds spent detaching and dropping (bench/retention.py)."""
    using = using or connection
    dropped = dict.fromkeys(tables, 0)
    if not supported(using):
        return dropped
    for part in partitions(using=using):
        if part["table"] not in tables:
            continue
        if datetime.combine(part["day"] + timedelta(days=1), time.min, UTC) > cutoff:
            continue
        table, name = part["table"], part["name"]
        with using.cursor() as cursor:
            started = perf_counter()
            if part["detach_pending"]:
                cursor.execute(f"ALTER TABLE {table} DETACH PARTITION {name} FINALIZE")
            elif part["attached"]:
                # Not CONCURRENTLY inside a transaction block, nor where the table has a default partition.
                mode = "" if using.in_atomic_block or table in ROLLUP_TABLES else " CONCURRENTLY"
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
