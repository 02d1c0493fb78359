"""Assembles one protocol report (schema_version 1.0) from the collectors' outputs.

See docs/agent-protocol.md and fleet_agent/schema/report-v1.schema.json for the contract.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from fleet_agent import __version__
from fleet_agent.inventory import build_inventory, sample_gpu
from fleet_agent.timeutil import rfc3339, utc_now

SCHEMA_VERSION = "1.0"
MAX_EVENTS = 1000
CLOUD_IDENTITY_FIELDS = ("provider", "instance_id", "instance_type", "region", "spot", "bare_metal")


class SequenceSource(Protocol):
    instance_id: str

    def next_sequence(self) -> int: ...

    def acked_inventory_hash(self) -> str | None: ...


@dataclass
class EphemeralSequences:
    """For ``collect --once``: numbers that continue an existing spool's without writing to it."""

    instance_id: str
    last_sequence: int = 0
    acked_hash: str | None = None

    def next_sequence(self) -> int:
        self.last_sequence += 1
        return self.last_sequence

    def acked_inventory_hash(self) -> str | None:
        return self.acked_hash


@dataclass
class NodeIdentity:
    machine_id: str
    hostname: str
    node_id: int | None = None


@dataclass
class ReportParts:
    """Everything collected for one report, before numbering and assembly."""

    visibility: dict
    gpus: list[dict]
    system: dict | None
    cloud: dict | None
    checkpoint: dict | None
    host: dict
    stack: dict
    events: list[dict]
    fabric: dict | None = None  # PCI view, fabric manager / IMEX, InfiniBand ports (collectors/fabric.py)


# The schema's bounds on a notice's free-form ``detail`` (the cloud's own payload): the server refuses a
# report past them, so the agent trims the payload rather than lose the notice.
DETAIL_MAX_DEPTH = 6
DETAIL_MAX_MEMBERS = 64
DETAIL_MAX_STRING = 4096
DETAIL_MAX_KEY = 256


def clip_detail(value: object, depth: int = 1) -> object:
    """``value`` cut to the schema's bounds: deeper levels become their JSON text, lists and objects keep
    their first 64 members, strings their first 4096 characters."""
    if isinstance(value, dict):
        if depth > DETAIL_MAX_DEPTH:
            return json.dumps(value, sort_keys=True, default=str)[:DETAIL_MAX_STRING]
        return {
            str(key)[:DETAIL_MAX_KEY]: clip_detail(item, depth + 1)
            for key, item in list(value.items())[:DETAIL_MAX_MEMBERS]
        }
    if isinstance(value, list | tuple):
        if depth > DETAIL_MAX_DEPTH:
            return json.dumps(value, default=str)[:DETAIL_MAX_STRING]
        return [clip_detail(item, depth + 1) for item in value[:DETAIL_MAX_MEMBERS]]
    if isinstance(value, str):
        return value[:DETAIL_MAX_STRING]
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return str(value)[:DETAIL_MAX_STRING]


def cloud_block(identity: dict | None, notice: dict | None) -> dict | None:
    if identity is None:
        return None
    block = {key: identity.get(key) for key in CLOUD_IDENTITY_FIELDS}
    if notice is not None and isinstance(notice.get("detail"), dict):
        notice = {**notice, "detail": clip_detail(notice["detail"])}
    block["notice"] = notice
    return block


def cap_events(events: Iterable[dict], clock: Callable[[], datetime] = utc_now) -> list[dict]:
    """At most MAX_EVENTS per report; the overflow is summarised in one agent_error event."""
    events = list(events)
    if len(events) <= MAX_EVENTS:
        return events
    dropped = len(events) - (MAX_EVENTS - 1)
    kept = events[: MAX_EVENTS - 1]
    kept.append(
        {
            "kind": "agent_error",
            "at": rfc3339(clock()),
            "gpu_uuid": None,
            "pci_bus_id": None,
            "code": None,
            "severity": "warning",
            "message": f"{dropped} more events since the last report were not sent",
            "raw": "",
        }
    )
    return kept


class ReportBuilder:
    def __init__(
        self,
        *,
        sequences: SequenceSource,
        identity: NodeIdentity,
        interval_s: float,
        clock: Callable[[], datetime] = utc_now,
    ):
        self.sequences = sequences
        self.identity = identity
        self.interval_s = interval_s
        self._clock = clock

    def build(self, parts: ReportParts) -> dict:
        inventory = build_inventory(host=parts.host, gpus=parts.gpus, stack=parts.stack)
        sequence = self.sequences.next_sequence()
        # Sent until a report carrying this hash is acknowledged; the first report of an instance
        # always has it, because nothing has been acknowledged yet.
        if inventory["hash"] == self.sequences.acked_inventory_hash():
            inventory = None
        report = {
            "schema_version": SCHEMA_VERSION,
            "agent": {"version": __version__, "instance_id": self.sequences.instance_id},
            "node": {
                "node_id": self.identity.node_id,
                "machine_id": self.identity.machine_id,
                "hostname": self.identity.hostname,
            },
            "sequence": sequence,
            "collected_at": rfc3339(self._clock()),
            "interval_s": self.interval_s,
            "visibility": parts.visibility,
            "gpus": [sample_gpu(gpu) for gpu in parts.gpus],
            "system": parts.system,
            "cloud": parts.cloud,
            "checkpoint": parts.checkpoint,
            "events": cap_events(parts.events, self._clock),
            "inventory": inventory,
        }
        if parts.fabric is not None:  # optional in the schema: reports of older agents have none
            report["fabric"] = parts.fabric
        return report
