"""Rising counters over a sliding window: what rules judge for error counters that only ever grow.

NVLink and InfiniBand error counters are cumulative (since the driver loaded, or since the port came up);
their absolute value says little, their recent growth is the fault. ``CounterWindow`` keeps a few timed
samples per counter and answers "how much did it grow over the last ``window_s`` seconds". A counter that
goes backwards was reset (driver reload, port reset): its history restarts from that value.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable


class CounterWindow:
    def __init__(self, window_s: float):
        self.window_s = window_s
        self._samples: dict[Hashable, deque[tuple[float, int]]] = {}

    def update(self, key: Hashable, value: int | None, now: float) -> int | None:
        """Record ``value`` at ``now`` (monotonic seconds); returns its growth over the window (0 for the
        first sample, None when the value is unknown)."""
        if value is None:
            return None
        samples = self._samples.get(key)
        if samples is None:
            samples = self._samples[key] = deque()
        elif samples and value < samples[-1][1]:
            samples.clear()  # the counter was reset
        samples.append((now, value))
        # Keep the newest sample at or before the window's start as the reference point.
        start = now - self.window_s
        while len(samples) > 1 and samples[1][0] <= start:
            samples.popleft()
        return value - samples[0][1]

    def forget(self, keep: set) -> None:
        """Drop counters that no longer exist (a port or GPU gone)."""
        for key in [k for k in self._samples if k not in keep]:
            del self._samples[key]
