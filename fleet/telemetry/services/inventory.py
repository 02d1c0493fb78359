"""Apply an agent's inventory (GPUs, host, software stack) and log every change on the node."""

from datetime import datetime

from fleet.inventory.choices import STACK_COLUMNS, STACK_FIELD_LABELS, STACK_LIST_FIELDS
from fleet.inventory.models import GPU, Node, SoftwareStack

from ..models import ChangeLogEntry, NodeStatus


def _stack_values(stack: dict) -> dict:
    """The reported stack as SoftwareStack columns: blanks for what the node could not read."""
    values = {column: stack.get(field) or ([] if column in STACK_LIST_FIELDS else "")
              for field, column in STACK_COLUMNS.items()}
    values["cuda_toolkits"] = sorted(values["cuda_toolkits"])
    return values


def _framework_summary(frameworks: list[dict]) -> dict[str, str]:
    return {f.get("name", "?"): f"{f.get('version') or '?'} (CUDA {f.get('cuda') or '-'})" for f in frameworks}


def inventory_apply(*, node_id: int, report: dict, now: datetime, refused: set[str] | frozenset = frozenset()
                    ) -> dict[str, int]:
    """Upsert the node's GPUs and stack from `report["inventory"]`; return the uuid → GPU id map.

    GPUs in `refused` (uuids of other nodes, or past the node's GPU limit) are left out, and no GPU row ever
    changes node here: the node's own rows are updated, new uuids inserted, a uuid that another node holds is not
    touched even if it appeared after the caller checked.
    """
    inventory = report["inventory"]
    changes: list[ChangeLogEntry] = []

    def change(field: str, old, new, summary: str) -> None:
        changes.append(ChangeLogEntry(node_id=node_id, at=now, field=field, old=old, new=new, summary=summary[:300]))

    existing = {g.uuid: g for g in GPU.objects.filter(node_id=node_id)}
    by_index = {g.index: g for g in existing.values() if g.present}
    reported = inventory.get("gpus") or []
    seen: set[str] = set()
    upserts: list[GPU] = []
    for item in reported:
        uuid = item.get("uuid")
        if not uuid or uuid in refused:
            continue
        seen.add(uuid)
        old = existing.get(uuid)
        previous_at_index = by_index.get(item.get("index"))
        if old is None and previous_at_index is not None and previous_at_index.uuid not in {
                i.get("uuid") for i in reported}:
            change(f"gpus[{item.get('index')}].serial", previous_at_index.serial or previous_at_index.uuid,
                   item.get("serial") or uuid,
                   f"GPU {item.get('index')} replaced: {previous_at_index.serial or previous_at_index.uuid} → "
                   f"{item.get('serial') or uuid}")
        elif old is not None and old.serial and item.get("serial") and old.serial != item.get("serial"):
            change(f"gpus[{item.get('index')}].serial", old.serial, item["serial"],
                   f"GPU {item.get('index')} serial {old.serial} → {item['serial']}")
        upserts.append(GPU(
            node_id=node_id, uuid=uuid, index=item.get("index") or 0, model=item.get("name") or "",
            memory_total_bytes=item.get("memory_total_bytes"), serial=item.get("serial") or "",
            pci_bus_id=item.get("pci_bus_id") or "", compute_capability=item.get("compute_capability") or "",
            present=True,
        ))
    known = [g for g in upserts if g.uuid in existing]
    if known:
        GPU.objects.bulk_create(known, update_conflicts=True, unique_fields=["uuid"],
                                update_fields=["index", "model", "memory_total_bytes", "serial", "pci_bus_id",
                                               "compute_capability", "present", "updated_at"])
    new = [g for g in upserts if g.uuid not in existing]
    if new:
        GPU.objects.bulk_create(new, ignore_conflicts=True)
    gone = [g for uuid, g in existing.items() if uuid not in seen and g.present]
    if gone:
        GPU.objects.filter(pk__in=[g.pk for g in gone]).update(present=False, updated_at=now)
    old_count = sum(1 for g in existing.values() if g.present)
    new_count = len(seen)
    if existing and old_count != new_count:
        change("gpu_count", old_count, new_count, f"GPU count {old_count} → {new_count}")

    boot_id = (inventory.get("host") or {}).get("boot_id")
    if boot_id:
        previous = NodeStatus.objects.filter(node_id=node_id).values_list("boot_id", flat=True).first()
        if previous and previous != boot_id:
            # The health engine counts these for Xid escalation ("came back after 2 reboots").
            change("boot_id", previous, boot_id, f"rebooted (boot id {previous[:8]}… → {boot_id[:8]}…)")

    stack = inventory.get("stack")
    if stack is not None:
        _apply_stack(node_id, _stack_values(stack), now, change)
    if changes:
        ChangeLogEntry.objects.bulk_create(changes)
    return dict(GPU.objects.filter(node_id=node_id).values_list("uuid", "pk"))


def _apply_stack(node_id: int, values: dict, now: datetime, change) -> None:
    node = Node.objects.select_related("current_stack").get(pk=node_id)
    current = node.current_stack
    if current is not None:
        before = {name: getattr(current, name) for name in values}
        before["cuda_toolkits"] = sorted(before["cuda_toolkits"] or [])
        if before == values:
            return
        for name, label in STACK_FIELD_LABELS.items():
            if name not in STACK_LIST_FIELDS and before[name] != values[name]:
                change(name, before[name] or None, values[name] or None,
                       f"{label} {before[name] or '—'} → {values[name] or '—'}")
        if before["cuda_toolkits"] != values["cuda_toolkits"]:
            change("cuda_toolkits", before["cuda_toolkits"], values["cuda_toolkits"],
                   f"CUDA toolkits {', '.join(before['cuda_toolkits']) or '—'} → "
                   f"{', '.join(values['cuda_toolkits']) or '—'}")
        old_fw, new_fw = _framework_summary(before["frameworks"]), _framework_summary(values["frameworks"])
        for name in sorted(set(old_fw) | set(new_fw)):
            if old_fw.get(name) != new_fw.get(name):
                change(f"frameworks.{name}", old_fw.get(name), new_fw.get(name),
                       f"{name} {old_fw.get(name) or '—'} → {new_fw.get(name) or '—'}")
    stack = SoftwareStack.objects.create(node_id=node_id, collected_at=now, **values)
    Node.objects.filter(pk=node_id).update(current_stack=stack)
