"""Cloud collector: which cloud this node runs on, its instance identity, and interruption notices.

The cloud comes from DMI (``/sys/class/dmi/id``) unless forced. Identity and notices come from the
cloud's link-local metadata service, spoken to with ``http.client`` directly so that proxy settings
in the environment never apply. Every request has a short timeout; no metadata service means bare
metal (debug log only); a malformed answer is a warning and "no notice", never an exception.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

from fleet_agent.timeutil import rfc3339, utc_now

log = logging.getLogger(__name__)

PROVIDERS = ("aws", "gcp", "azure", "alibaba", "oracle", "tencent")
FORCEABLE = ("aws", "gcp", "azure", "alibaba", "oracle", "tencent", "none")

DEFAULT_METADATA_URLS = {
    "aws": "http://169.254.169.254",
    "azure": "http://169.254.169.254",
    "gcp": "http://metadata.google.internal",
    "alibaba": "http://100.100.100.200",
    "tencent": "http://metadata.tencentyun.com",
}
DMI_FIELDS = ("product_name", "sys_vendor", "chassis_asset_tag", "bios_vendor")
AZURE_CHASSIS_ASSET_TAG = "7783-7084-3265-9085-8269-3286-77"
ORACLE_CHASSIS_ASSET_TAG = "OracleCloud.com"

AWS_TOKEN_TTL_S = 21600
AWS_TOKEN_REFRESH_MARGIN_S = 300
AWS_IMDSV1_RETRY_S = 300
GCP_PREEMPT_NOTICE_S = 30
IDENTITY_RETRY_S = 60.0
NOTICE_MEMORY_S = 3600.0
TENCENT_TZ = timezone(timedelta(hours=8))
AZURE_SCHEDULED_EVENTS = "/metadata/scheduledevents?api-version=2020-07-01"
AZURE_COMPUTE = "/metadata/instance/compute?api-version=2021-02-01"
AZURE_KINDS = {"Preempt": "preempt", "Terminate": "terminate", "Reboot": "maintenance",
               "Redeploy": "maintenance", "Freeze": "maintenance"}
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


def _cloud_from_dmi(dmi: dict[str, str]) -> str | None:
    product, vendor = dmi["product_name"], dmi["sys_vendor"]
    if any(value.startswith("Amazon EC2") for value in (product, vendor, dmi["bios_vendor"])):
        return "aws"
    if product.startswith("Google Compute Engine"):
        return "gcp"
    if dmi["chassis_asset_tag"] == AZURE_CHASSIS_ASSET_TAG:
        return "azure"
    if product.startswith("Alibaba Cloud ECS"):
        return "alibaba"
    if dmi["chassis_asset_tag"] == ORACLE_CHASSIS_ASSET_TAG:
        return "oracle"
    if vendor.startswith("Tencent Cloud"):
        return "tencent"
    return None


def detect_cloud(sys_root: str | Path = "/sys") -> str | None:
    """aws | gcp | azure | alibaba | oracle | tencent from DMI, or None (bare metal / unknown)."""
    return _cloud_from_dmi(read_dmi(sys_root))


def _is_bare_metal(provider: str | None, dmi: dict[str, str], instance_type: str | None = None) -> bool:
    if provider is None:
        return True
    if provider == "aws":
        return ".metal" in dmi["product_name"] or bool(instance_type and instance_type.endswith(".metal"))
    return False


def _parse_time(text: str | None, naive_tz: timezone = UTC) -> str | None:
    """ISO 8601 / RFC 3339 / "YYYY-MM-DD HH:MM:SS" / RFC 1123 → RFC 3339 UTC, or None."""
    if not isinstance(text, str) or not text.strip():
        return None
    text = text.strip()
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        try:
            moment = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=naive_tz)
    return rfc3339(moment)


def _spot_from_text(value: str | None, spot_values: tuple[str, ...], other_values: tuple[str, ...]):
    if value is None:
        return None
    value = value.strip().upper()
    if value in spot_values:
        return True
    if value in other_values:
        return False
    return None


class _Response(NamedTuple):
    status: int
    body: bytes

    def text(self) -> str | None:
        return self.body.decode("utf-8", "replace").strip() if self.status == 200 else None


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
        self._lock = threading.RLock()
        self._identity: dict | None = None
        self._identity_retry_at = 0.0
        self._aws_token: str | None = None
        self._aws_token_expiry = 0.0
        self._aws_imdsv1_until = 0.0
        self._azure_vm_name: str | None = None
        self._notice_first_seen: dict[tuple, tuple[datetime, str | None]] = {}
        self._warned: set[str] = set()

    # --- public ---------------------------------------------------------------------------------
    def identity(self) -> dict:
        """provider, instance_id, instance_type, region, spot, bare_metal (cached once read)."""
        with self._lock:
            if self._identity is not None:
                return dict(self._identity)
            fallback = {"provider": self.provider, "instance_id": None, "instance_type": None,
                        "region": None, "spot": None,
                        "bare_metal": _is_bare_metal(self.provider or self._detected, self._dmi)}
            reader = getattr(self, f"_identity_{self.provider}", None) if self.metadata_url else None
            if reader is None or time.monotonic() < self._identity_retry_at:
                return fallback
            try:
                found = reader()
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
            reader = getattr(self, f"_notices_{self.provider}", None) if self.metadata_url else None
            if reader is None:
                return None
            try:
                candidates = [notice for notice in reader() if notice]
            except Exception:
                log.warning("polling %s notices failed", self.provider, exc_info=True)
                candidates = []
            if not candidates:
                return None
            kind, deadline, source, detail = min(candidates, key=lambda n: _URGENCY[n[0]])
            # A notice keeps its first sighting (and first deadline) while it lasts, also across a
            # missed poll: Azure blanks NotBefore once an event starts, GCP gives no deadline at all.
            same = detail.get("EventId") if source == "azure.scheduledevents" else None
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
        if self.provider != "azure" or not self.metadata_url:
            return False
        body = json.dumps({"StartRequests": [{"EventId": event_id}]}).encode()
        with self._lock:
            response = self._request("POST", AZURE_SCHEDULED_EVENTS,
                                     {"Metadata": "true", "Content-Type": "application/json"}, body)
        if response is None or response.status not in (200, 201, 202, 204):
            log.warning("Azure did not accept the acknowledgement of event %s: %s", event_id,
                        response.status if response else "no answer")
            return False
        return True

    # --- HTTP -----------------------------------------------------------------------------------
    def _request(self, method: str, path: str, headers: dict | None = None,
                 body: bytes | None = None) -> _Response | None:
        """One request to the metadata service; None when it cannot be reached in time."""
        url = urlsplit(self.metadata_url)
        connection_class = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
        connection = connection_class(url.hostname or "", url.port, timeout=self.timeout)
        try:
            connection.request(method, url.path + path, body=body, headers=headers or {})
            response = connection.getresponse()
            return _Response(response.status, response.read(1024 * 1024))
        except (OSError, http.client.HTTPException, ValueError) as exc:
            log.debug("metadata %s %s unreachable: %s", method, path, exc)
            return None
        finally:
            with contextlib.suppress(Exception):
                connection.close()

    def _warn(self, topic: str, message: str, *args) -> None:
        # Notices are polled every few seconds: say it once, then keep quiet.
        if topic in self._warned:
            log.debug(message, *args)
        else:
            self._warned.add(topic)
            log.warning(message, *args)

    def _json(self, topic: str, response: _Response | None) -> dict | None:
        if response is None or response.status != 200:
            return None
        try:
            payload = json.loads(response.body)
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            self._warn(topic, "malformed %s metadata response %r; ignoring it", topic, response.body[:200])
            return None
        self._warned.discard(topic)
        return payload

    # --- AWS (IMDSv2 with IMDSv1 fallback) ------------------------------------------------------
    def _aws_headers(self) -> dict | None:
        now = time.monotonic()
        if self._aws_token and now < self._aws_token_expiry - AWS_TOKEN_REFRESH_MARGIN_S:
            return {"X-aws-ec2-metadata-token": self._aws_token}
        if now < self._aws_imdsv1_until:
            return {}
        response = self._request("PUT", "/latest/api/token",
                                 {"X-aws-ec2-metadata-token-ttl-seconds": str(AWS_TOKEN_TTL_S)})
        if response is None:
            return None
        if response.status == 200 and response.body.strip():
            self._aws_token = response.body.decode("ascii", "replace").strip()
            self._aws_token_expiry = now + AWS_TOKEN_TTL_S
            return {"X-aws-ec2-metadata-token": self._aws_token}
        if response.status in (403, 404, 405):
            log.debug("IMDSv2 token refused (%s); using IMDSv1", response.status)
            self._aws_imdsv1_until = now + AWS_IMDSV1_RETRY_S
            return {}
        self._warn("aws.token", "IMDSv2 token request answered %s", response.status)
        return None

    def _aws_get(self, path: str) -> _Response | None:
        for _attempt in range(2):
            headers = self._aws_headers()
            if headers is None:
                return None
            response = self._request("GET", f"/latest/meta-data/{path}", headers)
            if response is None or response.status != 401:
                return response
            self._aws_token, self._aws_imdsv1_until = None, 0.0  # expired or revoked: get a new one
        return response

    def _identity_aws(self) -> dict | None:
        instance_id = self._aws_get("instance-id")
        if instance_id is None or instance_id.text() is None:
            return None
        life_cycle = self._aws_get("instance-life-cycle")
        return {
            "instance_id": instance_id.text(),
            "instance_type": _text(self._aws_get("instance-type")),
            "region": _text(self._aws_get("placement/region")),
            "spot": _spot_from_text(_text(life_cycle), ("SPOT",), ("ON-DEMAND", "SCHEDULED")),
        }

    def _notices_aws(self) -> list:
        notices = []
        action = self._json("aws.spot.instance-action", self._aws_get("spot/instance-action"))
        if action is not None:
            kind = str(action.get("action", "")).lower()
            if kind in ("terminate", "stop", "hibernate"):
                notices.append((kind, _parse_time(action.get("time")), "aws.spot.instance-action", action))
            else:
                self._warn("aws.spot.instance-action.kind", "unknown AWS instance-action %r", action)
        rebalance = self._json("aws.events.recommendations.rebalance",
                               self._aws_get("events/recommendations/rebalance"))
        if rebalance is not None:
            notices.append(("rebalance", None, "aws.events.recommendations.rebalance", rebalance))
        return notices

    # --- GCP ------------------------------------------------------------------------------------
    def _gcp_get(self, path: str) -> _Response | None:
        return self._request("GET", f"/computeMetadata/v1/instance/{path}", {"Metadata-Flavor": "Google"})

    def _identity_gcp(self) -> dict | None:
        instance_id = _text(self._gcp_get("id"))
        if instance_id is None:
            return None
        zone = (_text(self._gcp_get("zone")) or "").rsplit("/", 1)[-1]
        spot = _spot_from_text(_text(self._gcp_get("scheduling/provisioning-model")), ("SPOT",), ("STANDARD",))
        if spot is None:
            spot = _spot_from_text(_text(self._gcp_get("scheduling/preemptible")), ("TRUE",), ("FALSE",))
        return {
            "instance_id": instance_id,
            "instance_type": (_text(self._gcp_get("machine-type")) or "").rsplit("/", 1)[-1] or None,
            "region": zone.rsplit("-", 1)[0] if zone.count("-") >= 2 else (zone or None),
            "spot": spot,
        }

    def _notices_gcp(self) -> list:
        notices = []
        preempted = _text(self._gcp_get("preempted"))
        if preempted is not None:
            if preempted.upper() == "TRUE":
                # GCP gives no deadline: hard-off comes 30 s after the soft-off signal we just saw.
                notices.append(("preempt", timedelta(seconds=GCP_PREEMPT_NOTICE_S), "gcp.preempted",
                                {"preempted": preempted}))
            elif preempted.upper() != "FALSE":
                self._warn("gcp.preempted", "malformed GCP preempted value %r", preempted[:200])
        event = _text(self._gcp_get("maintenance-event"))
        if event and event.upper() != "NONE":
            if event.upper().replace("-", "_").isidentifier():
                notices.append(("maintenance", None, "gcp.maintenance-event", {"maintenance-event": event}))
            else:
                self._warn("gcp.maintenance-event", "malformed GCP maintenance-event %r", event[:200])
        return notices

    # --- Azure ----------------------------------------------------------------------------------
    def _identity_azure(self) -> dict | None:
        compute = self._json("azure.compute", self._request("GET", AZURE_COMPUTE, {"Metadata": "true"}))
        if compute is None:
            return None
        self._azure_vm_name = compute.get("name") or None
        priority = str(compute.get("priority") or "")
        return {
            "instance_id": compute.get("vmId") or None,
            "instance_type": compute.get("vmSize") or None,
            "region": compute.get("location") or None,
            "spot": _spot_from_text(priority or None, ("SPOT", "LOW"), ("REGULAR",)),
        }

    def _notices_azure(self) -> list:
        document = self._json("azure.scheduledevents",
                              self._request("GET", AZURE_SCHEDULED_EVENTS, {"Metadata": "true"}))
        if document is None:
            return []
        events = document.get("Events")
        if not isinstance(events, list):
            self._warn("azure.scheduledevents", "Azure scheduled events without an Events list: %r", document)
            return []
        notices = []
        for event in events:
            if not isinstance(event, dict) or event.get("EventType") not in AZURE_KINDS:
                continue
            resources = event.get("Resources") or []
            if self._azure_vm_name and resources and self._azure_vm_name not in resources:
                continue  # an event for another VM in the same availability set
            notices.append((AZURE_KINDS[event["EventType"]], _parse_time(event.get("NotBefore")),
                            "azure.scheduledevents", event))
        return notices

    # --- Alibaba Cloud and Tencent Cloud --------------------------------------------------------
    def _plain_get(self, path: str) -> _Response | None:
        return self._request("GET", f"/latest/meta-data/{path}")

    def _identity_alibaba(self) -> dict | None:
        instance_id = _text(self._plain_get("instance-id"))
        if instance_id is None:
            return None
        return {"instance_id": instance_id, "instance_type": _text(self._plain_get("instance/instance-type")),
                "region": _text(self._plain_get("region-id")), "spot": None}

    def _identity_tencent(self) -> dict | None:
        instance_id = _text(self._plain_get("instance-id"))
        if instance_id is None:
            return None
        return {"instance_id": instance_id, "instance_type": _text(self._plain_get("instance/instance-type")),
                "region": _text(self._plain_get("placement/region")), "spot": None}

    def _termination_time(self, path: str, source: str, naive_tz: timezone) -> list:
        text = _text(self._plain_get(path))
        if not text:
            return []
        deadline = _parse_time(text, naive_tz)
        if deadline is None:
            self._warn(source, "malformed %s %r; ignoring it", source, text[:200])
            return []
        return [("terminate", deadline, source, {"termination-time": text})]

    def _notices_alibaba(self) -> list:
        return self._termination_time("instance/spot/termination-time", "alibaba.spot.termination-time",
                                      UTC)

    def _notices_tencent(self) -> list:
        # Tencent prints the time in the instance's OS zone, which is China Standard Time.
        return self._termination_time("spot/termination-time", "tencent.spot.termination-time", TENCENT_TZ)


def _text(response: _Response | None) -> str | None:
    return (response.text() or None) if response is not None else None


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
