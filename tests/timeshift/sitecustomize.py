"""Moves this Python process's wall clock ahead when FLEET_TEST_CLOCK_SHIFT_DAYS is set.

CI's second pass puts this folder on PYTHONPATH, so every Python process of the run — pytest itself and each
worker, web server, writer and agent a test starts — reads a clock that many days ahead of the real one
(``time.time``, ``datetime.now``, ``date.today``...; time-machine patches them at the C level, ticking). The
monotonic clocks are left alone: timeouts and sleeps stay real. A test that depends on the real date fails
that pass. Python imports ``sitecustomize`` at start-up by itself; nothing in the product imports this.
"""

import os

_days = os.environ.get("FLEET_TEST_CLOCK_SHIFT_DAYS", "").strip()
if _days:
    import time
    from datetime import UTC, datetime, timedelta

    import time_machine

    time_machine.travel(datetime.now(UTC) + timedelta(days=float(_days)), tick=True).start()
    # time-machine starts a ticking clock when it is first read, not when the travel starts: read it now, or a
    # process that first asks for the time seconds after start-up (a worker importing Django) runs that many seconds
    # ahead of the others, and "after the step started" comparisons between processes fail.
    time.time()
