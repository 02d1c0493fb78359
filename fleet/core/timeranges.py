"""The query every fleet-wide chart endpoint takes: a time range picked from four (1 h, 24 h, 7 d, 30 d).

Each range has a fixed step, so a chart has at most a few hundred points whatever the range, and every
endpoint answers the same buckets for the same range. Bucket edges are aligned to the step (UTC), so two
charts of one range line up and a refresh does not shift the points.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

# range -> (span, step). 30 d at 6 h steps is 120 points; 1 h at 1 min is 60.
RANGES: dict[str, tuple[timedelta, timedelta]] = {
    "1h": (timedelta(hours=1), timedelta(minutes=1)),
    "24h": (timedelta(hours=24), timedelta(minutes=15)),
    "7d": (timedelta(days=7), timedelta(hours=1)),
    "30d": (timedelta(days=30), timedelta(hours=6)),
}
DEFAULT_RANGE = "24h"


@dataclass(frozen=True)
class TimeRange:
    name: str
    start: datetime
    end: datetime
    step: timedelta

    @property
    def step_s(self) -> int:
        return int(self.step.total_seconds())

    def buckets(self) -> list[datetime]:
        """The start of every bucket in [start, end)."""
        out, at = [], self.start
        while at < self.end:
            out.append(at)
            at += self.step
        return out

    def slot(self, at: datetime) -> datetime:
        """The start of the bucket `at` falls in."""
        offset = int((at - self.start).total_seconds()) // self.step_s
        return self.start + offset * self.step


def time_range(name: str, *, now: datetime) -> TimeRange:
    span, step = RANGES[name]
    step_s = int(step.total_seconds())
    # The last bucket is the one `now` is in; the range covers whole buckets up to its end.
    end = datetime.fromtimestamp((int(now.timestamp()) // step_s + 1) * step_s, tz=now.tzinfo)
    return TimeRange(name=name, start=end - span, end=end, step=step)
