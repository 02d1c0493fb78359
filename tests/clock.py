"""Time is an input: a test that depends on "now" says which "now" it means.

* ``@pytest.mark.now(moment)`` (or ``pytestmark = pytest.mark.now(...)`` for a module) freezes the clock at
  ``moment`` for the test; ``tick=True`` lets it run on from there.
* The ``clock`` fixture gives the test the frozen clock to read and move: ``clock.now``, ``clock.advance(delta)``,
  ``clock.to(moment)``. Without a ``now`` mark it freezes at :data:`FROZEN_AT`.

time-machine patches Python's wall clock at the C level (``time.time``, ``datetime.now``, ``timezone.now``...);
the monotonic clocks stay real, so timeouts and sleeps behave. The clock is the process's own: a worker or a
server a test starts reads the real one, so real-process tests take their dates from the real clock instead.
The product asks PostgreSQL for no time of its own (every "now" comes from ``timezone.now()``), so a frozen
Python clock and the database agree.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from tests.health.factories import T0

# The moment most data-building tests are set in: the factories' T0, a weekday noon in UTC, far from a month's or
# a daylight-saving change's edge.
FROZEN_AT = T0


class Clock:
    def __init__(self, traveller: time_machine.travel):
        self._traveller = traveller
        self._coordinates = traveller.start()

    @property
    def now(self) -> datetime:
        return datetime.now(UTC)

    def advance(self, delta: timedelta | float) -> datetime:
        """Move the clock forward by `delta` (seconds or a timedelta) and return the new now."""
        self._coordinates.shift(delta if isinstance(delta, timedelta) else timedelta(seconds=delta))
        return self.now

    def to(self, moment: datetime) -> datetime:
        self._coordinates.move_to(moment)
        return self.now

    def stop(self) -> None:
        self._traveller.stop()


def freeze(moment: datetime, *, tick: bool = False) -> Clock:
    return Clock(time_machine.travel(moment, tick=tick))


@pytest.fixture
def clock(request) -> Clock:
    marker = request.node.get_closest_marker("now")
    if marker is not None:
        # The autouse fixture below has frozen it already: hand that clock out.
        return request.getfixturevalue("_now_marker")
    frozen = freeze(FROZEN_AT)
    request.addfinalizer(frozen.stop)
    return frozen


@pytest.fixture(autouse=True)
def _now_marker(request) -> Clock | None:
    marker = request.node.get_closest_marker("now")
    if marker is None:
        yield None
        return
    moment = marker.args[0] if marker.args else FROZEN_AT
    frozen = freeze(moment, tick=marker.kwargs.get("tick", False))
    yield frozen
    frozen.stop()


def pytest_configure(config) -> None:
    """In CI's moved-clock pass, make sure the clock really moved: a sitecustomize that failed to import would
    leave the pass on the real clock and prove nothing."""
    import os
    import tempfile
    import time

    days = os.environ.get("FLEET_TEST_CLOCK_SHIFT_DAYS", "").strip()
    if not days:
        return
    with tempfile.NamedTemporaryFile() as probe:  # the kernel stamps a new file with the real time
        moved = time.time() - os.stat(probe.name).st_mtime
    if abs(moved - float(days) * 86400) > 3600:
        raise pytest.UsageError(f"FLEET_TEST_CLOCK_SHIFT_DAYS={days} but the clock moved {moved / 86400:.2f} days: "
                                "is tests/timeshift on PYTHONPATH and time-machine installed?")
