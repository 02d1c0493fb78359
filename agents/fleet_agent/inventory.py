"""The inventory block: what the node *is* (host, GPUs, software stack), sent only when it changes.

Only slowly changing facts belong here, so the hash stays the same from one report to the next
until something real changes (a driver upgrade, a GPU swapped, a framework rebuilt).
"""

from __future__ import annotations

import hashlib
import json

GPU_IDENTITY_FIELDS = (
    "index",
    "uuid",
    "name",
    "serial",
    "pci_bus_id",
    "memory_total_bytes",
    "compute_capability",
    "temperature_thresholds",
)
# Facts the NVML adapter reads once per driver load and that travel only in the inventory, never in the
# per-sample ``gpus`` entries (the report schema's gpu object has no place for them).
GPU_INVENTORY_ONLY_FIELDS = ("temperature_thresholds",)


def sample_gpu(gpu: dict) -> dict:
    """A GPU entry as the report's ``gpus`` carries it: without the inventory-only facts."""
    return {key: value for key, value in gpu.items() if key not in GPU_INVENTORY_ONLY_FIELDS}


def canonical_json(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def inventory_hash(content: dict) -> str:
    """sha256 of the canonical JSON of the inventory without its ``hash`` key."""
    return hashlib.sha256(canonical_json({k: v for k, v in content.items() if k != "hash"})).hexdigest()


def build_inventory(*, host: dict, gpus: list[dict], stack: dict) -> dict:
    content = {
        "host": host,
        "gpus": [{key: gpu.get(key) for key in GPU_IDENTITY_FIELDS} for gpu in gpus],
        "stack": stack,
    }
    return {"hash": inventory_hash(content), **content}
