"""The facts a rule check reads: one node's latest status, GPUs, stack, baseline and recent events.

They are plain data, loaded for the whole fleet in a constant number of queries by
`fleet.health.services.facts.facts_load`, and easy to build by hand in tests or benchmarks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from fleet.inventory.choices import CLOUD_FORMS, BillingMode
from fleet.inventory.models import GPU


@dataclass(slots=True)
class GpuIdentity:
    id: int
    index: int
    uuid: str
    pci_bus_id: str
    model: str = ""
    serial: str = ""


@dataclass(slots=True)
class EventFact:
    id: int
    kind: str
    code: int | None
    severity: str
    at: datetime
    gpu_id: int | None
    pci_bus_id: str = ""
    message: str = ""
    raw: str = ""
    detail: dict = field(default_factory=dict)

    def log_line(self) -> dict:
        return {"at": self.at.isoformat(), "kind": self.kind, "code": self.code,
                "line": self.raw or self.message, "event_id": self.id}


@dataclass(slots=True)
class XidOccurrence:
    """One Xid in the long escalation window (no log text, just where and when)."""

    gpu_id: int | None
    pci_bus_id: str
    code: int
    at: datetime


@dataclass(slots=True)
class NodeFacts:
    id: int
    hostname: str
    provider_id: int
    delivery_form: str
    billing_mode: str = BillingMode.ON_DEMAND
    state: str = "active"
    pool_id: int | None = None
    expected_gpu_count: int = 0
    expected_gpu_model: str = ""
    pool_gpus_per_node: int | None = None
    pool_gpu_model: str = ""
    site_id: int | None = None  # the node's site, else its pool's
    site_name: str = ""
    status: dict | None = None
    stack: dict | None = None  # shared by the nodes of one cycle whose stacks are identical: not to be mutated
    # A small number for the stack's content (identical stacks, identical keys, within one cycle): lets checks whose
    # result depends only on the stack compute it once per distinct stack per cycle.
    stack_key: int | None = None
    baseline: dict | None = None
    checkpoint_max_age_s: int | None = None  # from the pool's checkpoint policy (billing), when it covers the node
    gpu_summary: dict | None = None
    gpu_kinds: list[tuple] = field(default_factory=list)  # (model, memory_total_bytes, compute_capability, count)
    candidate_gpus: list[dict] = field(default_factory=list)
    events: list[EventFact] = field(default_factory=list)
    xid_history: list[XidOccurrence] = field(default_factory=list)
    reboots: list[datetime] = field(default_factory=list)
    boots: list[datetime] = field(default_factory=list)  # boot id changes the agent reported (the node came back)
    # Disruptions we asked for (remediation's reboot / stack rollback steps): (at, change-log field, summary).
    requested_changes: list[tuple[datetime, str, str]] = field(default_factory=list)
    gpus: dict[int, GpuIdentity] = field(default_factory=dict)

    @property
    def is_cloud(self) -> bool:
        return self.delivery_form in CLOUD_FORMS

    @property
    def is_spot(self) -> bool:
        return self.billing_mode == BillingMode.SPOT

    @property
    def silent(self) -> bool:
        return self.status is None or bool(self.status.get("silent"))

    @property
    def nvml_ok(self) -> bool:
        return self.status is not None and self.status.get("nvml_status") == "ok"

    def gpu_for_bus(self, bus_id: str | None) -> GpuIdentity | None:
        wanted = GPU.normalize_bus_id(bus_id)
        if not wanted:
            return None
        return next((g for g in self.gpus.values() if GPU.normalize_bus_id(g.pci_bus_id) == wanted), None)


    def gpu_ref(self, gpu_id: int | None, bus_id: str | None) -> tuple[str, GpuIdentity | None]:
        """A stable subject key for a GPU named by id or PCI address, and its identity when known."""
        identity = self.gpus.get(gpu_id) if gpu_id is not None else None
        if identity is None and bus_id:
            identity = self.gpu_for_bus(bus_id)
        if identity is not None:
            return f"gpu:{identity.id}", identity
        if bus_id:
            return f"pci:{GPU.normalize_bus_id(bus_id)}", None
        if gpu_id is not None:
            return f"gpu:{gpu_id}", None
        return "node", None

    def events_of(self, *kinds: str) -> list[EventFact]:
        return [e for e in self.events if e.kind in kinds]

    def last_reboot_before(self, moment: datetime) -> datetime | None:
        earlier = [r for r in self.reboots if r <= moment]
        return max(earlier) if earlier else None


@dataclass(slots=True)
class EvalContext:
    now: datetime
    xid_policies: dict[int, dict] = field(default_factory=dict)
    xid_version: int | None = None
    memo: dict = field(default_factory=dict)  # per-cycle cache for checks whose inputs repeat across nodes
