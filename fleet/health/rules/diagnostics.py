"""Step 4 — active diagnostics: what DCGM's own tests (`dcgmi diag -r 1|2|3`) found on the node's GPUs.

The agent runs the diagnostic when asked (the `dcgm_diag` action, a remediation workflow's `run_diagnostics`
step, or `fleet-agent verify --level N`) and reports each run as one `diag` event: code = level, and in `raw` a
bounded JSON summary with every failed test (category, test name, GPU index / uuid, DCGM's warning text). That
summary is a claim of the node, so it is read defensively: anything malformed is skipped, never trusted.

`dcgm_diag_failed`: one finding per (GPU, test) that failed in a run and has not passed since in a run at the
same or a higher level (level 3 runs everything level 2 runs, and level 2 everything of level 1; a later level-1
pass does not clear a failed level-3 stress test). A reboot does not clear it either: a failed memory or stress
test is the part's, whatever the boot. Hardware, Integration and Stress tests — and Deployment checks about the
part itself (pending page retirement / row remapping, InfoROM) — are the hardware layer; the other Deployment
checks (persistence mode, libraries, permissions, environment) are the node's driver configuration.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta

from fleet.core.i18n import Msg
from fleet.inventory.choices import Layer
from fleet.telemetry.choices import EventKind

from ..choices import Severity, TriageStep
from .base import Observation, Param, node_rule

HARDWARE_CATEGORIES = frozenset({"hardware", "integration", "stress", "performance"})
# Deployment checks that look at the part rather than the node's software.
_PART_CHECK = re.compile(r"page retire|row remap|remapp|inforom|retired pages|ecc", re.IGNORECASE)
_LEVEL_NAMES = {1: Msg("quick (r1)"), 2: Msg("medium (r2)"), 3: Msg("long (r3)")}


def _summary(event) -> dict | None:
    """The run's summary from the event's `raw`, or None when it is not one."""
    try:
        summary = json.loads(event.raw or "")
    except ValueError:
        return None
    if not isinstance(summary, dict) or not isinstance(summary.get("failures", []), list):
        return None
    return summary


def _text(value, limit: int = 300) -> str:
    return str(value)[:limit] if isinstance(value, str | int | float) and not isinstance(value, bool) else ""


def _is_hardware(category: str, test: str, warning: str) -> bool:
    if category.lower() in HARDWARE_CATEGORIES:
        return True
    return bool(_PART_CHECK.search(test) or _PART_CHECK.search(warning))


def _gpu(node, failure: dict):
    index, uuid = failure.get("gpu_index"), failure.get("gpu_uuid")
    if isinstance(uuid, str) and uuid:
        found = next((g for g in node.gpus.values() if g.uuid == uuid), None)
        if found is not None:
            return found
    if isinstance(index, int) and not isinstance(index, bool):
        return next((g for g in node.gpus.values() if g.index == index), None)
    return None


def _dcgm_diag_failed(node, params, ctx):
    runs = [e for e in node.events_of(EventKind.DIAG)
            if e.at >= ctx.now - timedelta(seconds=params["window_s"]) and e.code in (1, 2, 3)]
    if not runs:
        return []
    standing: dict[str, dict] = {}
    for event in sorted(runs, key=lambda e: (e.at, e.id)):
        summary = _summary(event)
        if summary is None or summary.get("outcome") not in ("pass", "fail"):
            continue  # a run without a verdict (dcgmi could not run) neither opens nor clears anything
        level = event.code
        failed_now: dict[str, dict] = {}
        for failure in summary["failures"][:64]:
            if not isinstance(failure, dict):
                continue
            test = _text(failure.get("test"), 80).strip()
            if not test:
                continue
            identity = _gpu(node, failure)
            index = failure.get("gpu_index")
            index = index if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < 4096 else None
            gpu_key = f"gpu:{identity.id}" if identity else (f"gpu-index:{index}" if index is not None else "node")
            subject = f"{gpu_key}:diag:{test.lower()}"
            failed_now[subject] = {"event": event, "level": level, "test": test, "identity": identity,
                                   "index": identity.index if identity else index,
                                   "category": _text(failure.get("category"), 40),
                                   "warning": _text(failure.get("warning")), "since": event.at,
                                   "dcgm_version": _text(summary.get("dcgm_version"), 64)}
        for subject in [s for s, f in standing.items() if f["level"] <= level and s not in failed_now]:
            del standing[subject]  # passed since, at a level that runs that test
        for subject, failure in failed_now.items():
            if subject in standing:
                failure["since"] = standing[subject]["since"]
                failure["level"] = max(failure["level"], standing[subject]["level"])
            standing[subject] = failure
    found = []
    for subject, failure in standing.items():
        hardware = _is_hardware(failure["category"], failure["test"], failure["warning"])
        identity, index = failure["identity"], failure["index"]
        where = f"GPU {index}" if index is not None else Msg("the node")
        level = failure["event"].code
        detail = f": {failure['warning']}" if failure["warning"] else ""
        if hardware:
            remedy = Msg("take {where} out of service: DCGM's {test} test fails on the part; run level 3 to "
                         "confirm if this was level 1 or 2, then RMA / replace the GPU with the diagnostic's JSON "
                         "attached (cloud: ask the provider for a replacement)", where=where, test=failure["test"])
        else:
            remedy = Msg("fix the node configuration DCGM's {test} check names{detail} (e.g. enable "
                         "persistence mode: nvidia-smi -pm 1), then run the diagnostic again", test=failure["test"],
                         detail=detail[:120])
        found.append(Observation(
            summary=Msg("DCGM diagnostic level {level} ({level_name}): test '{test}' failed on {where}{detail}",
                        level=level, level_name=_LEVEL_NAMES.get(level, level), test=failure["test"], where=where,
                        detail=detail[:400]),
            subject=subject, gpu_id=identity.id if identity else None, since=failure["since"],
            severity=Severity.CRITICAL if hardware else Severity.WARNING,
            layer=Layer.HARDWARE if hardware else Layer.GPU_DRIVER,
            remedy=remedy,
            log_lines=[failure["event"].log_line()],
            values={"test": failure["test"], "category": failure["category"], "level": level,
                    "highest_level_failed": failure["level"], "warning": failure["warning"],
                    "gpu_index": index, "gpu_uuid": identity.uuid if identity else None,
                    "pci_bus_id": identity.pci_bus_id if identity else None, "hardware": hardware,
                    "dcgm_version": failure["dcgm_version"] or None, "run_at": failure["event"].at.isoformat()}))
    return found


RULES = [
    node_rule(
        slug="dcgm_diag_failed", title="DCGM diagnostic test failed", step=TriageStep.PLATFORM_HARDWARE,
        layer=Layer.HARDWARE, severity=Severity.CRITICAL, duration_s=0, clear_hold_s=0, check=_dcgm_diag_failed,
        params=(Param("window_s", "integer", 30 * 86400, "How long a failed test stands without a later run "
                      "at its level", minimum=3600, maximum=180 * 86400),),
        description="A test of DCGM's active diagnostic (dcgmi diag -r 1|2|3) failed on a GPU and has not passed "
                    "since at the same or a higher level: Hardware / Integration / Stress tests on the hardware "
                    "layer, Deployment checks of the node's configuration on the driver layer.",
        remedy="take the GPU out of service and RMA / replace it (hardware tests); fix the named configuration "
               "(deployment checks)"),
]
