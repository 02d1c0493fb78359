"""Cloud collector: which cloud this node runs on, its instance identity, and interruption notices.

The cloud comes from DMI (``/sys/class/dmi/id``) unless forced. Identity and notices come from the
cloud's link-local metadata service: one module per cloud (``aws``, ``gcp``, ``azure``, ``alibaba``,
``tencent``), listed by name in ``registry.CLOUDS``, on the HTTP plumbing of ``metadata``. Oracle Cloud
is recognised from DMI only. No metadata service means bare metal (debug log only); a malformed answer
is a warning and "no notice", never an exception.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from fleet_agent.collectors.cloud.metadata import CloudBackend, MetadataService
from fleet_agent.collectors.cloud.registry import CLOUDS
from fleet_agent.timeutil import rfc3339, utc_now

log = logging.getLogger(__name__)

PROVIDERS = ("aws", "gcp", "azure", "alibaba", "oracle", "tencent")
FORCEABLE = (*PROVIDERS, "none")

DEFAULT_METADATA_URLS = {name: backend.default_metadata_url for name, backend in CLOUDS.items()}
DMI_FIELDS = ("product_name", "sys_vendor", "chassis_asset_tag", "bios_vendor")
ORACLE_CHASSIS_ASSET_TAG = "OracleCloud.com"

IDENTITY_RETRY_S = 60.0
NOTICE_MEMORY_S = 3600.0
# When several notices are present at once, the most urgent one is reported.
_URGENCY = {"preempt": 0, "terminate": 0, "stop": 1, "hibernate": 1, "maintenance": 2, "rebalance": 3}


def read_dmi(sys_root: str | Path = "/sys") -> dict[str, str]:
    """The DMI strings used for cloud detection ("" where unreadable); also useful as vendor/model."""
    base = Path(sys_root) / "class/dmi/id"
    values = {}
    for field in DMI_FIELDS:
        try:
            values[field] = (base / field).read_text(errors="replace").strip()
        except OSError:
            values[field] = ""
    return values


def _is_oracle(dmi: dict[str, str]) -> bool:
    return dmi["chassis_asset_tag"] == ORACLE_CHASSIS_ASSET_TAG


# In PROVIDERS order; the clouds' DMI marks do not overlap, the order only makes the answer stable.
_DETECTORS: dict[str, Callable[[dict[str, str]], bool]] = {
    name: CLOUDS[name].detect if name in CLOUDS else _is_oracle for name in PROVIDERS
}


def _cloud_from_dmi(dmi: dict[str, str]) -> str | None:
    return next((name for name, detect in _DETECTORS.items() if detect(dmi)), None)


def detect_cloud(sys_root: str | Path = "/sys") -> str | None:
    """aws | gcp | azure | alibaba | oracle | tencent from DMI, or None (bare metal / unknown)."""
    return _cloud_from_dmi(read_dmi(sys_root))


def _is_bare_metal(provider: str | None, dmi: dict[str, str], instance_type: str | None = None) -> bool:
    if provider is None:
        return True
    backend = CLOUDS.get(provider)
    return backend.is_bare_metal(dmi, instance_type) if backend is not None else False


class CloudCollector:
    """Identity and interruption notices of the cloud instance this agent runs on."""

    def __init__(
        self,
        sys_root: str | Path = "/sys",
        cloud: str | None = None,
        metadata_url: str | None = None,
        timeout: float = 0.5,
    ) -> None:
        if cloud is not None and cloud not in FORCEABLE:
            raise ValueError(f"cloud must be one of {', '.join(FORCEABLE)} (got {cloud!r})")
        self.sys_root = Path(sys_root)
        self.timeout = timeout
        self._dmi = read_dmi(sys_root)
        self._detected = _cloud_from_dmi(self._dmi)
        self.provider: str | None = self._detected if cloud is None else (None if cloud == "none" else cloud)
        self.metadata_url = (metadata_url or DEFAULT_METADATA_URLS.get(self.provider or "", "")).rstrip("/")
        backend = CLOUDS.get(self.provider or "")
        # Nothing to ask on bare metal, on a cloud without a metadata reader (Oracle) or without a URL.
        self._backend: CloudBackend | None = (
            backend(MetadataService(self.metadata_url, timeout)) if backend and self.metadata_url else None
        )
        self._lock = threading.RLock()
        self._identity: dict | None = None
        self._identity_retry_at = 0.0
        self._notice_first_seen: dict[tuple, tuple[datetime, str | None]] = {}

    # --- public ---------------------------------------------------------------------------------
    def identity(self) -> dict:
        """provider, instance_id, instance_type, region, spot, bare_metal (cached once read)."""
        with self._lock:
            if self._identity is not None:
                return dict(self._identity)
            fallback = {"provider": self.provider, "instance_id": None, "instance_type": None,
                        "region": None, "spot": None,
                        "bare_metal": _is_bare_metal(self.provider or self._detected, self._dmi)}
            if self._backend is None or time.monotonic() < self._identity_retry_at:
                return fallback
            try:
                found = self._backend.identity()
            except Exception:  # a bug in one cloud's reader must not take the agent down
                log.warning("reading %s instance identity failed", self.provider, exc_info=True)
                found = None
            if not found or not found.get("instance_id"):
                log.debug("no %s metadata service at %s; identity from DMI only", self.provider,
                          self.metadata_url)
                self._identity_retry_at = time.monotonic() + IDENTITY_RETRY_S
                return fallback
            identity = {**fallback, **found}
            identity["bare_metal"] = _is_bare_metal(self.provider, self._dmi, identity["instance_type"])
            self._identity = identity
            return dict(identity)

    def poll_notice(self) -> dict | None:
        """The current interruption notice, or None (none, no metadata service, or a bad answer)."""
        with self._lock:
            if self._backend is None:
                return None
            try:
                candidates = [notice for notice in self._backend.notices() if notice]
            except Exception:
                log.warning("polling %s notices failed", self.provider, exc_info=True)
                candidates = []
            if not candidates:
                return None
            kind, deadline, source, detail = min(candidates, key=lambda n: _URGENCY[n[0]])
            # A notice keeps its first sighting (and first deadline) while it lasts, also across a
            # missed poll: Azure blanks NotBefore once an event starts, GCP gives no deadline at all.
            same = self._backend.notice_key(source, detail)
            key = (source, kind, same or json.dumps(detail, sort_keys=True, default=str))
            now = utc_now()
            self._notice_first_seen = {k: v for k, v in self._notice_first_seen.items()
                                       if (now - v[0]).total_seconds() < NOTICE_MEMORY_S}
            received, known_deadline = self._notice_first_seen.get(key, (now, None))
            if isinstance(deadline, timedelta):  # a notice period counted from when we first saw it
                deadline = rfc3339(received + deadline)
            deadline = deadline or known_deadline
            self._notice_first_seen[key] = (received, deadline)
            return {"kind": kind, "deadline": deadline, "received_at": rfc3339(received),
                    "source": source, "detail": detail}

    def acknowledge(self, event_id: str) -> bool:
        """Azure: tell the platform to start a scheduled event now (StartRequests). True if accepted."""
        if self._backend is None:
            return False
        with self._lock:
            return self._backend.acknowledge(event_id)


class NoticeWatcher:
    """Polls ``collector.poll_notice()`` in a thread and calls ``callback`` once per distinct notice."""

    MAX_INTERVAL_S = 5.0

    def __init__(self, collector: CloudCollector, callback: Callable[[dict], object],
                 interval_s: float = 5.0, *, start: bool = True) -> None:
        self.collector = collector
        self.callback = callback
        self.interval_s = min(max(float(interval_s), 0.01), self.MAX_INTERVAL_S)
        self.latest: dict | None = None  # the notice seen by the last poll (None once it cleared)
        self._seen: set[tuple] = set()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fleet-agent-notice-watcher", daemon=True)
        if start:
            self.start()

    def start(self) -> None:
        if not self._thread.is_alive() and not self._stopping.is_set():
            with contextlib.suppress(RuntimeError):  # already started once
                self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        self._stopping.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout if timeout is not None else self.interval_s + 10 * self.collector.timeout)

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._poll_once()
            self._stopping.wait(self.interval_s)

    def _poll_once(self) -> None:
        try:
            notice = self.collector.poll_notice()
        except Exception:
            log.exception("polling for cloud notices failed")
            return
        self.latest = notice
        if notice is None:
            return
        key = (notice.get("source"), notice.get("deadline"), notice.get("kind"))
        if key in self._seen:
            return
        self._seen.add(key)
        try:
            self.callback(notice)
        except Exception:
            log.exception("cloud notice callback failed for %s", key)
