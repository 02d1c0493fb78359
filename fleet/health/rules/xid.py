"""Step 4 — Xid errors, classified by the Xid policy table, and the escalation rules operators use.

* `xid`: one finding per (GPU, Xid code) seen in the window and not followed by a reboot; severity, layer and
  first action come from the policy table, whose version is recorded on the finding.
* `xid_escalation`: the same reboot-fixable Xid on one GPU in more boots than the reboot allowance (it came
  back after N reboots), or ≥ N fatal Xids on one GPU within the fatal window → hardware.
"""

import re
from bisect import bisect_right
from datetime import timedelta

from fleet.core.i18n import Join, Msg
from fleet.inventory.choices import Layer
from fleet.telemetry.choices import EventKind
from fleet_agent.xid import FATAL_XID_SUPPORT_THRESHOLD, REBOOTS_BEFORE_HARDWARE, xid_decode

from ..choices import REBOOT_FIXABLE_ACTIONS, Severity, TriageStep, XidAction
from ..xid_seed import xid_unknown_policy
from .base import ECC_COUNTER_RULES, HUNG_ON_BROKEN_GPU, Explains, Observation, Param, node_rule

# Xids that are the driver's reading of an ECC fault the counter rules also see: the Xid says whether it was
# contained, so it is the more specific finding.
ECC_XIDS = frozenset({48, 63, 64, 92, 94, 95, 140})
EXPLAINS_ECC = Explains(ECC_COUNTER_RULES)
# The containment Xids (94 contained, 95 uncontained) classify the error whose repair Xid 63 records (and that
# 48 reports on older boards): they are the more specific finding of the same fault on that GPU.
CONTAINMENT_XIDS = frozenset({94, 95})
EXPLAINS_REPAIR_XIDS = Explains(("xid",), subjects=(":xid:63", ":xid:48"))

ACTION_PHRASES = {
    XidAction.RESTART_APP: Msg("restart the application"),
    XidAction.RESET_GPU: Msg("reset the GPU (nvidia-smi -r) or reboot the machine"),
    XidAction.REBOOT: Msg("reboot the machine"),
    XidAction.HARDWARE: Msg("take the GPU out of service for hardware inspection"),
    XidAction.WATCH: Msg("keep watching the GPU; act if it repeats"),
    XidAction.IGNORE: Msg("nothing on its own; act on the earlier Xid"),
    XidAction.FOLLOW_REFERENCED: Msg("follow the recovery action the log line states"),
}


def action_phrase(action: str) -> Msg:
    """The policy action in words (an unknown action as itself)."""
    return ACTION_PHRASES.get(action) or Msg.known(action)


def unknown_policy(code: int) -> dict:
    return {**xid_unknown_policy(code), "known": False}


def policy_for(ctx, code: int) -> dict:
    return ctx.xid_policies.get(code) or unknown_policy(code)


_REPEATED = re.compile(r"repeated([^→]*)→\s*(.+)")


def repeated_action(policy: dict) -> str | None:
    """What the policy says to do once the Xid repeats ("repeated … → run diagnostics"), None if it says nothing."""
    match = _REPEATED.search(policy.get("escalation") or "")
    return match.group(2).strip() if match else None


def policy_remedy(policy: dict) -> Msg:
    """The first action in words, then what the policy says to do if it repeats. The policy's texts are the seeded
    catalogue's (translated where the catalogue has them) or an operator's (shown as typed)."""
    action = action_phrase(policy["action"])
    escalation = (policy.get("escalation") or "").strip()
    match = _REPEATED.search(escalation)
    if match:
        scope = match.group(1).rstrip()
        return Msg("{action}; if it repeats{scope}: {then}", action=action,
                   scope=Msg.known(scope) if scope.strip() else "", then=Msg.known(match.group(2).strip()))
    return Msg.known(escalation) if escalation else action


_SEVERITY_RANK = {"info": 0, "warning": 1, "critical": 2}


def _gpu_label(identity, subject: str) -> str | Msg:
    if identity is not None:
        return f"GPU {identity.index}"
    if subject.startswith("pci:"):
        return Msg("GPU at {bus}", bus=subject[4:])
    return Msg("an unidentified GPU")


def _xid(node, params, ctx):
    if not node.events:
        return []
    start = ctx.now - timedelta(seconds=params["window_s"])
    groups: dict[str, dict] = {}
    for event in node.events_of(EventKind.XID):
        if event.code is None or event.at < start:
            continue
        policy = policy_for(ctx, event.code)
        decoded = xid_decode(event.code, event.message or "")
        if decoded is not None:  # the line says more than its code: an NVLink5 sub-code's fatality, Xid 154's action
            policy = {**policy, "severity": decoded["severity"], "action": decoded["action"],
                      "decoded": decoded["detail"]}
        if policy["action"] == XidAction.IGNORE:
            continue
        gpu_key, identity = node.gpu_ref(event.gpu_id, event.pci_bus_id)
        subject = f"{gpu_key}:xid:{event.code}" if gpu_key != "node" else f"xid:{event.code}"
        group = groups.setdefault(subject, {"events": [], "identity": identity, "gpu_key": gpu_key,
                                            "policy": policy})
        if _SEVERITY_RANK[policy["severity"]] > _SEVERITY_RANK[group["policy"]["severity"]]:
            group["policy"] = policy  # one fatal line among non-fatal ones of the same code decides
        group["events"].append(event)
    found = []
    for subject, group in groups.items():
        events = sorted(group["events"], key=lambda e: e.at)
        first, last = events[0], events[-1]
        reboot = node.last_reboot_before(ctx.now)
        if reboot is not None and reboot > last.at:
            continue  # the machine rebooted since: the first action was taken and the Xid has not come back
        policy, identity = group["policy"], group["identity"]
        action = policy["action"]
        label = _gpu_label(identity, group["gpu_key"])
        count = len(events)
        severity, layer, remedy = policy["severity"], policy["layer"], policy_remedy(policy)
        step = Msg("first action: {action}", action=action_phrase(action))
        escalated_to = repeated_action(policy)
        # Reboot-fixable Xids escalate across reboots (`xid_escalation`); the others on their count in the window.
        escalated = (escalated_to is not None and action not in REBOOT_FIXABLE_ACTIONS
                     and count >= params["repeat_count"] and group["gpu_key"] != "node")
        if escalated:
            step = Msg("repeated on one GPU, escalated: {action}", action=Msg.known(escalated_to))
            remedy = Msg.known(escalated_to)
            severity = Severity.CRITICAL
            if layer == Layer.APPLICATION and _points_at_gpu(escalated_to):
                layer = Layer.HARDWARE  # the same code again and again on one GPU: suspect the GPU
        explains = [HUNG_ON_BROKEN_GPU] if severity == Severity.CRITICAL else []
        if last.code in ECC_XIDS:
            explains.append(EXPLAINS_ECC)
        if last.code in CONTAINMENT_XIDS:
            explains.append(EXPLAINS_REPAIR_XIDS)
        found.append(Observation(
            summary=Msg("Xid {code} on {gpu}: {meaning} ({count}× since {since} UTC) — {step}", code=last.code,
                        gpu=label, meaning=Msg.known(str(policy["meaning"])[:200]), count=count,
                        since=f"{first.at:%H:%M:%S}", step=step),
            subject=subject, gpu_id=identity.id if identity else None, since=first.at,
            severity=severity, layer=layer, remedy=remedy, escalated=escalated, explains=tuple(explains),
            xid_policy_version=ctx.xid_version,
            log_lines=[e.log_line() for e in events[-10:]],
            values={"code": last.code, "meaning": policy["meaning"], "action": action, "count": count,
                    "first_at": first.at.isoformat(), "last_at": last.at.isoformat(),
                    "gpu_index": identity.index if identity else None,
                    "gpu_uuid": identity.uuid if identity else None,
                    "pci_bus_id": (identity.pci_bus_id if identity else last.pci_bus_id) or None,
                    "policy": {k: policy.get(k) for k in ("code", "meaning", "severity", "action", "layer",
                                                          "escalation")},
                    "policy_known": policy.get("known", True), "xid_policy_version": ctx.xid_version,
                    "decoded": policy.get("decoded", ""),
                    "escalated": escalated, "repeat_count": params["repeat_count"]}))
    return found


def _points_at_gpu(action: str) -> bool:
    text = action.lower()
    return any(word in text for word in ("diagnostic", "hardware", "support", "rma"))


def _xid_escalation(node, params, ctx):
    if not node.xid_history:
        return []
    now = ctx.now
    fatal_start = now - timedelta(seconds=params["fatal_window_s"])
    recurrence_start = now - timedelta(seconds=params["recurrence_window_s"])
    reboots = sorted(node.reboots)
    by_gpu: dict[str, dict] = {}
    for occurrence in node.xid_history:
        gpu_key, identity = node.gpu_ref(occurrence.gpu_id, occurrence.pci_bus_id)
        entry = by_gpu.setdefault(gpu_key, {"identity": identity, "fatal": [], "boots": {}})
        policy = policy_for(ctx, occurrence.code)
        if policy["severity"] == Severity.CRITICAL and occurrence.at >= fatal_start:
            entry["fatal"].append(occurrence)
        if policy["action"] in REBOOT_FIXABLE_ACTIONS and occurrence.at >= recurrence_start:
            entry["boots"].setdefault(occurrence.code, set()).add(bisect_right(reboots, occurrence.at))
    found = []
    for gpu_key, entry in by_gpu.items():
        reasons, values = [], {}
        if len(entry["fatal"]) >= params["fatal_count"]:
            codes = sorted({o.code for o in entry["fatal"]})
            reasons.append(Msg("{count} fatal Xids ({codes}) within {hours:g} h", count=len(entry["fatal"]),
                               codes=", ".join(map(str, codes)), hours=params["fatal_window_s"] / 3600))
            values["fatal_count"] = len(entry["fatal"])
            values["fatal_codes"] = codes
        for code, boots in sorted(entry["boots"].items()):
            if len(boots) > params["reboots_before_hardware"]:
                reasons.append(Msg("Xid {code} came back after {reboots} reboots", code=code,
                                   reboots=len(boots) - 1))
                values.setdefault("recurring", []).append({"code": code, "boots_with_xid": len(boots)})
        if not reasons:
            continue
        identity = entry["identity"]
        values.update(gpu_index=identity.index if identity else None, gpu_uuid=identity.uuid if identity else None,
                      reboots=[r.isoformat() for r in reboots if r >= recurrence_start],
                      xid_policy_version=ctx.xid_version)
        found.append(Observation(
            summary=Msg("{gpu}: {reasons} — escalated: hardware, RMA / replace the GPU",
                        gpu=_gpu_label(identity, gpu_key), reasons=Join(reasons)),
            subject=gpu_key, gpu_id=identity.id if identity else None, values=values, escalated=True,
            remedy=Msg("hardware: RMA / replace the GPU (take it out of service; reboots no longer fix it)"),
            xid_policy_version=ctx.xid_version))
    return found


RULES = [
    node_rule(
        slug="xid", title="Xid error", step=TriageStep.PLATFORM_HARDWARE, layer=Layer.HARDWARE,
        severity=Severity.CRITICAL, duration_s=0, clear_hold_s=300, check=_xid,
        params=(Param("window_s", "integer", 3600, "How long an Xid keeps its finding open unless the machine "
                      "reboots", minimum=60, maximum=7 * 86400),
                Param("repeat_count", "integer", 3, "Occurrences on one GPU within the window after which an Xid "
                      "that is not fixed by a reset or reboot (application Xids) takes its 'repeated' action",
                      minimum=2, maximum=1000)),
        description="An Xid in the kernel log, classified by the Xid policy table (severity, layer, first action).",
        remedy="follow the Xid policy's first action"),
    node_rule(
        slug="xid_escalation", title="Xid escalation to hardware", step=TriageStep.PLATFORM_HARDWARE,
        layer=Layer.HARDWARE, severity=Severity.CRITICAL, duration_s=0, clear_hold_s=3600, check=_xid_escalation,
        explains=(Explains(("xid",)), HUNG_ON_BROKEN_GPU),
        params=(Param("reboots_before_hardware", "integer", REBOOTS_BEFORE_HARDWARE,
                      "Reboots a reboot-fixable Xid may survive", minimum=1, maximum=10),
                Param("recurrence_window_s", "integer", 7 * 86400, "How far back recurring Xids are counted",
                      minimum=3600, maximum=30 * 86400),
                Param("fatal_count", "integer", FATAL_XID_SUPPORT_THRESHOLD[0], "Fatal Xids on one GPU that escalate",
                      minimum=2, maximum=100),
                Param("fatal_window_s", "integer", FATAL_XID_SUPPORT_THRESHOLD[1], "Window for the fatal count",
                      minimum=600, maximum=7 * 86400)),
        description="The same reboot-fixable Xid returned after repeated reboots, or many fatal Xids in a day: "
                    "the GPU needs hardware service.",
        remedy="take the GPU out of service for hardware inspection (RMA, or a replaced instance)"),
]
