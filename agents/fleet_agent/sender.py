"""Delivery: moves spooled reports to the server in batches, honouring its acknowledgements.

``Delivery`` does the work and owns the retry state but runs no thread, so the simulator can pump
hundreds of agents from a small worker pool; ``SenderThread`` runs it for the daemon so that a
slow or unreachable server never holds up collection.

* A batch is at most 100 reports and ~3.5 MiB before gzip (the server accepts 4 MiB decoded).
* The server answers with ``acked_sequence``; everything ≤ it leaves the spool, so a retried batch
  is never duplicated on the server and an unacknowledged one is never lost.
* Failures back off exponentially (base × 2ⁿ, capped) with jitter, honouring ``Retry-After``.
* 400/413 on a batch: retry one report at a time; a single report the server still refuses is set
  aside in the spool's ``rejected`` table (it would otherwise block the queue forever).
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

# (client, reports_url), or None while the node is not enrolled.
Target = tuple[ControlPlaneClient, str]


@dataclass
class DeliveryStats:
    batches: int = 0
    reports_acked: int = 0
    failures: int = 0
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
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.spool = spool
        self._target = target
        self.max_batch = max_batch
        self.max_batch_bytes = max_batch_bytes
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self._rng = rng or random.Random()
        self._clock = clock
        self._batch_limit = max_batch
        self._failures_in_a_row = 0
        self._retry_at = 0.0
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

    def _failed(self, err: DeliveryError | str, *, forced: bool = False) -> None:
        message = str(err)
        self.stats.failures += 1
        self.stats.last_error = message
        if not forced:  # an urgent out-of-turn attempt does not lengthen the backoff
            self._failures_in_a_row += 1
        delay = min(self.backoff_cap_s, self.backoff_base_s * 2 ** max(0, self._failures_in_a_row - 1))
        delay *= 0.5 + 0.5 * self._rng.random()  # jitter: a fleet recovering from an outage spreads out
        retry_after = getattr(err, "retry_after", None)
        if retry_after:
            delay = min(self.backoff_cap_s, max(delay, retry_after))
        self._retry_at = self._clock() + delay
        status = getattr(err, "status", None)
        level = logging.ERROR if status in (401, 403) else logging.WARNING
        hint = " (credential rejected: re-enrol with `fleet-agent enroll`)" if status == 401 else ""
        log.log(level, "delivery failed%s, retrying in %.1f s: %s", hint, delay, message)

    def _succeeded(self) -> None:
        self._failures_in_a_row = 0
        self._retry_at = 0.0
        self._batch_limit = self.max_batch

    # -- work -----------------------------------------------------------------------------------

    def deliver_pending(self, *, force: bool = False, deadline: float | None = None) -> bool:
        """Send batches until the spool is empty (True) or something fails or time runs out (False).

        ``force`` ignores the backoff timer (urgent reports, the final flush on shutdown).
        """
        with self._lock:
            if not force and self.backing_off():
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
            if err.status in (400, 413):
                return self._refused(batch, err)
            self._failed(err, forced=forced)
            return False
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
        self.stats.batches += 1
        self.stats.reports_acked += removed
        self.stats.last_acked_sequence = max(self.stats.last_acked_sequence, acked)
        if acked < batch[-1].sequence:
            # Stored only part of the batch: resend the rest, but not in a tight loop.
            self._failed(
                f"server acknowledged up to {acked} of {batch[0].sequence}..{batch[-1].sequence}",
                forced=forced,
            )
            return False
        self._succeeded()
        return True

    def _refused(self, batch: list[SpooledReport], err: DeliveryError) -> bool:
        if len(batch) > 1:
            log.warning("server refused a batch of %d (%s): retrying one report at a time", len(batch), err)
            self._batch_limit = 1
            return True
        report = batch[0]
        log.error(
            "server refused report %d, set aside in the spool's rejected table: %s", report.sequence, err
        )
        self.spool.reject(report.sequence, str(err))
        self.stats.rejected += 1
        return True


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
