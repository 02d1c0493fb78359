"""Delivery: moves spooled reports to the server in batches, honouring its acknowledgements.

``Delivery`` does the work and owns the retry state but runs no thread, so the simulator can pump
hundreds of agents from a small worker pool; ``SenderThread`` runs it for the daemon so that a
slow or unreachable server never holds up collection.

* A batch is at most 100 reports and ~3.5 MiB before gzip (the server accepts 4 MiB decoded).
* The server answers with ``acked_sequence``; everything ≤ it leaves the spool, so a retried batch
  is never duplicated on the server and an unacknowledged one is never lost.
* What an error answer means for the data (``classify``): *invalid* (400, 413, 422) — a report in
  the batch is bad; *server error* (500 and the other 5xx but 502/503/504) — the server failed on
  something in the batch, or is broken; *transient* (no answer, 429, 502/503/504, 401/403, anything
  else) — nothing is wrong with the data, everything stays queued.
* An invalid or server-error batch is split in halves until the report is found (a batch of 100 with
  one poison report costs about 2·log2(100) requests); the reports around it flow on. An invalid
  report is set aside at once (the spool's ``rejected`` table); a server error on a report sent alone
  is counted in the spool, and the report is set aside after ``max_server_errors`` of them, so that it
  can never jam the queue, while a server that is down or shedding load jams nothing.
* Failures back off exponentially (base × 2ⁿ, capped) with jitter. A ``Retry-After`` from the server
  replaces that back-off: the agent waits at least as long (capped), plus jitter, and even an urgent
  report waits it out.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from fleet_agent.client import ControlPlaneClient, DeliveryError
from fleet_agent.spool import Spool, SpooledReport

log = logging.getLogger(__name__)

MAX_BATCH_REPORTS = 100
MAX_BATCH_BYTES = 3_500_000
BACKOFF_BASE_S = 1.0
BACKOFF_CAP_S = 300.0
MAX_SERVER_ERRORS = 5
# Jitter on top of a server's Retry-After: a quarter of it, at least 1 s (so that agents told the same
# thing at the same moment spread out), at most 30 s.
RETRY_AFTER_JITTER = 0.25
RETRY_AFTER_JITTER_MIN_S = 1.0
RETRY_AFTER_JITTER_CAP_S = 30.0

INVALID = "invalid"
SERVER_ERROR = "server error"
TRANSIENT = "transient"
INVALID_STATUSES = frozenset({400, 413, 422})
# Gateways and a server shedding load answer these whatever the data: never the report's fault.
UNAVAILABLE_STATUSES = frozenset({502, 503, 504})
# A 400 that refuses every report of this agent alike (its schema version): setting reports aside
# one by one would empty the spool into the rejected table; they wait for an upgrade instead.
AGENT_WIDE_ERROR_CODES = frozenset({"unsupported_version"})


def classify(err: DeliveryError) -> str:
    """invalid | server error | transient: what an error answer says about the reports sent."""
    if err.status in INVALID_STATUSES and err.code not in AGENT_WIDE_ERROR_CODES:
        return INVALID
    if err.status is not None and 500 <= err.status <= 599 and err.status not in UNAVAILABLE_STATUSES:
        return SERVER_ERROR
    return TRANSIENT

# (client, reports_url), or None while the node is not enrolled.
Target = tuple[ControlPlaneClient, str]


@dataclass
class DeliveryStats:
    batches: int = 0
    reports_acked: int = 0
    failures: int = 0
    splits: int = 0
    rejected: int = 0
    last_error: str | None = None
    last_acked_sequence: int = 0


class Delivery:
    def __init__(
        self,
        spool: Spool,
        target: Callable[[], Target | None],
        *,
        max_batch: int = MAX_BATCH_REPORTS,
        max_batch_bytes: int = MAX_BATCH_BYTES,
        backoff_base_s: float = BACKOFF_BASE_S,
        backoff_cap_s: float = BACKOFF_CAP_S,
        max_server_errors: int = MAX_SERVER_ERRORS,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_actions: Callable[[list], object] | None = None,
    ):
        self.spool = spool
        self._target = target
        self.max_batch = max_batch
        self.max_batch_bytes = max_batch_bytes
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self.max_server_errors = max_server_errors
        self._rng = rng or random.Random()
        self._clock = clock
        # Called with the actions an answer carries (the agent's ActionRunner checks and records them).
        self._on_actions = on_actions
        self._batch_limit = max_batch
        self._suspects = 0  # reports at the head of the spool among which a refused one hides
        self._failures_in_a_row = 0
        self._failure_kind: str | None = None
        self._retry_at = 0.0
        self._hold_until = 0.0  # the server's Retry-After: binds urgent attempts too
        self._lock = threading.Lock()  # one delivery at a time per spool
        self.stats = DeliveryStats()

    # -- retry state ----------------------------------------------------------------------------

    def seconds_until_retry(self) -> float:
        return max(0.0, self._retry_at - self._clock())

    def backing_off(self) -> bool:
        return self.seconds_until_retry() > 0

    def has_target(self) -> bool:
        """Whether there is somewhere to send to (False until the node is enrolled)."""
        return self._target() is not None

    def _failed(self, err: DeliveryError | str, *, forced: bool = False, kind: str = TRANSIENT, note: str = "") -> None:
        message = f"{err}{note}"
        self.stats.failures += 1
        self.stats.last_error = message
        if kind != self._failure_kind:
            # A server that answers again after an outage starts a fresh back-off, so that a report it
            # fails on is counted out at the pace of a live server, not of the outage before.
            self._failure_kind, self._failures_in_a_row = kind, 0
        if not forced:  # an urgent out-of-turn attempt does not lengthen the backoff
            self._failures_in_a_row += 1
        now = self._clock()
        retry_after = getattr(err, "retry_after", None)
        if retry_after is not None:
            delay = min(retry_after, self.backoff_cap_s)
            spread = min(RETRY_AFTER_JITTER_CAP_S, max(RETRY_AFTER_JITTER_MIN_S, delay * RETRY_AFTER_JITTER))
            delay += spread * self._rng.random()
            self._hold_until = now + delay
        else:
            delay = min(self.backoff_cap_s, self.backoff_base_s * 2 ** max(0, self._failures_in_a_row - 1))
            delay *= 0.5 + 0.5 * self._rng.random()  # jitter: a fleet recovering from an outage spreads out
        self._retry_at = now + delay
        status = getattr(err, "status", None)
        level = logging.ERROR if status in (401, 403) else logging.WARNING
        hint = " (credential rejected: re-enrol with `fleet-agent enroll`)" if status == 401 else ""
        told = " as the server asked (Retry-After)" if retry_after is not None else ""
        log.log(level, "delivery failed%s, retrying in %.1f s%s: %s", hint, delay, told, message)

    def _succeeded(self) -> None:
        self._failures_in_a_row = 0
        self._failure_kind = None
        self._retry_at = 0.0

    # -- work -----------------------------------------------------------------------------------

    def deliver_pending(self, *, force: bool = False, deadline: float | None = None) -> bool:
        """Send batches until the spool is empty (True) or something fails or time runs out (False).

        ``force`` ignores the agent's own backoff timer (urgent reports, the final flush on shutdown),
        never a server's Retry-After.
        """
        with self._lock:
            if self._clock() < self._hold_until or (not force and self.backing_off()):
                return False
            target = self._target()
            if target is None:
                self._failed("not enrolled yet: reports stay in the spool", forced=force)
                return False
            client, reports_url = target
            while deadline is None or self._clock() < deadline:
                batch = self.spool.pending(self._batch_limit, self.max_batch_bytes)
                if not batch:
                    return True
                if not self._send(client, reports_url, batch, forced=force):
                    return False
            return False

    def _send(
        self, client: ControlPlaneClient, reports_url: str, batch: list[SpooledReport], *, forced: bool
    ) -> bool:
        body = b'{"reports":[' + b",".join(report.body for report in batch) + b"]}"
        try:
            answer = client.post_reports(body, reports_url=reports_url)
        except DeliveryError as err:
            kind = classify(err)
            if kind == TRANSIENT:
                self._failed(err, forced=forced)
                return False
            if len(batch) > 1:
                self._split(batch, err)
                return True
            return self._refused(batch[0], err, kind, forced=forced)
        acked = answer.get("acked_sequence")
        instance = answer.get("agent_instance_id")
        if not isinstance(acked, int) or isinstance(acked, bool):
            self._failed(f"server answer has no integer acked_sequence: {str(answer)[:200]}", forced=forced)
            return False
        if instance is not None and instance != self.spool.instance_id:
            self._failed(
                f"server acknowledged instance {instance}, this agent is {self.spool.instance_id}",
                forced=forced,
            )
            return False
        removed = self.spool.ack(acked)
        if answer.get("actions") and self._on_actions is not None:
            try:
                self._on_actions(answer["actions"])
            except Exception:  # noqa: BLE001 - a bad action must never stop delivery
                log.exception("could not take the actions the server sent")
        self.stats.batches += 1
        self.stats.reports_acked += removed
        self.stats.last_acked_sequence = max(self.stats.last_acked_sequence, acked)
        if acked < batch[-1].sequence:
            # Stored only part of the batch: resend the rest, but not in a tight loop.
            self._cleared(self._suspects)
            self._failed(
                f"server acknowledged up to {acked} of {batch[0].sequence}..{batch[-1].sequence}",
                forced=forced,
            )
            return False
        self._cleared(len(batch))
        self._succeeded()
        return True

    def _split(self, batch: list[SpooledReport], err: DeliveryError) -> None:
        """The server refused something in this batch: try its first half next, then the rest."""
        self.stats.failures += 1
        self.stats.splits += 1
        self.stats.last_error = str(err)
        self._suspects = len(batch)
        self._batch_limit = (len(batch) + 1) // 2
        log.warning(
            "server refused the batch %d..%d (%d reports), looking for the report it refuses: %s",
            batch[0].sequence, batch[-1].sequence, len(batch), err,
        )

    def _cleared(self, count: int) -> None:
        """``count`` reports at the head of the suspect range are settled (stored or set aside)."""
        if self._suspects:
            self._suspects = max(0, self._suspects - count)
            # The rest of the range in one batch: if it is refused again, it is split again.
            self._batch_limit = self._suspects or self.max_batch

    def _refused(self, report: SpooledReport, err: DeliveryError, kind: str, *, forced: bool) -> bool:
        """The server refused this report sent alone. True when it was set aside (go on)."""
        if kind == INVALID:
            self._set_aside(report, f"refused as invalid: {err}")
            return True
        errors = self.spool.record_server_error(report.sequence, str(err))
        if errors >= self.max_server_errors:
            self._set_aside(report, f"{errors} server errors, the last: {err}")
            return True
        self._suspects = self._batch_limit = 1
        self._failed(err, forced=forced, kind=SERVER_ERROR,
                     note=f" (report {report.sequence}: server error {errors} of {self.max_server_errors} before it is"
                     " set aside)")
        return False

    def _set_aside(self, report: SpooledReport, reason: str) -> None:
        self.spool.reject(report.sequence, reason)
        self.stats.rejected += 1
        self._cleared(1)
        log.error(
            "report %d set aside in the spool's rejected table (see `fleet-agent spool show-rejected`): %s",
            report.sequence, reason,
        )


class SenderThread(threading.Thread):
    """Runs ``Delivery`` in the background: woken after each report, immediately for urgent ones."""

    def __init__(self, delivery: Delivery, *, poll_s: float = 15.0):
        super().__init__(name="fleet-agent-sender", daemon=True)
        self.delivery = delivery
        self.poll_s = poll_s
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._urgent = False

    def wake(self, *, urgent: bool = False) -> None:
        if urgent:
            self._urgent = True
        self._wake.set()

    def run(self) -> None:
        while not self._stopping.is_set():
            timeout = self.poll_s
            if self.delivery.backing_off():
                timeout = min(timeout, self.delivery.seconds_until_retry())
            self._wake.wait(timeout)
            self._wake.clear()
            if self._stopping.is_set():
                break
            urgent, self._urgent = self._urgent, False
            if self.delivery.backing_off() and not urgent:
                continue
            try:
                self.delivery.deliver_pending(force=urgent)
            except Exception:  # noqa: BLE001 - the sender must outlive any single bad batch
                log.exception("unexpected error while delivering reports")

    def stop(self, *, flush_timeout_s: float = 10.0) -> bool:
        """Stop the thread, then try once more to empty the spool within ``flush_timeout_s``."""
        self._stopping.set()
        self._wake.set()
        self.join(timeout=flush_timeout_s)
        deadline = time.monotonic() + flush_timeout_s
        try:
            return self.delivery.deliver_pending(force=True, deadline=deadline)
        except Exception:  # noqa: BLE001
            log.exception("final flush failed; reports stay in the spool for the next start")
            return False
