"""Keeping evaluation cycles from overlapping.

PostgreSQL: a transaction-level advisory lock, so it is released with the cycle's transaction whatever
happens. SQLite: the cycle's `IMMEDIATE` transaction already holds the database's write lock, which
serialises writers. A partial unique constraint on open findings backs both up.
"""

from django.db import connection

# pg_advisory lock key: "fleet.health.evaluate" folded into a signed 64-bit integer.
ADVISORY_LOCK_KEY = 0x6865616C74680001


def cycle_lock_acquire(*, wait_timeout: str | None) -> bool:
    """Take the cycle lock inside the current transaction.

    `wait_timeout=None` tries once and returns False when another cycle holds the lock (the periodic cycle
    skips: the next one catches up). A PostgreSQL interval such as "30s" waits that long and then raises
    `OperationalError` (an urgent node cycle must run; its task retries).
    """
    if connection.vendor != "postgresql":
        return True  # SQLite: the IMMEDIATE transaction already holds the database's write lock
    with connection.cursor() as cursor:
        if wait_timeout is not None:
            # SET cannot take a bound parameter; the value is the caller's constant, never user input.
            cursor.execute(f"SET LOCAL lock_timeout = '{wait_timeout}'")
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [ADVISORY_LOCK_KEY])
            return True
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [ADVISORY_LOCK_KEY])
        return bool(cursor.fetchone()[0])
