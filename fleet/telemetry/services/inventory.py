"""Apply an agent's inventory (GPUs, host, software stack) and log every change on the node.

The GPU and stack rows belong to the inventory app (`fleet.inventory.services`); what telemetry adds is the
node's change log and the reboot seen in the boot id.
"""

from datetime import datetime

from fleet.inventory.models import GPU
from fleet.inventory.services import gpus_apply, stack_apply

from ..models import ChangeLogEntry, NodeStatus


def inventory_apply(*, node_id: int, report: dict, now: datetime, refused: set[str] | frozenset = frozenset()
                    ) -> dict[str, int]:
    """Upsert the node's GPUs and stack from `report["inventory"]`; return the uuid → GPU id map.

    GPUs in `refused` (uuids of other nodes, or past the node's GPU limit) are left out (`gpus_apply`).
    """
    inventory = report["inventory"]
    changes = gpus_apply(node_id=node_id, reported=inventory.get("gpus") or [], now=now, refused=refused)

    boot_id = (inventory.get("host") or {}).get("boot_id")
    if boot_id:
        previous = NodeStatus.objects.filter(node_id=node_id).values_list("boot_id", flat=True).first()
        if previous and previous != boot_id:
            # The health engine counts these for Xid escalation ("came back after 2 reboots").
            changes.append(("boot_id", previous, boot_id, f"rebooted (boot id {previous[:8]}… → {boot_id[:8]}…)"))

    stack = inventory.get("stack")
    if stack is not None:
        changes += stack_apply(node_id=node_id, stack=stack, now=now)
    if changes:
        ChangeLogEntry.objects.bulk_create([
            ChangeLogEntry(node_id=node_id, at=now, field=field, old=old, new=new, summary=summary[:300])
            for field, old, new, summary in changes])
    return dict(GPU.objects.filter(node_id=node_id).values_list("uuid", "pk"))
