"""Simulated cloud identity and interruption notices, shaped like the real ``CloudCollector``'s.

Each cloud's notice carries that cloud's own payload in ``detail`` (AWS instance-action, an Azure
scheduled event, …) and the source names the real collector uses, so the server cannot tell a
simulated notice from a real one.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

from fleet_agent.timeutil import rfc3339

# Warning each cloud gives before reclaiming, as the clouds document it: AWS ~2 min, GCP 30 s, Azure ≥ 30 s,
# Alibaba ~5 min; Tencent is documented like AWS.
DEFAULT_LEAD_S = {"aws": 120, "gcp": 30, "azure": 30, "alibaba": 300, "tencent": 120}
_AZURE_EVENT_TYPES = {"preempt": "Preempt", "terminate": "Terminate", "maintenance": "Freeze"}
_TENCENT_TZ = timezone(timedelta(hours=8))


class SimulatedCloud:
    def __init__(
        self,
        *,
        provider: str | None,
        instance_id: str | None,
        instance_type: str | None,
        region: str | None,
        spot: bool | None,
        bare_metal: bool,
        clock: Callable[[], datetime],
    ):
        self.provider = provider
        self._identity = {
            "provider": provider,
            "instance_id": instance_id,
            "instance_type": instance_type,
            "region": region,
            "spot": spot,
            "bare_metal": bare_metal,
        }
        self._clock = clock
        self._notice: dict | None = None

    def identity(self) -> dict:
        return dict(self._identity)

    def poll_notice(self) -> dict | None:
        return dict(self._notice) if self._notice else None

    def clear_notice(self) -> None:
        self._notice = None

    def raise_notice(self, kind: str, lead_s: float | None = None) -> dict:
        """Start a notice of ``kind``; returns it. Its deadline is ``lead_s`` from now (None: no deadline)."""
        now = self._clock()
        lead = DEFAULT_LEAD_S.get(self.provider or "", 120) if lead_s is None else lead_s
        deadline = now + timedelta(seconds=lead)
        builder = getattr(self, f"_notice_{self.provider}")
        source, detail, has_deadline = builder(kind, now, deadline)
        self._notice = {
            "kind": kind,
            "deadline": rfc3339(deadline) if has_deadline else None,
            "received_at": rfc3339(now),
            "source": source,
            "detail": detail,
        }
        return dict(self._notice)

    @staticmethod
    def _notice_aws(kind: str, now: datetime, deadline: datetime) -> tuple[str, dict, bool]:
        if kind == "rebalance":
            return "aws.events.recommendations.rebalance", {"noticeTime": rfc3339(now)}, False
        return "aws.spot.instance-action", {"action": kind, "time": rfc3339(deadline)}, True

    @staticmethod
    def _notice_gcp(kind: str, now: datetime, deadline: datetime) -> tuple[str, dict, bool]:
        if kind == "maintenance":
            return "gcp.maintenance-event", {"maintenance-event": "TERMINATE_ON_HOST_MAINTENANCE"}, False
        return "gcp.preempted", {"preempted": "TRUE"}, True

    def _notice_azure(self, kind: str, now: datetime, deadline: datetime) -> tuple[str, dict, bool]:
        event = {
            "EventId": str(uuid.uuid4()).upper(),
            "EventType": _AZURE_EVENT_TYPES[kind],
            "ResourceType": "VirtualMachine",
            "Resources": [self._identity["instance_id"] or "vm"],
            "EventStatus": "Scheduled",
            "NotBefore": format_datetime(deadline, usegmt=True),
            "Description": "Virtual machine is being preempted." if kind == "preempt" else "",
            "EventSource": "Platform",
            "DurationInSeconds": -1 if kind != "maintenance" else 5,
        }
        return "azure.scheduledevents", event, True

    @staticmethod
    def _notice_alibaba(kind: str, now: datetime, deadline: datetime) -> tuple[str, dict, bool]:
        return "alibaba.spot.termination-time", {"termination-time": rfc3339(deadline)}, True

    @staticmethod
    def _notice_tencent(kind: str, now: datetime, deadline: datetime) -> tuple[str, dict, bool]:
        local = deadline.astimezone(_TENCENT_TZ).strftime("%Y-%m-%d %H:%M:%S")  # the instance's OS time
        return "tencent.spot.termination-time", {"termination-time": local}, True
