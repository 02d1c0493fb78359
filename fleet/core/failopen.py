"""Optional dependencies of the request path that may fail without failing the request.

Ingest needs only the database. Redis serves two conveniences on the way: flood-protection counters (the cache)
and the urgent-evaluation trigger (the Celery broker). When Redis is down or hangs, each of them lets the request
go on: the failure is counted (Prometheus), logged at most once a minute per process, and the dependency is not
asked again for `RETRY_AFTER_FAILURE_S`, so an outage costs each process one failed call every few seconds
rather than a connection attempt (or timeout) on every request. `/readyz` still names the broker as down.
"""

import logging
import threading
import time

from celery import current_app

from . import metrics

logger = logging.getLogger(__name__)

RETRY_AFTER_FAILURE_S = 5.0
LOG_EVERY_S = 60.0
# One quick retry: the first publish after a Redis restart finds a dead pooled connection, and the retry opens a
# new one. Celery's default policy (3 retries up to 1 s apart) and its result backend (reconnecting for about
# 20 s) would hold a report past the agent's timeout.
_PUBLISH_RETRY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.1, "interval_max": 0.1}


class Dependency:
    """Per-process memory of one failing dependency: skip it for a while after a failure, and log rarely."""

    def __init__(self, name: str, counter):
        self.name = name
        self._counter = counter
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self._retry_at = 0.0
        self._logged_at = float("-inf")
        self._skipped = 0

    def available(self) -> bool:
        return time.monotonic() >= self._retry_at

    def failed(self, label: str, exc: BaseException | None) -> None:
        """Count one request that went on without the dependency; `exc` is its error, None when it was skipped."""
        self._counter.labels(label).inc()
        now = time.monotonic()
        with self._lock:
            if exc is not None:
                self._retry_at = now + RETRY_AFTER_FAILURE_S
            self._skipped += 1
            if now - self._logged_at < LOG_EVERY_S:
                return
            self._logged_at, count, self._skipped = now, self._skipped, 0
        logger.warning("%s unavailable (%s): %d request(s) went on without it in this process", self.name,
                       f"{exc.__class__.__name__}: {exc}" if exc else "skipped after an earlier failure", count)


broker = Dependency("task broker", metrics.TASKS_NOT_ENQUEUED)


def enqueue(task_name: str, **kwargs) -> bool:
    """Send a task whose result nobody waits for; False (logged, counted) if the broker is unavailable. For work
    a periodic task also does, so a lost message only delays it."""
    if not broker.available():
        broker.failed(task_name, None)
        return False
    try:
        current_app.send_task(task_name, kwargs=kwargs, ignore_result=True, retry_policy=_PUBLISH_RETRY)
    except Exception as exc:  # kombu, redis-py and socket errors alike: the request must not fail over it
        broker.failed(task_name, exc)
        return False
    return True
