"""The agent's engine, without threads: collectors in, numbered reports out (and into the spool).

The daemon (``fleet_agent.daemon``) wraps this in its collection loop and watcher thread; the
simulator drives the very same engine step by step with simulated sources. A collector that fails
unexpectedly costs its own block of the report (and an ``agent_error`` event), never the report.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from fleet_agent.collectors.checkpoint import CheckpointCollector
from fleet_agent.collectors.stack import StackCollector
from fleet_agent.collectors.system import SystemCollector
from fleet_agent.nvml import NvmlAdapter
from fleet_agent.protocol import is_urgent, notice_event_kind
from fleet_agent.report import ReportBuilder, ReportParts, cloud_block
from fleet_agent.spool import Spool
from fleet_agent.timeutil import rfc3339, utc_now

log = logging.getLogger(__name__)

def notice_event(notice: dict, clock: Callable[[], datetime] = utc_now) -> dict:
    """The event announcing a cloud notice (terminate/stop/hibernate/preempt → preemption_notice)."""
    kind = notice_event_kind(notice.get("kind"))
    deadline = notice.get("deadline")
    return {
        "kind": kind,
        "at": notice.get("received_at") or rfc3339(clock()),
        "gpu_uuid": None,
        "pci_bus_id": None,
        "code": None,
        "severity": "critical" if kind == "preemption_notice" else "warning",
        "message": f"{notice.get('source') or 'cloud'}: {notice.get('kind')} notice"
        f"{f', deadline {deadline}' if deadline else ', no deadline given'}",
        "raw": json.dumps(
            notice.get("detail") if notice.get("detail") is not None else notice, sort_keys=True, default=str
        )[:4096],
    }


def agent_error_event(where: str, err: BaseException, clock: Callable[[], datetime] = utc_now) -> dict:
    return {
        "kind": "agent_error",
        "at": rfc3339(clock()),
        "gpu_uuid": None,
        "pci_bus_id": None,
        "code": None,
        "severity": "warning",
        "message": f"{where} failed: {type(err).__name__}: {err}"[:2048],
        "raw": "",
    }


class AgentCore:
    def __init__(
        self,
        *,
        builder: ReportBuilder,
        nvml: NvmlAdapter,
        system: SystemCollector,
        stack: StackCollector,
        kernel_log: Any = None,
        cloud: Any = None,
        checkpoint: CheckpointCollector | None = None,
        spool: Spool | None = None,
        clock: Callable[[], datetime] = utc_now,
        fabric: Any = None,
    ):
        self.builder = builder
        self.nvml = nvml
        self.system = system
        self.stack = stack
        self.kernel_log = kernel_log
        self.cloud = cloud
        self.checkpoint = checkpoint
        self.fabric = fabric
        self.spool = spool
        self._clock = clock
        # Report building is serialised: the collection loop and the urgent watcher both build.
        self._lock = threading.RLock()
        self._pending_events: list[dict] = []
        self._cloud_identity: dict | None = None
        self._notice: dict | None = None
        self._notice_key: tuple | None = None
        self._pci_map: dict[str, str] = {}
        self._gpus_by_index: dict[int, dict] = {}

    # -- sources polled between reports ---------------------------------------------------------

    def refresh_cloud_identity(self) -> dict | None:
        if self.cloud is None:
            return None
        try:
            identity = self.cloud.identity()
        except Exception as err:  # noqa: BLE001 - a metadata quirk must not stop the agent
            log.warning("cloud identity failed: %s", err)
            with self._lock:
                self._pending_events.append(agent_error_event("cloud identity", err, self._clock))
            return None
        with self._lock:
            self._cloud_identity = identity
        return identity

    def poll_notice(self) -> list[dict]:
        """Poll the cloud notice once; returns (and queues) an event when a new notice appears."""
        if self.cloud is None:
            return []
        try:
            notice = self.cloud.poll_notice()
        except Exception as err:  # noqa: BLE001
            log.warning("cloud notice poll failed: %s", err)
            return []
        with self._lock:
            self._notice = notice
            key = (notice.get("kind"), notice.get("deadline"), notice.get("source")) if notice else None
            if key == self._notice_key:
                return []
            self._notice_key = key
            if notice is None:
                return []
            event = notice_event(notice, self._clock)
            self._pending_events.append(event)
            return [event]

    def poll_kernel_log(self) -> list[dict]:
        """Read new kernel log lines into the pending events (one poller at a time: the collector keeps
        a file offset)."""
        if self.kernel_log is None:
            return []
        try:
            events = list(self.kernel_log.collect())
        except Exception as err:  # noqa: BLE001
            log.warning("kernel log collection failed: %s", err)
            events = [agent_error_event("kernel log", err, self._clock)]
        self.add_events(events)
        return events

    def wait_kernel_log(self, timeout_s: float) -> bool | None:
        """Block until the kernel log has new records (True), the time runs out (False), or None when the source
        cannot be waited on (the caller polls it on a timer)."""
        wait = getattr(self.kernel_log, "wait", None)
        if wait is None:
            return None
        try:
            return wait(timeout_s)
        except Exception as err:  # noqa: BLE001 - fall back to polling
            log.warning("waiting on the kernel log failed: %s", err)
            return None

    def collect_kernel_log_if_urgent(self) -> dict | None:
        """Read the kernel log now and report at once if an urgent event came in (the streaming watcher's job)."""
        self.poll_kernel_log()
        with self._lock:
            if not self.has_urgent_pending():
                return None
            return self.collect(urgent=True, poll_sources=False)

    def gpus_by_index(self) -> dict[int, dict]:
        """The GPUs of the latest sample by NVML index ({"uuid", "pci_bus_id"}), for naming diagnostics' GPUs."""
        with self._lock:
            if not self._gpus_by_index:
                self._update_pci_map(self.nvml.sample().gpus)
            return dict(self._gpus_by_index)

    def add_events(self, events: list[dict]) -> None:
        """Queue events for the next report (the kernel log's, and NVML's Xid events, which are pushed)."""
        with self._lock:
            self._pending_events.extend(events)

    def has_urgent_pending(self) -> bool:
        with self._lock:
            return any(is_urgent(event) for event in self._pending_events)

    # -- reports --------------------------------------------------------------------------------

    def collect(self, *, urgent: bool = False, poll_sources: bool = True) -> dict:
        """Build the next report with every event since the previous one; spool it if there is a spool.

        ``poll_sources=False`` when another thread (the daemon's watcher) polls the kernel log, so the
        collection cycle does no log I/O of its own.
        """
        with self._lock:
            if poll_sources:
                self.poll_kernel_log()
            events, self._pending_events = self._pending_events, []
            parts = self._collect_parts(events)
            report = self.builder.build(parts)
            if self.spool is not None:
                # Outcomes of actions the server asked for travel with the next report (docs/executors.md).
                results = self.spool.action_results_unreported()
                if results:
                    report["action_results"] = results
                self.spool.put(report, urgent=urgent or any(is_urgent(e) for e in report["events"]))
            return report

    def collect_if_urgent(self) -> dict | None:
        """The watcher's job: poll the fast sources and report at once when something urgent came in.

        The polling (metadata HTTP, log reads) happens outside the report lock, so a slow metadata
        service never holds up the collection loop.
        """
        self.poll_notice()
        self.poll_kernel_log()
        with self._lock:
            if not self.has_urgent_pending():
                return None
            return self.collect(urgent=True, poll_sources=False)

    def _collect_parts(self, events: list[dict]) -> ReportParts:
        sample = self.nvml.sample()
        events = events + sample.events
        self._update_pci_map(sample.gpus)
        system = self._safe("system collector", self.system.collect, events)
        checkpoint = (
            self._safe("checkpoint collector", self.checkpoint.collect, events) if self.checkpoint else None
        )
        stack = self._safe(
            "stack collector",
            lambda: self.stack.stack(sample.driver_version, sample.cuda_driver_version),
            events,
        ) or {"driver_version": sample.driver_version, "cuda_driver_version": sample.cuda_driver_version}
        host = (
            self._safe(
                "host facts",
                lambda: self.stack.host(
                    cpu_count=(system or {}).get("cpu_count"),
                    mem_total_bytes=(system or {}).get("mem_total_bytes"),
                ),
                events,
            )
            or {}
        )
        fabric = self._safe("fabric collector", self.fabric.collect, events) if self.fabric else None
        return ReportParts(
            fabric=fabric,
            visibility=sample.visibility,
            gpus=sample.gpus,
            system=system,
            cloud=cloud_block(self._cloud_identity, self._notice),
            checkpoint=checkpoint,
            host=host,
            stack=stack,
            events=events,
        )

    def _safe(self, where: str, fn: Callable[[], Any], events: list[dict]) -> Any:
        try:
            return fn()
        except Exception as err:  # noqa: BLE001 - one broken collector must not cost the report
            log.exception("%s failed", where)
            events.append(agent_error_event(where, err, self._clock))
            return None

    def _update_pci_map(self, gpus: list[dict]) -> None:
        mapping = {
            gpu["pci_bus_id"]: gpu["uuid"] for gpu in gpus if gpu.get("pci_bus_id") and gpu.get("uuid")
        }
        if (
            mapping != self._pci_map
            and self.kernel_log is not None
            and hasattr(self.kernel_log, "set_pci_map")
        ):
            self.kernel_log.set_pci_map(mapping)
        self._pci_map = mapping
        self._gpus_by_index = {gpu["index"]: {"uuid": gpu.get("uuid"), "pci_bus_id": gpu.get("pci_bus_id")}
                               for gpu in gpus if isinstance(gpu.get("index"), int)}

    @property
    def cloud_identity(self) -> dict | None:
        return self._cloud_identity
