"""The per-node triage checklist: the four steps in order, each passed / failed / unknown, with the findings
behind it; the first failing step becomes the headline in plain words."""

from datetime import datetime, timedelta

from django.utils import timezone

from fleet.inventory.models import Node
from fleet.telemetry.choices import NvmlStatus
from fleet.telemetry.models import NodeStatus

from ..choices import SEVERITY_RANK, STEP_ORDER, CheckStatus, FindingState, TriageStep, step_number
from ..models import Finding, HealthCondition

# A report older than this many intervals counts as "no recent report" even before the silent flag is set.
STALE_AFTER_INTERVALS = 3
MIN_STALE_AFTER_S = 60


def _freshness(status: NodeStatus | None, now: datetime) -> tuple[bool, str]:
    if status is None:
        return False, "the node has never reported"
    stale_after = max(STALE_AFTER_INTERVALS * (status.interval_s or 15), MIN_STALE_AFTER_S)
    if status.silent or status.received_at < now - timedelta(seconds=stale_after):
        return False, f"no report since {status.received_at:%Y-%m-%d %H:%M:%S} UTC"
    return True, ""


def node_triage(*, node: Node, now: datetime | None = None) -> dict:
    now = now or timezone.now()
    status = NodeStatus.objects.filter(node=node).first()
    findings = sorted(Finding.objects.filter(node=node, state=FindingState.OPEN).select_related("rule", "node", "gpu"),
                      key=lambda f: (SEVERITY_RANK.get(f.severity, 9), f.opened_at))
    open_subjects = {(f.rule_id, f.subject) for f in findings}
    pending = [c for c in HealthCondition.objects.filter(node=node, first_false_at__isnull=True).select_related("rule")
               if (c.rule_id, c.subject) not in open_subjects]
    fresh, stale_reason = _freshness(status, now)
    nvml_down = status is not None and status.nvml_status != NvmlStatus.OK

    steps = []
    for step in STEP_ORDER:
        step_findings = [f for f in findings if f.step == step]
        step_pending = sorted(
            ({"rule": c.rule.slug, "subject": c.subject, "summary": c.summary, "since": c.first_true_at,
              "opens_after_s": c.rule.duration_s, "opens_at": c.first_true_at + timedelta(seconds=c.rule.duration_s),
              "opens_in_s": max(0, round((c.first_true_at + timedelta(seconds=c.rule.duration_s) - now)
                                         .total_seconds()))}
             for c in pending if c.rule.step == step), key=lambda p: p["opens_at"])
        if step_findings:
            verdict, reason = CheckStatus.FAILED, step_findings[0].summary
        elif not fresh:
            verdict, reason = CheckStatus.UNKNOWN, stale_reason
        elif nvml_down and step == TriageStep.VISIBILITY:
            verdict = CheckStatus.UNKNOWN
            reason = f"NVML unavailable ({status.get_nvml_status_display()}); waiting for the condition to hold"
        elif nvml_down:
            verdict, reason = CheckStatus.UNKNOWN, "blocked: NVML is unavailable (step 1)"
        elif step_pending:
            # Inside its hold time a condition is forming: never a pass (the console shows it amber).
            first = step_pending[0]
            verdict = CheckStatus.PENDING
            reason = f"forming, opens in {_duration(first['opens_in_s'])}: {first['summary']}"
        else:
            verdict, reason = CheckStatus.PASSED, "no problem found"
        steps.append({"step": step, "number": step_number(step), "title": TriageStep(step).label,
                      "status": verdict, "reason": reason, "findings": step_findings, "pending": step_pending})

    headline, headline_finding = _headline(steps)
    return {"node": node.pk, "hostname": node.hostname, "generated_at": now,
            "last_report_at": status.received_at if status else None, "fresh": fresh,
            "headline": headline, "headline_finding": headline_finding, "steps": steps}


def _headline(steps: list[dict]) -> tuple[str, Finding | None]:
    for step in steps:
        if step["status"] == CheckStatus.FAILED:
            finding = step["findings"][0]
            return f"Step {step['number']} — {finding.summary}", finding
    for step in steps:
        if step["status"] == CheckStatus.UNKNOWN:
            return f"Step {step['number']} — unknown: {step['reason']}", None
    for step in steps:
        if step["status"] == CheckStatus.PENDING:
            return f"Step {step['number']} — {step['reason']}", None
    return "All four steps passed", None


def _duration(seconds: int) -> str:
    """4 min, 45 s, 2 h 5 min: how long until a forming condition opens a finding."""
    if seconds < 60:
        return f"{seconds} s"
    minutes = -(-seconds // 60)  # round up: "opens in 1 min" at 59 s left would be wrong the other way
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"
