"""Step 4 — platform / hardware: cloud-side (steal, preemption, silent spot) and hardware-side (ECC, remap, PCIe,
throttling, SXid). Xid rules live in `xid.py`."""

from django.db.models import F, Q
from django.utils.dateparse import parse_datetime

from fleet.core.i18n import Join, Msg
from fleet.inventory.choices import Layer, NodeState
from fleet.telemetry.choices import EventKind
from fleet_agent.protocol import (
    ADVISORY_NOTICE_KINDS,
    CLOCK_EVENT_REASONS,
    CLOCK_REASON_HW_POWER_BRAKE_SLOWDOWN,
    CLOCK_REASON_HW_SLOWDOWN,
    CLOCK_REASON_HW_THERMAL_SLOWDOWN,
    CLOCK_REASON_SW_THERMAL_SLOWDOWN,
    RECLAIM_NOTICE_KINDS,
)

from ..choices import Severity, TriageStep
from .base import (
    DISRUPTION_SYMPTOMS,
    HUNG_ON_BROKEN_GPU,
    Explains,
    Observation,
    Param,
    gpu_label,
    gpu_rule,
    node_rule,
)
from .xid import action_phrase, policy_for

# NVIDIA's containment Xids (A100 and later): 94 = the error was contained to the processes that touched the
# memory (restart them, the GPU stays usable); 95 = uncontained (reset the GPU). 48 (DBE) and 140 (unrecovered
# ECC) are uncontained readings as well.
XID_CONTAINED = 94
XID_UNCONTAINED = frozenset({95, 48, 140})

# Throttling the rules judge: thermal, and power trouble beyond the normal software power cap (a brake or a
# hardware slowdown point at the PSU or the power feed).
THERMAL_MASK = CLOCK_REASON_SW_THERMAL_SLOWDOWN | CLOCK_REASON_HW_THERMAL_SLOWDOWN
POWER_MASK = CLOCK_REASON_HW_POWER_BRAKE_SLOWDOWN | CLOCK_REASON_HW_SLOWDOWN
_REASON_NAMES = {bit: name for bit, name in CLOCK_EVENT_REASONS if bit & (THERMAL_MASK | POWER_MASK)}


def _cpu_steal(node, params, ctx):
    if not node.is_cloud:
        return []
    status = node.status
    if status is None or status.get("cpu_steal_pct") is None:
        return None
    steal = status["cpu_steal_pct"]
    if steal <= params["threshold_pct"]:
        return []
    return [Observation(
        summary=Msg("CPU steal {steal:.1f} % (threshold {threshold_pct:g} %) — the hypervisor gives this "
                    "VM's CPU time to other tenants (noisy neighbour)", steal=steal,
                    threshold_pct=params["threshold_pct"]),
        values={"cpu_steal_pct": steal, "threshold_pct": params["threshold_pct"]})]


def _ecc_candidates(params) -> Q:
    return Q(ecc_volatile_uncorrected__gt=params["max_errors"])


def ecc_containment(node, gpu_id: int) -> str | None:
    """"contained" / "uncontained" from the ECC Xids this GPU logged in the event window, None without any.
    One uncontained error makes the GPU's state uncontained whatever else was contained."""
    codes = set()
    for event in node.events_of(EventKind.XID) if node.events else ():
        if event.code == XID_CONTAINED or event.code in XID_UNCONTAINED:
            key, _ = node.gpu_ref(event.gpu_id, event.pci_bus_id)
            if key == f"gpu:{gpu_id}":
                codes.add(event.code)
    if codes & XID_UNCONTAINED:
        return "uncontained"
    return "contained" if XID_CONTAINED in codes else None


def _ecc_uncorrectable(row, node, params, ctx):
    errors = row.get("ecc_volatile_uncorrected")
    if errors is None or errors <= params["max_errors"]:
        return None
    values = {"ecc_volatile_uncorrected": errors, "ecc_aggregate_uncorrected": row.get("ecc_aggregate_uncorrected"),
              "retired_pages_count": row.get("retired_pages_count"),
              "remapped_rows_uncorrectable": row.get("remapped_rows_uncorrectable")}
    containment = ecc_containment(node, row["gpu_id"])
    values["containment"] = containment
    if containment == "contained":
        # Agree with the Xid policy of a contained error: its severity, layer and first action, not "reset".
        policy = policy_for(ctx, XID_CONTAINED)
        action = action_phrase(policy["action"])
        return Observation(
            summary=Msg("{gpu}: {errors} uncorrectable ECC error(s) since the last reset, contained "
                        "(Xid {xid}) — {action}; the GPU stays usable", gpu=gpu_label(row), errors=errors,
                        xid=XID_CONTAINED, action=action),
            severity=policy["severity"], layer=policy["layer"],
            remedy=Msg("{action}; the GPU stays usable", action=action),
            xid_policy_version=ctx.xid_version, values=values)
    return Observation(
        summary=Msg("{gpu}: {errors} uncorrectable ECC error(s) since the last reset (uncontained)",
                    gpu=gpu_label(row), errors=errors) if containment else
        Msg("{gpu}: {errors} uncorrectable ECC error(s) since the last reset", gpu=gpu_label(row), errors=errors),
        values=values)


def _pending_candidates(params) -> Q:
    return Q(retired_pages_pending=True) | Q(remapped_rows_pending=True)


def _pending_retirement(row, node, params):
    pages, rows = row.get("retired_pages_pending"), row.get("remapped_rows_pending")
    if not pages and not rows:
        return None
    what = Join([m for m in (Msg("page retirement") if pages else None, Msg("row remapping") if rows else None)
                 if m is not None], Msg(" and "))
    contained = ecc_containment(node, row["gpu_id"]) == "contained"
    return Observation(
        summary=Msg("{gpu}: {what} pending — takes effect after a GPU reset{note}", gpu=gpu_label(row), what=what,
                    note=Msg(" (after a contained error: no urgency)") if contained else ""),
        values={"retired_pages_pending": pages, "retired_pages_count": row.get("retired_pages_count"),
                "remapped_rows_pending": rows, "remapped_rows_uncorrectable": row.get("remapped_rows_uncorrectable")})


def _remap_failure(row, node, params):
    if not row.get("remapped_rows_failure"):
        return None
    return Observation(
        summary=Msg("{gpu}: row remapping failed — the GPU memory cannot repair itself any more",
                    gpu=gpu_label(row)),
        values={"remapped_rows_failure": True, "remapped_rows_uncorrectable": row.get("remapped_rows_uncorrectable"),
                "remapped_rows_correctable": row.get("remapped_rows_correctable")})


def _pcie_candidates(params) -> Q:
    return Q(pcie_width_current__lt=F("pcie_width_max")) | Q(
        pcie_gen_current__lt=F("pcie_gen_max"), utilization_gpu_pct__gte=params["min_utilization_pct"])


def _pcie_degraded(row, node, params):
    gen, gen_max = row.get("pcie_gen_current"), row.get("pcie_gen_max")
    width, width_max = row.get("pcie_width_current"), row.get("pcie_width_max")
    util = row.get("utilization_gpu_pct")
    problems = []
    if width is not None and width_max is not None and width < width_max:
        problems.append(Msg("width x{width} of x{width_max}", width=width, width_max=width_max))
    # GPUs drop the link generation when idle to save power; only a busy GPU's generation counts.
    if gen is not None and gen_max is not None and gen < gen_max and util is not None \
            and util >= params["min_utilization_pct"]:
        problems.append(Msg("Gen{gen} of Gen{gen_max} at {util:.0f} % utilisation", gen=gen, gen_max=gen_max,
                            util=util))
    if not problems:
        return None
    return Observation(
        summary=Msg("{gpu}: PCIe link degraded ({problems})", gpu=gpu_label(row), problems=Join(problems)),
        values={"pcie_gen_current": gen, "pcie_gen_max": gen_max, "pcie_width_current": width,
                "pcie_width_max": width_max, "utilization_gpu_pct": util})


def _reasons(mask: int | None, names: list | None, wanted: int) -> list[str]:
    if mask is not None:
        return [name for bit, name in _REASON_NAMES.items() if mask & bit & wanted]
    wanted_names = {name for bit, name in _REASON_NAMES.items() if bit & wanted}
    return [name for name in names or [] if name in wanted_names]


_THROTTLE_WORDS = {"thermal": Msg("thermal"), "power": Msg("power")}


def _throttle_check(wanted: int, what: str):
    def check(row, node, params):
        reasons = _reasons(row.get("clock_event_reasons_mask"), row.get("clock_event_reasons"), wanted)
        if not reasons:
            return None
        return Observation(
            summary=Msg("{gpu}: {what} throttling ({reasons}) at {temperature} °C, {power} W of {limit} W, SM "
                        "clock {clock} MHz", gpu=gpu_label(row), what=_THROTTLE_WORDS.get(what, what),
                        reasons=", ".join(reasons), temperature=str(row.get("temperature_c")),
                        power=str(row.get("power_draw_w")), limit=str(row.get("power_limit_w")),
                        clock=str(row.get("sm_clock_mhz"))),
            values={"reasons": reasons, "clock_event_reasons_mask": row.get("clock_event_reasons_mask"),
                    "temperature_c": row.get("temperature_c"), "power_draw_w": row.get("power_draw_w"),
                    "power_limit_w": row.get("power_limit_w"), "sm_clock_mhz": row.get("sm_clock_mhz")})

    check.__name__ = f"_{what}_throttling"
    return check


def _mask_candidates(annotation: str):
    def candidates(params) -> Q:
        return Q(**{f"{annotation}__gt": 0})

    return candidates


def _sxid_fatal(node, params, ctx):
    if not node.events:
        return []
    start = ctx.now.timestamp() - params["window_s"]
    by_code: dict[int | None, Observation] = {}
    for event in node.events_of(EventKind.SXID):
        if event.at.timestamp() < start or not _is_fatal_sxid(event):
            continue
        observation = by_code.get(event.code)
        if observation is None:
            observation = by_code[event.code] = Observation(
                summary=Msg("Fatal NVSwitch SXid {code}: {message}", code=event.code,
                            message=(event.message or event.raw or "")[:450]),
                subject=f"sxid:{event.code}", since=event.at,
                values={"code": event.code, "count": 0, "last_at": None, "pci_bus_id": event.pci_bus_id or None})
        observation.values["count"] += 1
        observation.since = min(observation.since, event.at)
        if observation.values["last_at"] is None or event.at.isoformat() > observation.values["last_at"]:
            observation.values["last_at"] = event.at.isoformat()
        if len(observation.log_lines) < 10:
            observation.log_lines.append(event.log_line())
    return list(by_code.values())


def _is_fatal_sxid(event) -> bool:
    text = f"{event.message} {event.raw}".lower()
    if "non-fatal" in text or "nonfatal" in text:
        return False
    return event.severity == "critical" or "fatal" in text or bool((event.detail or {}).get("fatal"))


def _notice_current(reported_at, deadline, now, window_s: int) -> bool:
    """A notice counts for `window_s` after the report or event that carried it, and at least until its deadline:
    once both have passed the instance is gone (or the cloud withdrew the notice) and the silent-spot rule
    takes over."""
    if reported_at is not None and (now - reported_at).total_seconds() <= window_s:
        return True
    return deadline is not None and now <= deadline


def _hot_rows(node) -> list[dict]:
    return [row for row in node.candidate_gpus
            if _reasons(row.get("clock_event_reasons_mask"), row.get("clock_event_reasons"), THERMAL_MASK)]


_SITE_MEMO = "room_thermal_sites"


def _prepare_room_thermal(facts, params, ctx, scoped: bool) -> None:
    """Per site: the reporting nodes and those with a GPU throttling for heat. A cycle scoped to some nodes sees
    only part of a site, so it records nothing and the site view is 'cannot tell' there."""
    if scoped:
        ctx.memo[_SITE_MEMO] = None
        return
    sites: dict[int, dict] = {}
    for node in facts.values():
        if node.site_id is None or node.silent or not node.nvml_ok or node.state == "retired":
            continue
        site = sites.setdefault(node.site_id, {"nodes": 0, "hot": []})
        site["nodes"] += 1
        if _hot_rows(node):
            site["hot"].append(node.hostname)
    ctx.memo[_SITE_MEMO] = sites


def _room_thermal(node, params, ctx):
    """Most GPUs of the node, or GPUs on most nodes of its site, throttling for heat at once: the cooling of the
    room, the rack or the server — not one part."""
    total = sum(kind[3] for kind in node.gpu_kinds)
    if not total:
        return None
    hot = _hot_rows(node)
    if not hot:  # neither this node (min_gpus is at least 2) nor its site's share can make it true
        return []
    share = 100.0 * len(hot) / total
    temperatures = sorted(t for t in (row.get("temperature_c") for row in hot) if t is not None)
    span = Msg(" at {low}–{high} °C", low=temperatures[0], high=temperatures[-1]) if temperatures else ""
    values = {"throttling_gpus": len(hot), "gpu_count": total, "share_pct": round(share, 1),
              "gpu_indices": sorted(row.get("gpu_index") for row in hot if row.get("gpu_index") is not None),
              "temperatures_c": temperatures, "min_share_pct": params["min_share_pct"]}
    if len(hot) >= params["min_gpus"] and share >= params["min_share_pct"]:
        return [Observation(
            summary=Msg("{hot} of {total} GPUs throttle for heat at once{span} — the cooling (room, rack or "
                        "server airflow), not one part", hot=len(hot), total=total, span=span), values=values)]
    if not hot or node.site_id is None:
        return []
    sites = ctx.memo.get(_SITE_MEMO)
    if sites is None:
        return None  # a cycle over some nodes only cannot judge the site
    site = sites.get(node.site_id) or {"nodes": 0, "hot": []}
    site_share = 100.0 * len(site["hot"]) / site["nodes"] if site["nodes"] else 0.0
    if len(site["hot"]) < params["min_site_nodes"] or site_share < params["min_site_share_pct"]:
        return []
    where = node.site_name or f"site {node.site_id}"
    return [Observation(
        summary=Msg("{hot_nodes} of {nodes} nodes of {site} throttle for heat at once (this one: {hot} of {total} "
                    "GPUs{span}) — the site's cooling, not one part", hot_nodes=len(site["hot"]),
                    nodes=site["nodes"], site=where, hot=len(hot), total=total, span=span),
        values={**values, "site": where, "site_nodes": site["nodes"], "site_hot_nodes": len(site["hot"]),
                "site_hot_hostnames": sorted(site["hot"])[:20], "min_site_share_pct": params["min_site_share_pct"]})]


def _planned_maintenance(node, params, ctx):
    status = node.status
    if status is None:
        return None
    if status.get("notice_kind") not in params["notice_kinds"]:
        return []
    reported_at, deadline = status.get("notice_reported_at"), status.get("notice_deadline")
    if not _notice_current(reported_at, deadline, ctx.now, params["window_s"]):
        return []
    when = Msg("scheduled for {at} UTC", at=f"{deadline:%Y-%m-%d %H:%M:%S}") if deadline else Msg("no time given")
    return [Observation(
        summary=Msg("The provider announced {kind} of this node ({when}) — GPUs or the node may go away and come "
                    "back", kind=status["notice_kind"], when=when),
        since=reported_at, remedy=Msg("checkpoint and drain the node before the event; no hardware ticket — the "
                                      "node returns when the maintenance ends"),
        values={"kind": status["notice_kind"], "deadline": deadline.isoformat() if deadline else None})]


_REQUESTED_WORDS = {"reboot_requested": Msg("A reboot"), "driver_change": Msg("A driver / stack change")}


def _requested_disruption(node, params, ctx):
    """A reboot or driver change we asked for (remediation's step started) and the node has not come back from."""
    if not node.requested_changes:
        return []
    start = ctx.now.timestamp() - params["window_s"]
    current = [(at, field, summary) for at, field, summary in node.requested_changes if at.timestamp() >= start]
    if not current:
        return []
    at, field, summary = max(current)
    if field == "reboot_requested" and any(boot > at for boot in node.boots):
        return []  # the node came back with a new boot id: what is still wrong now is not the reboot
    status = node.status or {}
    back = status.get("received_at") is not None and status["received_at"] > at and not status.get("silent") \
        and field == "driver_change" and status.get("nvml_status") == "ok"
    if back:
        return []  # the driver answers again after the change
    return [Observation(
        summary=Msg("{change} was started on purpose at {at} UTC ({summary}) — the node is expected to go down "
                    "and come back", change=_REQUESTED_WORDS.get(field) or field.capitalize(), at=f"{at:%H:%M:%S}",
                    summary=summary),
        since=at, remedy=Msg("wait for the node to come back, then verify it; lost GPUs or silence until then are "
                             "part of the change"),
        values={"requested_at": at.isoformat(), "change": field, "summary": summary})]


def _preemption_notice(node, params, ctx):
    status = node.status
    if status is None:
        return None
    if node.state == NodeState.PREEMPTED:
        # Reclaimed: the preemption record (billing) is the record now, not a "deadline passed" finding.
        return []
    now, window = ctx.now, params["window_s"]
    notices = []
    if status.get("notice_kind") in RECLAIM_NOTICE_KINDS:
        reported_at, deadline = status.get("notice_reported_at"), status.get("notice_deadline")
        if _notice_current(reported_at, deadline, now, window):
            notices.append({"kind": status["notice_kind"], "deadline": deadline, "at": reported_at,
                            "source": "cloud metadata (latest report)"})
    # An event newer than the latest report counts on its own (the report has not caught up); older events
    # are superseded by the report, which no longer carries the notice if the cloud withdrew it.
    latest = status.get("notice_reported_at") or status.get("received_at")
    events = [e for e in node.events_of(EventKind.PREEMPTION_NOTICE) if latest is None or e.at > latest] \
        if node.events else []
    for event in events:
        notice = (event.detail or {}).get("notice") or {}
        if notice.get("kind") and notice["kind"] not in RECLAIM_NOTICE_KINDS:
            continue
        deadline = _parse_time(notice.get("deadline") or (event.detail or {}).get("deadline"))
        if _notice_current(event.at, deadline, now, window):
            notices.append({"kind": notice.get("kind") or "preempt", "deadline": deadline, "at": event.at,
                            "source": notice.get("source") or "event"})
    if not notices:
        return []
    with_deadline = [n for n in notices if n["deadline"] is not None]
    notice = min(with_deadline, key=lambda n: n["deadline"]) if with_deadline else notices[0]
    deadline = notice["deadline"]
    time_left = (deadline - now).total_seconds() if deadline else None
    if time_left is None:
        when = Msg("no deadline given")
    elif time_left >= 0:
        when = Msg("{seconds:.0f} s left (reclaim at {at} UTC)", seconds=time_left, at=f"{deadline:%H:%M:%S}")
    else:
        when = Msg("deadline passed {seconds:.0f} s ago", seconds=-time_left)
    since = min((n["at"] for n in notices if n["at"] is not None), default=None)
    log_events = [e for e in node.events_of(EventKind.PREEMPTION_NOTICE)] if node.events else []
    return [Observation(
        summary=Msg("The cloud announced {kind} of this instance: {when}", kind=notice["kind"], when=when),
        since=since, log_lines=[e.log_line() for e in log_events[-5:]],
        remedy=Msg("checkpoint now, drain the node and let the pool replace it"),
        values={"kind": notice["kind"], "deadline": deadline.isoformat() if deadline else None,
                "time_left_s": round(time_left) if time_left is not None else None, "source": notice["source"]})]


def _parse_time(value):
    if value is None or hasattr(value, "tzinfo"):
        return value
    try:
        return parse_datetime(str(value))
    except ValueError:
        return None


def _silent_spot(node, params, ctx):
    if not node.is_spot or node.status is None:
        return None if node.status is None else []
    status = node.status
    if not status.get("silent"):
        return []
    since = status.get("silent_since") or status.get("received_at")
    confirmations = []
    if status.get("notice_kind") and status["notice_kind"] not in ADVISORY_NOTICE_KINDS:
        confirmations.append(Msg("notice {kind} in the last report", kind=status["notice_kind"]))
    start = (since or ctx.now).timestamp() - params["notice_lookback_s"]
    notice_events = [e for e in node.events_of(EventKind.PREEMPTION_NOTICE) if e.at.timestamp() >= start]
    if notice_events:
        confirmations.append(Msg("preemption notice at {at} UTC", at=f"{notice_events[0].at:%H:%M:%S}"))
    confirmed = bool(confirmations)
    verdict = Msg("preempted ({confirmations})", confirmations=Join(confirmations)) if confirmed else \
        Msg("likely preempted (not yet confirmed)")
    return [Observation(
        summary=Msg("Spot node silent since {since} UTC — {verdict}", since=f"{since:%Y-%m-%d %H:%M:%S}",
                    verdict=verdict), since=since,
        log_lines=[e.log_line() for e in notice_events[:5]],
        remedy=Msg("let the pool replace it and resume the job from its last checkpoint") if confirmed else
        Msg("ask the cloud whether the instance was reclaimed; if it is still running, check its agent and network"),
        values={"silent_since": since.isoformat() if since else None, "confirmed": confirmed,
                "last_report_at": status["received_at"].isoformat(),
                "confirmations": [str(c) for c in confirmations],
                "notice_kind": status.get("notice_kind") or None})]


def _checkpoint_stale(node, params, ctx):
    """Judged against the pool's checkpoint policy (billing: spot nodes, or all nodes if the policy says so);
    spot nodes of a pool without a policy fall back to the rule's `max_age_s`."""
    if node.status is None:
        return None
    if node.checkpoint_max_age_s is not None:
        limit, source = node.checkpoint_max_age_s, "pool policy"
    elif node.is_spot:
        limit, source = params["max_age_s"], "spot default"
    else:
        return []
    source_words = Msg("pool policy") if source == "pool policy" else Msg("spot default")
    checkpoint = node.status.get("checkpoint") or {}
    age = node.status.get("checkpoint_age_s")
    if age is None and not checkpoint.get("dirs"):
        return None  # no checkpoint directory configured on this node: nothing to judge
    if age is not None and age <= limit:
        return []
    where = ", ".join(checkpoint.get("dirs") or [])[:300] or Msg("the configured directories")
    summary = (Msg("Newest checkpoint is {minutes:.0f} min old ({source} {limit:.0f} min)", minutes=age / 60,
                   source=source_words, limit=limit / 60)
               if age is not None else Msg("No checkpoint found in {where}", where=where))
    risk = Msg(" — a preemption now loses that much work") if node.is_spot else \
        Msg(" — a failure now loses that much work")
    return [Observation(
        summary=Msg("{summary}{risk}", summary=summary, risk=risk),
        values={"checkpoint_age_s": age, "max_age_s": limit, "limit_source": source,
                "newest_path": checkpoint.get("newest_path"), "dirs": checkpoint.get("dirs")})]


RULES = [
    node_rule(
        slug="cpu_steal", title="CPU steal high (noisy neighbour)", step=TriageStep.PLATFORM_HARDWARE,
        layer=Layer.VIRTUALIZATION, severity=Severity.WARNING, duration_s=300, clear_hold_s=300, check=_cpu_steal,
        params=(Param("threshold_pct", "number", 10.0, "CPU steal share", minimum=0, maximum=100),),
        description="On cloud nodes, the hypervisor takes CPU time for other tenants.",
        remedy="stop and start the instance to land on another host"),
    gpu_rule(
        slug="ecc_uncorrectable", title="Uncorrectable ECC errors", step=TriageStep.PLATFORM_HARDWARE,
        layer=Layer.HARDWARE, severity=Severity.CRITICAL, duration_s=0, clear_hold_s=300,
        check_gpu=_ecc_uncorrectable, with_ctx=True, gpu_candidates=_ecc_candidates, needs_nvml=True,
        explains=(HUNG_ON_BROKEN_GPU,),
        params=(Param("max_errors", "integer", 0, "Volatile uncorrectable errors tolerated", minimum=0),),
        description="Volatile uncorrectable ECC errors: data on this GPU may be corrupt.",
        remedy="reset the GPU (or reboot); if errors return, the GPU memory is failing"),
    gpu_rule(
        slug="pending_page_retirement", title="Page retirement or row remap pending",
        step=TriageStep.PLATFORM_HARDWARE, layer=Layer.HARDWARE, severity=Severity.WARNING, duration_s=0,
        clear_hold_s=60, check_gpu=_pending_retirement, gpu_candidates=_pending_candidates, needs_nvml=True,
        description="Retired pages or remapped rows wait for a GPU reset to take effect.",
        remedy="reset the GPU (or reboot) at a convenient time to activate the repair"),
    gpu_rule(
        slug="row_remap_failure", title="Row remap failure", step=TriageStep.PLATFORM_HARDWARE,
        layer=Layer.HARDWARE, severity=Severity.CRITICAL, duration_s=0, clear_hold_s=300,
        check_gpu=_remap_failure, gpu_candidates=lambda params: Q(remapped_rows_failure=True), needs_nvml=True,
        explains=(HUNG_ON_BROKEN_GPU,),
        description="The GPU ran out of spare rows; it cannot repair memory errors any more.",
        remedy="take the GPU out of service; it needs replacing"),
    gpu_rule(
        slug="pcie_link_degraded", title="PCIe link below its maximum", step=TriageStep.PLATFORM_HARDWARE,
        layer=Layer.HARDWARE, severity=Severity.WARNING, duration_s=300, clear_hold_s=300,
        check_gpu=_pcie_degraded, gpu_candidates=_pcie_candidates, needs_nvml=True,
        params=(Param("min_utilization_pct", "number", 10.0,
                      "Judge the link generation only above this utilisation (idle GPUs downshift)",
                      minimum=0, maximum=100),),
        description="The GPU's PCIe link trained below its maximum generation or width.",
        remedy="reseat the GPU or riser and check the slot; a reboot retrains the link"),
    gpu_rule(
        slug="thermal_throttling", title="Sustained thermal throttling", step=TriageStep.PLATFORM_HARDWARE,
        layer=Layer.HARDWARE, severity=Severity.WARNING, duration_s=600, clear_hold_s=300,
        check_gpu=_throttle_check(THERMAL_MASK, "thermal"), gpu_candidates=_mask_candidates("thermal_bits"),
        gpu_annotations={"thermal_bits": ("clock_event_reasons_mask", THERMAL_MASK)}, needs_nvml=True,
        description="Clocks are held down because the GPU is too hot.",
        remedy="check the cooling: fans, airflow, inlet temperature and the heatsink"),
    gpu_rule(
        slug="power_throttling", title="Sustained power-brake throttling", step=TriageStep.PLATFORM_HARDWARE,
        layer=Layer.HARDWARE, severity=Severity.WARNING, duration_s=600, clear_hold_s=300,
        check_gpu=_throttle_check(POWER_MASK, "power"), gpu_candidates=_mask_candidates("power_bits"),
        gpu_annotations={"power_bits": ("clock_event_reasons_mask", POWER_MASK)}, needs_nvml=True,
        description="Hardware slowdown or power brake (not the normal software power cap): PSU or power feed.",
        remedy="check the power supplies and the power feed of the server"),
    node_rule(
        slug="room_thermal_throttling", title="Most GPUs throttling for heat (cooling)",
        step=TriageStep.PLATFORM_HARDWARE, layer=Layer.FACILITY, severity=Severity.WARNING, duration_s=600,
        clear_hold_s=300, check=_room_thermal, gpu_candidates=_mask_candidates("thermal_bits"),
        gpu_annotations={"thermal_bits": ("clock_event_reasons_mask", THERMAL_MASK)}, needs_nvml=True,
        explains=(Explains(("thermal_throttling",), same_gpu=False),), prepare=_prepare_room_thermal,
        params=(Param("min_share_pct", "number", 50.0, "Share of the node's GPUs throttling for heat at once",
                      minimum=1, maximum=100),
                Param("min_gpus", "integer", 2, "At least this many GPUs", minimum=2, maximum=64),
                Param("min_site_share_pct", "number", 50.0, "Share of a site's reporting nodes with a GPU "
                      "throttling for heat at once (judged in the fleet-wide cycle)", minimum=1, maximum=100),
                Param("min_site_nodes", "integer", 3, "At least this many nodes of the site", minimum=2,
                      maximum=10000)),
        description="Thermal slowdown on most GPUs of a node, or on most nodes of a site, at once points at "
                    "cooling (the room, the rack, the server's fans), the facility layer — not at one GPU to "
                    "replace.",
        remedy="check the room and rack cooling (inlet temperature, CRAC units, airflow, server fans); one part "
               "is not the cause"),
    node_rule(
        slug="sxid_fatal", title="Fatal NVSwitch SXid", step=TriageStep.PLATFORM_HARDWARE, layer=Layer.HARDWARE,
        severity=Severity.CRITICAL, duration_s=0, clear_hold_s=600, check=_sxid_fatal,
        explains=(Explains(HUNG_ON_BROKEN_GPU.rules, same_gpu=False, when_critical=True),),
        params=(Param("window_s", "integer", 3600, "How long a fatal SXid keeps the finding open",
                      minimum=60, maximum=7 * 86400),),
        description="A fatal NVSwitch error: NVLink traffic between the GPUs is broken.",
        remedy="reset the NVSwitch fabric (reboot the machine); if it repeats, the baseboard needs service"),
    node_rule(
        slug="preemption_notice", title="Preemption notice", step=TriageStep.PLATFORM_HARDWARE,
        layer=Layer.VIRTUALIZATION, severity=Severity.CRITICAL, duration_s=0, clear_hold_s=0,
        check=_preemption_notice, provider_initiated=True, needs_report=False,
        explains=(Explains(DISRUPTION_SYMPTOMS, same_gpu=False),),
        params=(Param("window_s", "integer", 900, "How long a notice counts after the report or event that "
                      "carried it (at least until its deadline)", minimum=1, maximum=86400),),
        description="The cloud announced it will reclaim (terminate, stop, hibernate) this instance.",
        remedy="checkpoint now and drain the node"),
    node_rule(
        slug="requested_disruption", title="Reboot or driver change in progress (requested)",
        # We started it, so it sits on a layer we own on every delivery form: nobody else is asked to act.
        step=TriageStep.PLATFORM_HARDWARE, layer=Layer.APPLICATION, severity=Severity.WARNING, duration_s=0,
        clear_hold_s=0, check=_requested_disruption, needs_report=False,
        explains=(Explains(DISRUPTION_SYMPTOMS, same_gpu=False),),
        params=(Param("window_s", "integer", 1800, "How long after the request a node that has not come back "
                      "is still explained by it", minimum=60, maximum=86400),),
        description="A reboot or a driver / stack rollback we started (remediation's step) is in progress: the "
                    "node going silent or losing GPUs until it comes back is its consequence.",
        remedy="wait for the node to come back, then verify it"),
    node_rule(
        slug="planned_maintenance", title="Planned maintenance announced", step=TriageStep.PLATFORM_HARDWARE,
        layer=Layer.VIRTUALIZATION, severity=Severity.WARNING, duration_s=0, clear_hold_s=0,
        check=_planned_maintenance, provider_initiated=True, needs_report=False,
        explains=(Explains(DISRUPTION_SYMPTOMS, same_gpu=False),),
        params=(Param("window_s", "integer", 3600, "How long a maintenance notice counts after the report that "
                      "carried it (at least until its time)", minimum=1, maximum=7 * 86400),
                Param("notice_kinds", "string_list", ["maintenance"], "Notice kinds that announce maintenance")),
        description="The provider announced maintenance of the instance or host: lost GPUs or a silent node "
                    "inside its window are its consequence, not a hardware fault.",
        remedy="checkpoint and drain before the event"),
    node_rule(
        slug="silent_spot_node", title="Spot node silent (likely preempted)", step=TriageStep.PLATFORM_HARDWARE,
        layer=Layer.VIRTUALIZATION, severity=Severity.WARNING, duration_s=0, clear_hold_s=60, check=_silent_spot,
        needs_report=False, provider_initiated=True, explains=(Explains(DISRUPTION_SYMPTOMS, same_gpu=False),),
        params=(Param("notice_lookback_s", "integer", 900,
                      "A preemption notice this long before the silence confirms the reclaim",
                      minimum=0, maximum=86400),),
        description="A spot node stopped reporting: most likely the cloud reclaimed it.",
        remedy="let the pool replace it"),
    node_rule(
        slug="checkpoint_stale", title="Checkpoint older than the pool's policy",
        step=TriageStep.PLATFORM_HARDWARE, layer=Layer.APPLICATION, severity=Severity.WARNING, duration_s=60,
        clear_hold_s=0, check=_checkpoint_stale,
        params=(Param("max_age_s", "integer", 1800, "Oldest acceptable newest checkpoint on a spot node whose "
                      "pool has no checkpoint policy (billing)", minimum=60, maximum=7 * 86400),),
        description="The newest checkpoint is older than the pool's checkpoint policy allows (spot nodes, or every "
                    "node when the policy says so): a preemption or failure loses that work.",
        remedy="checkpoint more often, or check that the job can write to the checkpoint directory"),
]
