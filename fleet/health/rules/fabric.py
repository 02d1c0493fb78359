"""GPU configuration and fabric: the PCI view against NVML, GPU settings (persistence, ECC, MIG, GSP firmware), the
NVSwitch fabric services (fabric manager, IMEX), NVLink links and their error counters, InfiniBand / RoCE ports.

Every check reads the fabric digest that ingestion stores on the node status (`fleet.telemetry.services.fabric`);
an empty digest (an agent older than these checks) is "cannot tell". Rules sit in the usual triage steps:

* step 1 (visibility): a GPU on the PCI bus that NVML does not see is a driver fault (`gpu_missing_from_nvml`);
  one gone from the bus stays `gpu_count_low` (hardware).
* step 2 (software chain, GPU driver layer): fabric manager, IMEX, persistence mode, ECC mode, MIG mode, GSP
  firmware — settings and services of the NVIDIA driver stack, fixed on the node.
* step 4 (platform / hardware, hardware layer): NVLink links down or erring, InfiniBand / RoCE ports down,
  slow or erring. The NIC and its cable are hardware: owned per the boundary like the GPU (the provider in a cloud
  or hosted server, us with the hardware vendor on our own metal).
"""

from functools import lru_cache

from fleet.core.i18n import Join, Msg
from fleet.inventory.choices import Layer

from ..choices import Severity, TriageStep
from .base import Observation, Param, node_rule

# Names that mark consumer and workstation boards; every other NVIDIA GPU the fleet runs is a data-center part
# (NVIDIA's own split: persistence mode and ECC matter on Tesla/data-center GPUs).
_NOT_DATA_CENTER = ("GeForce", "TITAN", "Quadro", "NVIDIA RTX")
_DATA_CENTER_EXCEPTIONS = ("Server Edition",)
IB_ACTIVE, IB_LINK_UP = "ACTIVE", "LinkUp"


@lru_cache(maxsize=256)
def is_data_center(model: str | None) -> bool:
    if not model:
        return False
    return not any(mark in model for mark in _NOT_DATA_CENTER) or any(e in model for e in _DATA_CENTER_EXCEPTIONS)


def _digest(node) -> dict | None:
    if node.silent:  # (also when there is no status)
        return None
    return node.status.get("fabric") or None


def _quiet(digest: dict, *keys: str) -> bool:
    """Ingestion found nothing out of the ordinary for these checks (`attention`): the fast path for the
    healthy majority of a fleet. Baseline pins are not covered; rules with a pin look themselves."""
    attention = digest.get("attention")
    return not attention or not any(key in attention for key in keys)


def _known(digest: dict, field: str) -> bool:
    return field in (digest.get("reported") or ())


def _gpu_values(gpu: dict) -> dict:
    return {"gpu_index": gpu.get("index"), "pci_bus_id": gpu.get("bus")}


def _gpu_observation(node, gpu: dict, summary: Msg, values: dict, **kwargs) -> Observation:
    subject, identity = node.gpu_ref(None, gpu.get("bus"))
    if identity is not None:
        values = {**values, "gpu_uuid": identity.uuid}
    return Observation(summary=summary, subject=subject, gpu_id=identity.id if identity else None,
                       values={**_gpu_values(gpu), **values}, **kwargs)


_ECC_CHANGES = {"enable": Msg("enable"), "disable": Msg("disable")}


def _indices(gpus: list[dict]) -> str:
    return ", ".join(str(g.get("index")) for g in gpus)


# -- step 1: on the bus, not in NVML ----------------------------------------------------------------------------


def _missing_from_nvml(node, params, ctx):
    digest = _digest(node)
    if digest is None or digest.get("pci") is None or not node.nvml_ok:
        return None
    if _quiet(digest, "pci"):
        return []
    pci = digest["pci"]
    seen = set(digest.get("nvml_bus_ids") or [])
    missing = [bus for bus in pci["bus_ids"] if bus not in seen]
    found = []
    for bus in missing:
        unbound = bus in pci["unbound"]
        why = Msg("no driver is bound to it (the nvidia driver failed to probe it)") if unbound else \
            Msg("the driver holds it but could not bring it up")
        found.append(Observation(
            summary=Msg("GPU at {bus} is on the PCI bus but NVML does not see it: {why}", bus=bus, why=why),
            subject=f"pci:{bus}",
            values={"pci_bus_id": bus, "driver_bound": not unbound, "pci_gpu_count": pci["gpus"],
                    "nvml_gpu_count": node.status.get("gpu_count_seen")}))
    return found


# -- step 2: NVIDIA fabric services and GPU settings -----------------------------------------------------------


def _fabric_manager(node, params, ctx):
    digest = _digest(node)
    if digest is None:
        return None
    if _quiet(digest, "fabric_manager", "fabric"):
        return []
    nvswitches = (digest.get("pci") or {}).get("nvswitches") or 0
    gpus = digest.get("gpus") or []
    registering = [g for g in gpus if g.get("fabric")]
    if not nvswitches and not registering:
        return []  # not an NVSwitch system
    manager = digest.get("fabric_manager")
    unregistered = [g for g in registering if g["fabric"] != "completed" or g.get("fabric_status")]
    problems = []
    if manager is not None and not manager.get("installed") and nvswitches:
        problems.append(Msg("the fabric manager (nvidia-fabricmanager) is not installed"))
    elif manager is not None and not manager.get("running"):
        problems.append(Msg("the fabric manager (nv-fabricmanager) is not running"))
    if unregistered:
        states = sorted({g["fabric"] for g in unregistered})
        problems.append(Msg("GPU(s) {gpus} not registered with the NVSwitch fabric (state {states})",
                            gpus=_indices(unregistered), states=", ".join(states)))
    if not problems:
        return []
    where = Msg("{count} NVSwitch(es)", count=nvswitches) if nvswitches else Msg("an NVSwitch fabric")
    return [Observation(
        summary=Msg("NVSwitch system ({where}) but {problems} — CUDA fails with 'system not yet "
                    "initialized' and NVLink peer traffic is unavailable", where=where, problems=Join(problems)),
        values={"nvswitches": nvswitches, "fabric_manager": manager,
                "unregistered_gpus": [{"gpu_index": g.get("index"), "state": g["fabric"],
                                       "status": g.get("fabric_status")} for g in unregistered]})]


def _imex(node, params, ctx):
    digest = _digest(node)
    if digest is None:
        return None
    imex = digest.get("imex")
    if imex is None:
        return None
    if not imex.get("configured") or _quiet(digest, "imex"):
        return []
    problems = []
    if not imex.get("running"):
        problems.append(Msg("the IMEX daemon (nvidia-imex) is not running"))
    if not imex.get("channels"):
        problems.append(Msg("no IMEX channel device (/dev/nvidia-caps-imex-channels/channel*)"))
    if not problems:
        return []
    return [Observation(summary=Msg("IMEX is configured but {problems} — multi-node NVLink jobs cannot share GPU "
                                    "memory", problems=Join(problems, Msg(" and "))), values=dict(imex))]


def _persistence_off(node, params, ctx):
    digest = _digest(node)
    if digest is None or not _known(digest, "persistence"):
        return None
    if _quiet(digest, "persistence"):
        return []
    known = [g for g in digest.get("gpus") or [] if g.get("persistence") is not None and is_data_center(g.get("model"))]
    if not known:
        return None if not digest.get("gpus") else []
    off = [g for g in known if g["persistence"] is False]
    if not off:
        return []
    return [Observation(
        summary=Msg("Persistence mode is off on data-center GPU(s) {gpus}: the driver tears down and "
                    "re-initialises the GPU between jobs (slow starts, lost state)", gpus=_indices(off)),
        values={"gpus": [_gpu_values(g) for g in off], "gpu_count": len(known)})]


def _ecc_mode(node, params, ctx):
    digest = _digest(node)
    if digest is None or not _known(digest, "ecc"):
        return None
    if _quiet(digest, "ecc"):
        return []
    known = [g for g in digest.get("gpus") or [] if g.get("ecc") is not None]
    if not known:
        return None if not digest.get("gpus") else []
    disabled = [g for g in known if not g["ecc"][0] and is_data_center(g.get("model"))]
    pending = [g for g in known if g["ecc"][0] != g["ecc"][1]]
    problems = []
    if disabled:
        problems.append(Msg("ECC is disabled on data-center GPU(s) {gpus}: memory errors go "
                            "undetected and corrupt results silently", gpus=_indices(disabled)))
    if pending:
        changes = sorted({"enable" if g["ecc"][1] else "disable" for g in pending})
        problems.append(Msg("an ECC mode change ({changes}) is pending on GPU(s) {gpus} "
                            "until the GPU is reset or the node rebooted",
                            changes=Join([_ECC_CHANGES[c] for c in changes], "/"), gpus=_indices(pending)))
    if not problems:
        return []
    return [Observation(summary=Join(problems),
                        values={"disabled": [_gpu_values(g) for g in disabled],
                                "pending": [{**_gpu_values(g), "current": g["ecc"][0], "pending": g["ecc"][1]}
                                            for g in pending]})]


def _mig_mode(node, params, ctx):
    digest = _digest(node)
    if digest is None or not _known(digest, "mig"):
        return None
    pin = (node.baseline or {}).get("mig_mode") or ""
    if pin != "enabled" and _quiet(digest, "mig"):
        return []
    known = [g for g in digest.get("gpus") or [] if g.get("mig") is not None]
    expected = {"enabled": True, "disabled": False}.get(pin)
    wrong = [g for g in known if expected is not None and g["mig"][0] != expected]
    pending = [g for g in known if g["mig"][0] != g["mig"][1]]
    problems = []
    if wrong:
        problems.append(Msg("MIG is {state} on GPU(s) {gpus} but the baseline pins it {pin}",
                            state=Msg("disabled") if expected else Msg("enabled"), gpus=_indices(wrong),
                            pin=Msg("enabled") if expected else Msg("disabled")))
    if pending:
        problems.append(Msg("a MIG mode change is pending on GPU(s) {gpus} until the GPU is reset",
                            gpus=_indices(pending)))
    if not problems:
        return []
    return [Observation(summary=Join(problems),
                        values={"baseline_mig_mode": pin or None,
                                "mismatched": [{**_gpu_values(g), "current": g["mig"][0]} for g in wrong],
                                "pending": [{**_gpu_values(g), "current": g["mig"][0], "pending": g["mig"][1]}
                                            for g in pending]})]


def _gsp_drift(node, params, ctx):
    digest = _digest(node)
    if digest is None or not _known(digest, "gsp"):
        return None
    pinned = (node.baseline or {}).get("gsp_firmware_version") or ""
    if not pinned and _quiet(digest, "gsp"):
        return []
    known = [g for g in digest.get("gpus") or [] if g.get("gsp")]
    versions: dict[str, list[dict]] = {}
    for gpu in known:
        versions.setdefault(gpu["gsp"], []).append(gpu)
    if pinned:
        off = [g for g in known if g["gsp"] != pinned]
        if not off:
            return []
        found = Join([Msg("{version} on GPU(s) {gpus}", version=v, gpus=_indices(gs))
                      for v, gs in sorted(versions.items()) if v != pinned], ", ")
        summary = Msg("GSP firmware differs from the baseline {pinned}: {found}", pinned=pinned, found=found)
    elif len(versions) > 1:
        summary = Msg("GSP firmware differs between the GPUs of this node: {found}", found=Join(
            [Msg("{version} on GPU(s) {gpus}", version=v, gpus=_indices(gs)) for v, gs in sorted(versions.items())]))
    else:
        return []
    return [Observation(summary=summary, values={"baseline": pinned or None,
                                                       "versions": {v: [g.get("index") for g in gs]
                                                                    for v, gs in versions.items()}})]


# -- step 4: NVLink ----------------------------------------------------------------------------------------------


def _nvlink_down(node, params, ctx):
    digest = _digest(node)
    if digest is None:
        return None
    if _quiet(digest, "nvlink_down"):
        return []
    found = []
    for gpu in digest.get("gpus") or []:
        links = gpu.get("nvlink_down") or []
        if links:
            found.append(_gpu_observation(
                node, gpu, Msg("GPU {index}: NVLink link(s) {links} inactive while the others are up — peer "
                               "bandwidth lost, NCCL may fall back or hang", index=gpu.get("index"),
                               links=", ".join(map(str, links))),
                {"links_down": links}))
    return found


def _nvlink_errors(node, params, ctx):
    digest = _digest(node)
    if digest is None:
        return None
    if _quiet(digest, "nvlink_errors"):
        return []
    window = digest.get("window_s") or 900
    found = []
    for gpu in digest.get("gpus") or []:
        bad = {}
        for link, growth in (gpu.get("nvlink_growth") or {}).items():
            crc = (growth.get("crc_flit") or 0) + (growth.get("crc_data") or 0)
            reasons = []
            if (growth.get("recovery") or 0) >= params["recovery_errors"]:
                reasons.append(Msg("{count} recovery", count=growth["recovery"]))
            if (growth.get("replay") or 0) >= params["replay_errors"]:
                reasons.append(Msg("{count} replay", count=growth["replay"]))
            if crc >= params["crc_errors"]:
                reasons.append(Msg("{count} CRC", count=crc))
            if reasons:
                bad[link] = (reasons, growth)
        if not bad:
            continue
        recovery = any((growth.get("recovery") or 0) >= params["recovery_errors"] for _, growth in bad.values())
        described = Join([Msg("link {link}: {reasons}", link=link, reasons=Join(reasons, ", "))
                          for link, (reasons, _) in sorted(bad.items())])
        found.append(_gpu_observation(
            node, gpu, Msg("GPU {index}: NVLink errors in the last {minutes:.0f} min ({described})",
                           index=gpu.get("index"), minutes=window / 60, described=described),
            {"links": {link: growth for link, (_, growth) in bad.items()}, "window_s": window},
            severity=Severity.CRITICAL if recovery else None))
    return found


# -- step 4: InfiniBand / RoCE -----------------------------------------------------------------------------------


def _ports(node):
    digest = _digest(node)
    if digest is None or "ib" not in digest:
        return None, None
    return digest, [p for p in digest["ib"] if p.get("link_layer") in ("InfiniBand", "Ethernet", None)]


def _is_up(port) -> bool:
    return port.get("state") == IB_ACTIVE and port.get("phys_state") == IB_LINK_UP


def _ib_port_down(node, params, ctx):
    digest, ports = _ports(node)
    if digest is None:
        return None
    expected = (node.baseline or {}).get("ib_port_count")
    if expected is None and _quiet(digest, "ib"):
        return []
    active = sum(1 for p in ports if _is_up(p))
    short = expected is not None and active < expected
    found = []
    for port in ports:
        if _is_up(port):
            continue
        flapped = (port.get("growth") or {}).get("link_downed")
        if not (short or port.get("was_active") or flapped or port.get("phys_state") == "LinkErrorRecovery"):
            continue  # an unused port (not cabled) is not a fault unless the baseline counts it
        why = Msg("{active} of {expected} expected ports active", active=active, expected=expected) if short \
            else Msg("it was up before")
        found.append(Observation(
            summary=Msg("{port} ({link_layer}) is down: state {state}, physical {phys_state} — {why}",
                        port=port["name"], link_layer=port.get("link_layer") or "RDMA", state=port.get("state"),
                        phys_state=port.get("phys_state"), why=why),
            subject=f"ib:{port['name']}",
            values={"port": port["name"], "state": port.get("state"), "phys_state": port.get("phys_state"),
                    "active_ports": active, "expected_ports": expected, "link_downed_recent": flapped}))
    return found


def _ib_port_degraded(node, params, ctx):
    digest, ports = _ports(node)
    if digest is None:
        return None
    pinned = (node.baseline or {}).get("ib_rate_gbps")
    if not pinned and _quiet(digest, "ib"):
        return []
    window = digest.get("window_s") or 900
    fastest: dict[str | None, float] = {}
    for port in ports:
        if _is_up(port) and port.get("rate_gbps"):
            layer = port.get("link_layer")
            fastest[layer] = max(fastest.get(layer, 0.0), port["rate_gbps"])
    found = []
    for port in ports:
        if not _is_up(port):
            continue  # down ports are ib_port_down's
        expected = pinned or fastest.get(port.get("link_layer"))
        problems = []
        rate = port.get("rate_gbps")
        if rate and expected and rate < expected:
            problems.append(Msg("rate {rate:g} Gb/s of {expected:g} Gb/s", rate=rate, expected=expected))
        growth = port.get("growth") or {}
        for counter, param in (("symbol_error", "symbol_errors"), ("link_error_recovery", "link_recoveries"),
                               ("port_rcv_errors", "receive_errors"), ("link_downed", "link_downs")):
            if (growth.get(counter) or 0) >= params[param]:
                problems.append(f"{growth[counter]} {counter.replace('_', ' ')}")
        if problems:
            found.append(Observation(
                summary=Msg("{port} ({link_layer}) degraded: {problems} (last {minutes:.0f} min)",
                            port=port["name"], link_layer=port.get("link_layer") or "RDMA", problems=Join(problems),
                            minutes=window / 60),
                subject=f"ib:{port['name']}",
                values={"port": port["name"], "rate_gbps": rate, "expected_rate_gbps": expected,
                        "rate_source": "baseline" if pinned else "fastest port", "errors": growth,
                        "window_s": window}))
    return found


RULES = [
    node_rule(
        slug="gpu_missing_from_nvml", title="GPU on the PCI bus but not in NVML", step=TriageStep.VISIBILITY,
        layer=Layer.GPU_DRIVER, severity=Severity.CRITICAL, duration_s=30, clear_hold_s=60,
        check=_missing_from_nvml, needs_nvml=True,
        description="An NVIDIA GPU is on the PCI bus (sysfs) but NVML does not count it: the driver failed to "
                    "bring it up (RmInitAdapter failed, GPU init error). Unlike a GPU gone from the bus "
                    "(gpu_count_low), the hardware is there.",
        remedy="read the kernel log for NVRM errors on that address; reset the GPU or reload the driver, then "
               "reboot; if it stays missing after a reboot, treat it as hardware"),
    node_rule(
        slug="fabric_manager_down", title="NVSwitch fabric manager not running", step=TriageStep.SOFTWARE_CHAIN,
        layer=Layer.GPU_DRIVER, severity=Severity.CRITICAL, duration_s=60, clear_hold_s=60, check=_fabric_manager,
        description="On an NVSwitch system (HGX) the fabric manager must run and register every GPU with the "
                    "fabric; without it CUDA does not start on Hopper and NVLink peer traffic fails.",
        remedy="start nvidia-fabricmanager (systemctl enable --now nvidia-fabricmanager); its version must equal "
               "the driver's exactly — read /var/log/fabricmanager.log"),
    node_rule(
        slug="imex_down", title="IMEX daemon not running", step=TriageStep.SOFTWARE_CHAIN, layer=Layer.GPU_DRIVER,
        severity=Severity.WARNING, duration_s=60, clear_hold_s=60, check=_imex,
        description="IMEX is configured (/etc/nvidia-imex/nodes_config.cfg) but its daemon or channel device is "
                    "missing: multi-node NVLink (NVL72-class) jobs cannot import each other's GPU memory.",
        remedy="start nvidia-imex (systemctl enable --now nvidia-imex) and create the channel device; check "
               "/var/log/nvidia-imex.log"),
    node_rule(
        slug="persistence_mode_off", title="Persistence mode off", step=TriageStep.SOFTWARE_CHAIN,
        layer=Layer.GPU_DRIVER, severity=Severity.WARNING, duration_s=300, clear_hold_s=60, check=_persistence_off,
        description="Data-center GPUs run without persistence mode: the driver unloads between jobs, so each job "
                    "start pays the initialisation and loses settings (clocks, ECC state reads).",
        remedy="enable the nvidia-persistenced service (systemctl enable --now nvidia-persistenced)"),
    node_rule(
        slug="ecc_mode", title="ECC disabled or an ECC mode change pending", step=TriageStep.SOFTWARE_CHAIN,
        layer=Layer.GPU_DRIVER, severity=Severity.WARNING, duration_s=60, clear_hold_s=60, check=_ecc_mode,
        description="ECC is off on a data-center GPU, or a changed ECC mode waits for a GPU reset.",
        remedy="enable ECC (nvidia-smi -e 1) and reset the GPU or reboot the node to apply the pending mode"),
    node_rule(
        slug="mig_mode", title="MIG mode differs from the baseline or is pending", step=TriageStep.SOFTWARE_CHAIN,
        layer=Layer.GPU_DRIVER, severity=Severity.WARNING, duration_s=60, clear_hold_s=60, check=_mig_mode,
        description="A GPU's MIG mode is not the one the baseline pins, or a MIG mode change waits for a reset.",
        remedy="set MIG mode as the baseline says (nvidia-smi -mig 0|1) and reset the GPU (or reboot)"),
    node_rule(
        slug="gsp_firmware_drift", title="GSP firmware version drift", step=TriageStep.SOFTWARE_CHAIN,
        layer=Layer.GPU_DRIVER, severity=Severity.WARNING, duration_s=60, clear_hold_s=60, check=_gsp_drift,
        description="The GPUs' GSP firmware differs from the baseline's pin, or between the GPUs of one node.",
        remedy="reinstall the pinned driver package (the GSP firmware ships with it) and reboot"),
    node_rule(
        slug="nvlink_down", title="NVLink link down", step=TriageStep.PLATFORM_HARDWARE, layer=Layer.HARDWARE,
        severity=Severity.CRITICAL, duration_s=60, clear_hold_s=120, check=_nvlink_down,
        description="An NVLink link of a GPU is inactive while its other links are up.",
        remedy="reset the GPU or reboot to retrain the link; if it stays down, the GPU or baseboard needs service"),
    node_rule(
        slug="nvlink_errors", title="NVLink errors rising", step=TriageStep.PLATFORM_HARDWARE, layer=Layer.HARDWARE,
        severity=Severity.WARNING, duration_s=0, clear_hold_s=300, check=_nvlink_errors,
        params=(Param("crc_errors", "integer", 100, "CRC (flit + data) errors per link in the agent's window",
                      minimum=1),
                Param("replay_errors", "integer", 100, "Replay errors per link in the window", minimum=1),
                Param("recovery_errors", "integer", 1, "Recovery errors per link in the window (critical)",
                      minimum=1)),
        description="NVLink data-link error counters (CRC, replay, recovery) grew over the agent's window.",
        remedy="drain the GPU, reset it, and watch the counters; errors that return point at the GPU or baseboard"),
    node_rule(
        slug="ib_port_down", title="InfiniBand / RoCE port down", step=TriageStep.PLATFORM_HARDWARE,
        layer=Layer.HARDWARE, severity=Severity.CRITICAL, duration_s=60, clear_hold_s=120, check=_ib_port_down,
        description="An RDMA port that was up (or that the baseline counts) is not ACTIVE / LinkUp.",
        remedy="check the cable, transceiver and switch port; reseat or replace them"),
    node_rule(
        slug="ib_port_degraded", title="InfiniBand / RoCE port slow or erring", step=TriageStep.PLATFORM_HARDWARE,
        layer=Layer.HARDWARE, severity=Severity.WARNING, duration_s=300, clear_hold_s=300, check=_ib_port_degraded,
        params=(Param("symbol_errors", "integer", 10, "Symbol errors per port in the agent's window", minimum=1),
                Param("link_recoveries", "integer", 10, "Link error recoveries per port in the window", minimum=1),
                Param("receive_errors", "integer", 10, "Receive errors per port in the window", minimum=1),
                Param("link_downs", "integer", 1, "Link-down events of a port that is up again (flapping)",
                      minimum=1)),
        description="An active RDMA port runs below the expected rate (baseline, else the node's fastest port) or "
                    "its error counters grow.",
        remedy="reseat or replace the cable / transceiver; a port that trained down or keeps erring has a bad "
               "link"),
]
VISIBILITY_RULES = [r for r in RULES if r.step == TriageStep.VISIBILITY]
SOFTWARE_CHAIN_RULES = [r for r in RULES if r.step == TriageStep.SOFTWARE_CHAIN]
PLATFORM_HARDWARE_RULES = [r for r in RULES if r.step == TriageStep.PLATFORM_HARDWARE]
