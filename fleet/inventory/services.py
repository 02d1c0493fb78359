"""Writes to the inventory that an agent's report drives: GPU rows and software stacks.

Telemetry validates and stores reports and calls these; they return what changed as `Change`s, which telemetry
keeps in the node's change log. Set-based (a few statements per node, whatever its GPU count): they run on the
ingest path for every report that carries inventory.
"""

from datetime import datetime
from typing import NamedTuple

from .choices import STACK_COLUMNS, STACK_FIELD_LABELS, STACK_LIST_FIELDS
from .models import GPU, Node, SoftwareStack

_GPU_UPDATE_FIELDS = ["index", "model", "memory_total_bytes", "serial", "pci_bus_id", "compute_capability",
                      "temperature_slowdown_c", "temperature_shutdown_c", "temperature_max_operating_c",
                      "present", "updated_at"]


def _thresholds(item: dict) -> dict:
    """The inventory entry's temperature thresholds as GPU columns (all null when it carries none)."""
    reported = item.get("temperature_thresholds") or {}
    return {"temperature_slowdown_c": reported.get("slowdown_c"),
            "temperature_shutdown_c": reported.get("shutdown_c"),
            "temperature_max_operating_c": reported.get("gpu_max_c")}


class Change(NamedTuple):
    """One change of a node's inventory, as the change log shows it."""

    field: str
    old: object
    new: object
    summary: str


def gpus_apply(*, node_id: int, reported: list[dict], now: datetime, refused: set[str] | frozenset = frozenset()
               ) -> list[Change]:
    """Upsert the node's GPUs from an inventory's `gpus` list; mark the ones no longer reported absent.

    GPUs in `refused` (uuids of other nodes, or past the node's GPU limit) are left out, and no GPU row ever
    changes node here: the node's own rows are updated, new uuids inserted, a uuid that another node holds is not
    touched even if it appeared after the caller checked.
    """
    changes: list[Change] = []
    existing = {g.uuid: g for g in GPU.objects.filter(node_id=node_id)}
    by_index = {g.index: g for g in existing.values() if g.present}
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
            changes.append(Change(
                f"gpus[{item.get('index')}].serial", previous_at_index.serial or previous_at_index.uuid,
                item.get("serial") or uuid,
                f"GPU {item.get('index')} replaced: {previous_at_index.serial or previous_at_index.uuid} → "
                f"{item.get('serial') or uuid}"))
        elif old is not None and old.serial and item.get("serial") and old.serial != item.get("serial"):
            changes.append(Change(f"gpus[{item.get('index')}].serial", old.serial, item["serial"],
                                  f"GPU {item.get('index')} serial {old.serial} → {item['serial']}"))
        upserts.append(GPU(
            node_id=node_id, uuid=uuid, index=item.get("index") or 0, model=item.get("name") or "",
            memory_total_bytes=item.get("memory_total_bytes"), serial=item.get("serial") or "",
            pci_bus_id=item.get("pci_bus_id") or "", compute_capability=item.get("compute_capability") or "",
            **_thresholds(item), present=True,
        ))
    known = [g for g in upserts if g.uuid in existing]
    if known:
        GPU.objects.bulk_create(known, update_conflicts=True, unique_fields=["uuid"],
                                update_fields=_GPU_UPDATE_FIELDS)
    new = [g for g in upserts if g.uuid not in existing]
    if new:
        GPU.objects.bulk_create(new, ignore_conflicts=True)
    gone = [g for uuid, g in existing.items() if uuid not in seen and g.present]
    if gone:
        GPU.objects.filter(pk__in=[g.pk for g in gone]).update(present=False, updated_at=now)
    old_count = sum(1 for g in existing.values() if g.present)
    new_count = len(seen)
    if existing and old_count != new_count:
        changes.append(Change("gpu_count", old_count, new_count, f"GPU count {old_count} → {new_count}"))
    return changes


def gpus_add_missing(*, node_id: int, gpus: list[dict]) -> None:
    """Insert rows for GPUs known only from their status (e.g. hot-added before any inventory named them).

    DO NOTHING on a uuid another node inserted meanwhile: a GPU row never changes node here.
    """
    GPU.objects.bulk_create([
        GPU(node_id=node_id, uuid=gpu["uuid"], index=gpu.get("index") or 0, model=gpu.get("name") or "",
            pci_bus_id=gpu.get("pci_bus_id") or "", memory_total_bytes=gpu.get("memory_total_bytes"),
            serial=gpu.get("serial") or "", compute_capability=gpu.get("compute_capability") or "")
        for gpu in gpus], ignore_conflicts=True)


def _stack_values(stack: dict) -> dict:
    """The reported stack as SoftwareStack columns: blanks for what the node could not read."""
    values = {column: stack.get(field) or ([] if column in STACK_LIST_FIELDS else "")
              for field, column in STACK_COLUMNS.items()}
    values["cuda_toolkits"] = sorted(values["cuda_toolkits"])
    return values


def _framework_summary(frameworks: list[dict]) -> dict[str, str]:
    return {f.get("name", "?"): f"{f.get('version') or '?'} (CUDA {f.get('cuda') or '-'})" for f in frameworks}


def stack_apply(*, node_id: int, stack: dict, now: datetime) -> list[Change]:
    """Make the reported stack the node's current one when it differs; nothing is written when it does not."""
    values = _stack_values(stack)
    changes: list[Change] = []
    node = Node.objects.select_related("current_stack").get(pk=node_id)
    current = node.current_stack
    if current is not None:
        before = {name: getattr(current, name) for name in values}
        before["cuda_toolkits"] = sorted(before["cuda_toolkits"] or [])
        if before == values:
            return changes
        for name, label in STACK_FIELD_LABELS.items():
            if name not in STACK_LIST_FIELDS and before[name] != values[name]:
                changes.append(Change(name, before[name] or None, values[name] or None,
                                      f"{label} {before[name] or '—'} → {values[name] or '—'}"))
        if before["cuda_toolkits"] != values["cuda_toolkits"]:
            changes.append(Change("cuda_toolkits", before["cuda_toolkits"], values["cuda_toolkits"],
                                  f"CUDA toolkits {', '.join(before['cuda_toolkits']) or '—'} → "
                                  f"{', '.join(values['cuda_toolkits']) or '—'}"))
        old_fw, new_fw = _framework_summary(before["frameworks"]), _framework_summary(values["frameworks"])
        for name in sorted(set(old_fw) | set(new_fw)):
            if old_fw.get(name) != new_fw.get(name):
                changes.append(Change(f"frameworks.{name}", old_fw.get(name), new_fw.get(name),
                                      f"{name} {old_fw.get(name) or '—'} → {new_fw.get(name) or '—'}"))
    created = SoftwareStack.objects.create(node_id=node_id, collected_at=now, **values)
    Node.objects.filter(pk=node_id).update(current_stack=created)
    return changes
