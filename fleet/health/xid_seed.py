"""The Xid policy table as first seeded: the agent's Xid catalog (`fleet_agent.xid`) plus the layer each code sits
on, which only the server decides. After seeding, the database is the source of truth; operators edit it via the
API.

Layer placement (our decision, documented in docs/health.md): application faults (13, 31, 43, 45) sit on the
application layer; GPU hangs and GSP firmware timeouts (46, 119, 120) on the GPU driver; the rest on hardware.
"""

from fleet.inventory.choices import Layer
from fleet_agent.xid import UNKNOWN_XID, XID_CATALOG

XID_LAYERS: dict[int, str] = {
    13: Layer.APPLICATION, 31: Layer.APPLICATION, 43: Layer.APPLICATION, 45: Layer.APPLICATION,
    46: Layer.GPU_DRIVER, 119: Layer.GPU_DRIVER, 120: Layer.GPU_DRIVER,
}
DEFAULT_XID_LAYER = Layer.HARDWARE


def _policy(code: int | None, entry: dict, layer: str) -> dict:
    return {"code": code, "meaning": entry["meaning"], "severity": entry["severity"], "action": entry["action"],
            "layer": layer, "escalation": entry["escalation"]}


def xid_seed_policy(code: int) -> dict:
    """One catalog code's seeded policy: the catalog entry and the code's layer."""
    return _policy(code, XID_CATALOG[code], XID_LAYERS.get(code, DEFAULT_XID_LAYER))


def xid_unknown_policy(code: int | None) -> dict:
    """The policy of a code the table lacks: the catalog's unknown-Xid entry, on the hardware layer."""
    return _policy(code, UNKNOWN_XID, DEFAULT_XID_LAYER)


def seed_xid_policies(policy_model) -> int:
    """Create the seeded rows that do not exist yet (version 1). Takes the model class for data migrations."""
    existing = set(policy_model.objects.values_list("code", flat=True))
    rows = [policy_model(**xid_seed_policy(code), changed_in_version=1)
            for code in sorted(XID_CATALOG) if code not in existing]
    policy_model.objects.bulk_create(rows)
    return len(rows)
