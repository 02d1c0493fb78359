"""Runs N simulated agents in one process: a scheduler thread plus a small delivery pool.

Each agent keeps the real agent's behaviour — its own spool, sequence numbers, credential and
``Delivery`` with backoff — but shares threads: the scheduler steps whichever agent is due (on its
interval, and at once when one of its faults starts or clears, which is how urgent reports go out
immediately), and a few delivery workers send for whichever agent has something spooled. That keeps
hundreds of nodes cheap enough for load tests.
"""

from __future__ import annotations

import heapq
import logging
import queue
import shutil
import signal
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from fleet_agent.enroll import EnrollmentError
from fleet_agent.protocol import is_urgent
from fleet_agent.simulator.agent import SimulatedAgent
from fleet_agent.simulator.scenario import Scenario
from fleet_agent.timeutil import utc_now

log = logging.getLogger(__name__)

FLUSH_TIMEOUT_S = 10.0
PROGRESS_EVERY_S = 30.0


@dataclass
class FleetResult:
    nodes: int
    enrolled: int = 0
    reports_built: int = 0
    urgent_reports: int = 0
    reports_acked: int = 0
    delivery_failures: int = 0
    pending: int = 0
    duration_s: float = 0.0
    errors: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        return {key: value for key, value in self.__dict__.items() if key != "errors"} | {
            "errors": self.errors[:20]
        }


class _DeliveryPool:
    """Delivery workers: each queued agent is delivered by one worker at a time."""

    def __init__(self, agents: list[SimulatedAgent], workers: int):
        self._agents = agents
        self._queue: queue.Queue[tuple[int, bool] | None] = queue.Queue()
        self._queued: set[int] = set()
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._work, name=f"sim-delivery-{i}", daemon=True)
            for i in range(max(1, workers))
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, index: int, *, urgent: bool) -> None:
        with self._lock:
            if index in self._queued and not urgent:
                return
            self._queued.add(index)
        self._queue.put((index, urgent))

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            index, urgent = item
            with self._lock:
                self._queued.discard(index)
            try:
                self._agents[index].deliver(force=urgent)
            except Exception:  # noqa: BLE001 - one agent's bad batch must not stop the fleet
                log.exception("delivery for %s failed", self._agents[index].hostname)

    def close(self) -> None:
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join(timeout=FLUSH_TIMEOUT_S)


def run_fleet(
    scenario: Scenario,
    *,
    nodes: int,
    server: str,
    token: str,
    duration_s: float | None = None,
    interval_s: float | None = None,
    state_dir: str | Path | None = None,
    ca_file: str | None = None,
    workers: int = 4,
    seed: int | None = None,
    stop_event: threading.Event | None = None,
    install_signal_handlers: bool = False,
) -> FleetResult:
    """Enrol ``nodes`` simulated agents and run them until ``duration_s`` passes or ``stop_event`` is set."""
    stop = stop_event or threading.Event()
    if install_signal_handlers:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
    interval = interval_s or scenario.interval_s
    scratch = None if state_dir else tempfile.mkdtemp(prefix="fleet-agent-sim-")
    work_dir = Path(state_dir or scratch)
    result = FleetResult(nodes=nodes)
    started = time.monotonic()
    agents = [
        SimulatedAgent.from_scenario(scenario, i, work_dir=work_dir, seed=seed, interval_s=interval)
        for i in range(nodes)
    ]
    try:
        for agent in agents:
            try:
                agent.enroll(server, token, ca_file=ca_file)
                result.enrolled += 1
            except EnrollmentError as err:
                result.errors.append(f"{agent.hostname}: {err}")
                log.error("%s: %s", agent.hostname, err)
        enrolled = [i for i, agent in enumerate(agents) if agent.delivery is not None]
        if not enrolled:
            return result
        log.info(
            "simulating %d node(s) of scenario %r every %.0f s in %s",
            len(enrolled),
            scenario.name,
            interval,
            work_dir,
        )
        # Simulated time starts now, after the (possibly slow) set-up and enrolment of many nodes.
        rebased = utc_now()
        for agent in agents:
            agent.start = rebased
        pool = _DeliveryPool(agents, workers)
        try:
            _schedule(agents, enrolled, pool, interval, time.monotonic(), duration_s, stop, result)
        finally:
            pool.close()
            deadline = time.monotonic() + FLUSH_TIMEOUT_S
            for index in enrolled:
                if time.monotonic() < deadline:
                    agents[index].deliver(force=True, deadline=deadline)
        for index in enrolled:
            stats = agents[index].delivery.stats
            result.reports_acked += stats.reports_acked
            result.delivery_failures += stats.failures
            result.pending += agents[index].spool.depth()
        return result
    finally:
        result.duration_s = round(time.monotonic() - started, 1)
        for agent in agents:
            agent.close()
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)


def _schedule(
    agents: list[SimulatedAgent],
    enrolled: list[int],
    pool: _DeliveryPool,
    interval: float,
    started: float,
    duration_s: float | None,
    stop: threading.Event,
    result: FleetResult,
) -> None:
    # (due, index, is_fault_step): regular steps spread over the first interval so nodes do not report
    # in lockstep; fault steps happen exactly when a fault starts or clears.
    heap: list[tuple[float, int, bool]] = []
    for position, index in enumerate(enrolled):
        heapq.heappush(heap, (interval * position / max(1, len(enrolled)), index, False))
        fault_at = agents[index].next_fault_time(-1.0)
        if fault_at is not None:
            heapq.heappush(heap, (fault_at, index, True))
    next_progress = PROGRESS_EVERY_S
    while heap and not stop.is_set():
        due, index, fault_step = heap[0]
        elapsed = time.monotonic() - started
        if duration_s is not None and due > duration_s:
            break
        if due > elapsed:
            stop.wait(min(due - elapsed, 1.0))
            continue
        heapq.heappop(heap)
        agent = agents[index]
        report = agent.step(max(due, agent.t))
        if report is not None:
            result.reports_built += 1
            urgent = any(is_urgent(event) for event in report["events"])
            result.urgent_reports += urgent
            pool.submit(index, urgent=urgent)
        if fault_step:
            following = agent.next_fault_time(due)
            if following is not None:
                heapq.heappush(heap, (following, index, True))
        elif not agent.reclaimed:
            heapq.heappush(heap, (due + interval, index, False))
        if elapsed >= next_progress:
            next_progress += PROGRESS_EVERY_S
            log.info(
                "t=%.0fs: %d reports built (%d urgent)", elapsed, result.reports_built, result.urgent_reports
            )
