"""``fleet-agent run``: the long-running agent.

Threads, and why each exists:

* main — the collection loop, at a fixed rate (a slow cycle shortens the next wait, it never
  shifts the schedule); it only collects and spools, it never waits on the network or the logs;
* sender — ``SenderThread``: delivers spooled reports, backs off on failure;
* watcher — blocks on ``/dev/kmsg`` (poll(2)) and reads each kernel record as it is written, pushing an urgent
  report at once when an Xid, a fatal SXid or a lost GPU shows up; polls the cloud notice endpoint (and, where
  the kernel log cannot be waited on — the journal, a file, no permission — the kernel log too) every
  ``notice_poll_s`` (≤ 5 s); hands on what ``fleet-agent verify --level N`` left in the diagnostics inbox;
* stack — re-probes the software stack (framework imports take seconds) and, until it is known, the
  cloud identity, every ``stack_refresh_s``;
* nvml-events — only where NVML's Xid events are on (by default: when no kernel log is readable, e.g. a
  container without CAP_SYSLOG): blocks in ``nvmlEventSetWait`` and reports an Xid at once;
* actions — ``ActionRunner``: runs, one at a time, the actions the server's answers carry and this node's
  config allows, and reports each outcome at once (``fleet_agent.actions``).

SIGTERM/SIGINT stop the loop, then the sender gets a bounded flush before the process exits.
"""

from __future__ import annotations

import io
import logging
import signal
import threading
import time
from typing import Any

from fleet_agent.actions import ActionRunner, identity_from_enrollment, read_boot_id
from fleet_agent.agent import AgentCore
from fleet_agent.assembly import delivery_target, load_identity, make_core, resolve_kernel_log_source
from fleet_agent.config import Config
from fleet_agent.credentials import credential_path, load_enrollment
from fleet_agent.dcgm import DiagRun, diagnose, drain_inbox, inbox_path
from fleet_agent.nvml import XidEventWatcher
from fleet_agent.sender import Delivery, SenderThread
from fleet_agent.spool import Spool
from fleet_agent.verify import FAIL, print_table, run_checks

log = logging.getLogger(__name__)

FLUSH_TIMEOUT_S = 10.0
NVML_EVENTS_WAIT_MS = 1000  # how long one wait blocks; also how soon a stop is noticed
NVML_EVENTS_RETRY_S = 30.0  # NVML down or no GPU supports the events: try registering again
KERNEL_WAIT_MAX_S = 1.0  # the longest one wait on /dev/kmsg blocks, so a stop is noticed soon


class Daemon:
    def __init__(self, config: Config, *, nvml_module: Any = None):
        self.config = config
        self.stop_event = threading.Event()
        self.spool = Spool(config.spool_path, max_bytes=config.spool_max_bytes)
        self.identity = load_identity(config)
        self.interval_s = self._interval()
        kernel_log_source = resolve_kernel_log_source(config.kernel_log)
        self.core: AgentCore = make_core(
            config,
            sequences=self.spool,
            spool=self.spool,
            identity=self.identity,
            kernel_log_source=kernel_log_source,
            kernel_log_state=config.spool_path.with_name("kernel_log.state"),
            nvml_module=nvml_module,
        )
        # Both sources would report every Xid twice; NVML's events stand in for a kernel log we cannot read.
        self.nvml_events = config.nvml_events == "on" or (config.nvml_events == "auto" and kernel_log_source is None)
        self.core.builder.interval_s = self.interval_s
        self.actions = ActionRunner(
            spool=self.spool,
            identity=self._action_identity,
            allow=config.actions_allow,
            hooks_dir=config.actions_hooks_dir,
            reboot_command=config.actions_reboot_command,
            gpu_reset_command=config.actions_gpu_reset_command,
            nvidia_smi=config.actions_nvidia_smi,
            verify=self._verify,
            diagnose=self._diagnose,
            boot_id=lambda: read_boot_id(config.proc_root),
            on_result=self._report_action_result,
        )
        self.sender = SenderThread(
            Delivery(self.spool, delivery_target(config, self.identity), max_server_errors=config.max_server_errors,
                     on_actions=self.actions.receive),
            poll_s=self.interval_s,
        )
        self.cycles = 0

    def _interval(self) -> float:
        """The configured interval wins; otherwise the one the server handed out at enrolment."""
        if self.config.is_set("interval_s"):
            return self.config.interval_s
        try:
            enrollment = load_enrollment(credential_path(self.config.state_dir))
        except ValueError:
            enrollment = None
        if enrollment is not None and enrollment.interval_s:
            return float(enrollment.interval_s)
        return self.config.interval_s

    def _action_identity(self):
        try:
            return identity_from_enrollment(load_enrollment(credential_path(self.config.state_dir)))
        except ValueError:
            return None

    def _verify(self) -> tuple[bool, str]:
        results = run_checks(self.config)
        table = io.StringIO()
        print_table(results, table)
        return not any(r.result == FAIL for r in results), table.getvalue()

    def _diagnose(self, level: int) -> DiagRun:
        """The dcgm_diag action: run DCGM's diagnostic; its ``diag`` event goes with the outcome's report."""
        return diagnose(level, dcgmi=self.config.dcgmi, gpus_by_index=self.core.gpus_by_index(),
                        sink=lambda event: self.core.add_events([event]))

    def _report_action_result(self) -> None:
        """An outcome is in the spool: send it now rather than at the next interval."""
        self.core.collect(poll_sources=False)
        self.sender.wake(urgent=True)

    def install_signal_handlers(self) -> None:
        def request_stop(signum: int, _frame: Any) -> None:
            log.info("received %s, stopping", signal.Signals(signum).name)
            self.stop_event.set()

        signal.signal(signal.SIGTERM, request_stop)
        signal.signal(signal.SIGINT, request_stop)

    def run(self, *, max_cycles: int | None = None) -> int:
        log.info(
            "fleet-agent starting: instance %s, interval %.0f s, spool %s (%d pending)",
            self.spool.instance_id,
            self.interval_s,
            self.spool.path,
            self.spool.depth(),
        )
        if not self.sender.delivery.has_target():
            log.warning("not enrolled yet: reports are spooled until `fleet-agent enroll` has run")
        self.core.refresh_cloud_identity()
        self.core.stack.refresh()  # once up front, so the first inventory is complete
        self.actions.recover()  # before the first report: what a previous run left is settled and reported
        self.actions.start()
        self.sender.start()
        helpers = [
            threading.Thread(target=self._watch, name="fleet-agent-watcher", daemon=True),
            threading.Thread(target=self._refresh_stack, name="fleet-agent-stack", daemon=True),
        ]
        if self.nvml_events:
            helpers.append(threading.Thread(target=self._watch_nvml_events, name="fleet-agent-nvml-events",
                                            daemon=True))
        for thread in helpers:
            thread.start()
        try:
            self._collection_loop(max_cycles)
        finally:
            self.stop_event.set()
            for thread in helpers:
                thread.join(timeout=5)
            self.actions.stop()
            flushed = self.sender.stop(flush_timeout_s=FLUSH_TIMEOUT_S)
            log.info(
                "stopped: %s, %d report(s) left in the spool",
                "spool flushed" if flushed else "flush incomplete",
                self.spool.depth(),
            )
            self.core.nvml.shutdown()
            self.spool.close()
        return 0

    def _collection_loop(self, max_cycles: int | None) -> None:
        next_due = time.monotonic()
        while not self.stop_event.is_set():
            try:
                report = self.core.collect(poll_sources=False)  # the watcher polls the kernel log
                self.sender.wake(urgent=bool(report["events"]))
            except Exception:  # noqa: BLE001 - a bad cycle is logged; the next one runs on time
                log.exception("collection cycle failed")
            self.cycles += 1
            if max_cycles is not None and self.cycles >= max_cycles:
                return
            next_due += self.interval_s
            now = time.monotonic()
            if next_due <= now:  # overran: skip the missed ticks instead of bursting to catch up
                next_due = now + self.interval_s
            self.stop_event.wait(next_due - now)

    def _watch(self) -> None:
        """Stream the kernel log where it can be waited on; everything else on the ``notice_poll_s`` timer."""
        period = self.config.notice_poll_s
        next_poll = time.monotonic() + period
        while not self.stop_event.is_set():
            remaining = next_poll - time.monotonic()
            if remaining > 0:
                readable = self.core.wait_kernel_log(min(remaining, KERNEL_WAIT_MAX_S))
                if readable is None:  # cannot block on this source: the timer polls it
                    self.stop_event.wait(remaining)
                    continue
                if readable:
                    self._urgent(self.core.collect_kernel_log_if_urgent)
                continue
            next_poll += period
            if next_poll <= time.monotonic():
                next_poll = time.monotonic() + period
            self._urgent(self.core.collect_if_urgent)
            self._hand_on_diagnostics()

    def _urgent(self, collect) -> None:
        try:
            if collect() is not None:
                self.sender.wake(urgent=True)
        except Exception:  # noqa: BLE001
            log.exception("urgent watcher failed")

    def _hand_on_diagnostics(self) -> None:
        """Diagnostics ``fleet-agent verify --level N`` ran while this agent was running: report them now."""
        try:
            events = drain_inbox(inbox_path(self.config.state_dir))
        except OSError as err:
            log.warning("cannot read the diagnostics inbox: %s", err)
            return
        if events:
            self.core.add_events(events)
            self.core.collect(poll_sources=False)
            self.sender.wake(urgent=True)

    def _watch_nvml_events(self) -> None:
        """Register for Xid events (again after a failure or while NVML is down) and report each batch."""
        watcher = XidEventWatcher(self.core.nvml)
        try:
            while not self.stop_event.is_set():
                if not watcher.watching and not watcher.open():
                    self.stop_event.wait(NVML_EVENTS_RETRY_S)
                    continue
                events = watcher.wait(NVML_EVENTS_WAIT_MS)
                if not events:
                    continue
                log.warning("NVML reported %s", ", ".join(e["message"] for e in events))
                self.core.add_events(events)
                self.core.collect(urgent=True, poll_sources=False)
                self.sender.wake(urgent=True)
        except Exception:  # noqa: BLE001 - the collection loop goes on without this source
            log.exception("NVML event watcher failed")
        finally:
            watcher.close()

    def _refresh_stack(self) -> None:
        while not self.stop_event.wait(self.config.stack_refresh_s):
            try:
                self.core.stack.refresh()
                # A no-op once known; retries a metadata service that was down at start-up.
                self.core.refresh_cloud_identity()
            except Exception:  # noqa: BLE001
                log.exception("software stack refresh failed")
