"""The fabric digest: what the fabric rules judge of one report, stored on `NodeStatus.fabric`.

Built at ingestion from the report's `fabric` section (PCI view, fabric manager, IMEX, InfiniBand ports) and the
per-GPU configuration NVML reported (persistence, ECC and MIG modes, GSP firmware, NVSwitch fabric registration,
NVLink states and error growth). It keeps only what a rule reads and nothing node-specific that does not matter
(no serials, no UUIDs, no cumulative counters), so the digests of healthy nodes of one pool are identical and
the rule cycle decodes each distinct one once. An empty digest means the agent reported none of it (an agent
older than these checks): the rules cannot tell, rather than pass.

`attention` lists what is out of the ordinary whatever the rules' thresholds (a GPU setting off, a link down,
errors growing, a service stopped): the rule cycle loads GPU identities only for nodes that have some.
"""

from fleet.inventory.models import GPU

NVLINK_COUNTERS = ("replay", "recovery", "crc_flit", "crc_data")
IB_COUNTERS = ("symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors")
# Drivers a GPU on the bus may be bound to on purpose without NVML seeing it (passthrough to a VM).
PASSTHROUGH_DRIVERS = frozenset({"vfio-pci", "pci-stub"})


def _pair(mode) -> list[bool] | None:
    if not isinstance(mode, dict):
        return None
    return [bool(mode.get("current")), bool(mode.get("pending"))]


def _gpu_digest(gpu: dict) -> dict | None:
    states = gpu.get("nvlink") or []
    down = [link for link, state in enumerate(states) if state == 0] if any(s == 1 for s in states) else []
    growth: dict[str, dict[str, int]] = {}
    for entry in gpu.get("nvlink_errors") or []:
        recent = {name: value for name, value in (entry.get("recent") or {}).items()
                  if name in NVLINK_COUNTERS and value}
        if recent:
            growth[str(entry.get("link"))] = recent
    fabric = gpu.get("fabric") or None
    digest = {
        "index": gpu.get("index"),
        "bus": GPU.normalize_bus_id(gpu.get("pci_bus_id")) or None,
        "model": (gpu.get("name") or "")[:100] or None,
        "persistence": gpu.get("persistence_mode"),
        "ecc": _pair(gpu.get("ecc_mode")),
        "mig": _pair(gpu.get("mig_mode")),
        "gsp": gpu.get("gsp_firmware_version"),
        "fabric": fabric.get("state") if fabric else None,
        "fabric_status": fabric.get("status") if fabric else None,
        "nvlink_down": down,
        "nvlink_growth": growth,
    }
    known = ("persistence_mode", "ecc_mode", "mig_mode", "gsp_firmware_version", "fabric", "nvlink_errors")
    if gpu.get("lost") or not any(key in gpu for key in known):
        return None  # a lost GPU reads nothing; a GPU from an older agent reports none of these fields
    return digest


def _attention(gpus: list[dict], digest: dict, nvml_bus_ids: list[str]) -> list[str]:
    """Every condition some fabric rule may find true, whatever its thresholds — except against baseline pins,
    which the rules check themselves. A rule skips a node whose digest names nothing for it."""
    notes = []
    for gpu in gpus:
        if gpu["persistence"] is False:
            notes.append("persistence")
        if gpu["ecc"] and (not gpu["ecc"][0] or gpu["ecc"][0] != gpu["ecc"][1]):
            notes.append("ecc")
        if gpu["mig"] and (gpu["mig"][0] or gpu["mig"][1]):
            notes.append("mig")
        if gpu["fabric"] and (gpu["fabric"] != "completed" or gpu["fabric_status"]):
            notes.append("fabric")
        if gpu["nvlink_down"]:
            notes.append("nvlink_down")
        if gpu["nvlink_growth"]:
            notes.append("nvlink_errors")
    if len({gpu["gsp"] for gpu in gpus if gpu["gsp"]}) > 1:
        notes.append("gsp")
    pci = digest.get("pci")
    if pci and (pci["unbound"] or set(pci["bus_ids"]) - set(nvml_bus_ids)):
        notes.append("pci")
    manager = digest.get("fabric_manager")
    if manager is not None and ((pci or {}).get("nvswitches") or any(g["fabric"] for g in gpus)) \
            and not (manager.get("installed") and manager.get("running")):
        notes.append("fabric_manager")
    imex = digest.get("imex")
    if imex and imex.get("configured") and not (imex.get("running") and imex.get("channels")):
        notes.append("imex")
    ports = digest.get("ib") or []
    if any(p["state"] != "ACTIVE" or p["phys_state"] != "LinkUp" or p["growth"] for p in ports) \
            or len({(p["link_layer"], p["rate_gbps"]) for p in ports}) > len({p["link_layer"] for p in ports}):
        notes.append("ib")
    return sorted(set(notes))


def fabric_digest(report: dict) -> dict:
    section = report.get("fabric") or {}
    gpus = [d for d in (_gpu_digest(g) for g in report.get("gpus") or []) if d is not None]
    if not section and not gpus:
        return {}
    digest: dict = {"gpus": gpus, "nvml_bus_ids": sorted(
        GPU.normalize_bus_id(g.get("pci_bus_id")) for g in report.get("gpus") or [] if g.get("pci_bus_id"))}
    pci = section.get("pci")
    if pci is not None:
        nvidia = [g for g in pci.get("gpus") or [] if g.get("driver") not in PASSTHROUGH_DRIVERS]
        digest["pci"] = {
            "gpus": len(nvidia),
            "bus_ids": sorted(GPU.normalize_bus_id(g.get("bus_id")) for g in nvidia),
            "unbound": sorted(GPU.normalize_bus_id(g.get("bus_id")) for g in nvidia if not g.get("driver")),
            "passthrough": len(pci.get("gpus") or []) - len(nvidia),
            "nvswitches": pci.get("nvswitches") or 0,
        }
    for key in ("fabric_manager", "imex"):
        if section.get(key) is not None:
            digest[key] = section[key]
    if "infiniband" in section:
        digest["ib"] = [
            {"name": f"{port.get('device')}/{port.get('port')}", "link_layer": port.get("link_layer"),
             "state": port.get("state"), "phys_state": port.get("phys_state"), "rate_gbps": port.get("rate_gbps"),
             "was_active": bool(port.get("was_active")),
             "growth": {name: value for name, value in (port.get("recent") or {}).items()
                        if name in IB_COUNTERS and value}}
            for port in section.get("infiniband") or []
        ]
        digest["window_s"] = section.get("window_s")
    digest["attention"] = _attention(gpus, digest, digest["nvml_bus_ids"])
    # Which GPU settings any GPU reported (NotSupported everywhere: the rule cannot tell).
    digest["reported"] = sorted(key for key in ("persistence", "ecc", "mig", "gsp")
                                if any(gpu[key] is not None for gpu in gpus))
    return digest
