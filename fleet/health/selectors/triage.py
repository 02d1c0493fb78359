"""The per-node triage checklist: the four steps in order, each passed / failed / unknown, with the findings
behind it; the first failing step becomes the headline in plain words.

When one open finding explains another (its rule declares `explains`, see `fleet.health.rules.base.Explains`),
the explained finding is a consequence: it stays on its step, but the headline names the cause — the more
specific reading of the fault, or the announced event behind the symptoms — and its owner.
"""

from collections import defaultdict
from datetime import datetime, timedelta

from django.utils import timezone

from fleet.core.i18n import Msg, render
from fleet.inventory.choices import Owner
from fleet.inventory.models import Node
from fleet.telemetry.choices import NvmlStatus
from fleet.telemetry.models import NodeStatus

from ..choices import SEVERITY_RANK, STEP_ORDER, CheckStatus, FindingState, Severity, TriageStep, step_number
from ..models import Finding, HealthCondition
from ..texts import summary_param

# A report older than this many intervals counts as "no recent report" even before the silent flag is set.
STALE_AFTER_INTERVALS = 3
MIN_STALE_AFTER_S = 60


def _freshness(status: NodeStatus | None, now: datetime) -> tuple[bool, Msg | str]:
    if status is None:
        return False, Msg("the node has never reported")
    stale_after = max(STALE_AFTER_INTERVALS * (status.interval_s or 15), MIN_STALE_AFTER_S)
    if status.silent or status.received_at < now - timedelta(seconds=stale_after):
        return False, Msg("no report since {at} UTC", at=f"{status.received_at:%Y-%m-%d %H:%M:%S}")
    return True, ""


def node_triage(*, node: Node, now: datetime | None = None) -> dict:
    """Built per request: the texts (step reasons, the headline, pending summaries) are in the active language."""
    now = now or timezone.now()
    status = NodeStatus.objects.filter(node=node).first()
    findings = sorted(Finding.objects.filter(node=node, state=FindingState.OPEN).select_related("rule", "node", "gpu"),
                      key=lambda f: (SEVERITY_RANK.get(f.severity, 9), f.opened_at))
    open_subjects = {(f.rule_id, f.subject) for f in findings}
    pending = [c for c in HealthCondition.objects.filter(node=node, first_false_at__isnull=True).select_related("rule")
               if (c.rule_id, c.subject) not in open_subjects]
    explained_by = findings_explained(findings)
    fresh, stale_reason = _freshness(status, now)
    nvml_down = status is not None and status.nvml_status != NvmlStatus.OK

    steps = []
    for step in STEP_ORDER:
        step_findings = [f for f in findings if f.step == step]
        step_pending = sorted(
            ({"rule": c.rule.slug, "subject": c.subject, "summary": render(c.summary_msg, fallback=c.summary),
              "summary_param": c.summary_msg or c.summary, "since": c.first_true_at,
              "opens_after_s": c.rule.duration_s, "opens_at": c.first_true_at + timedelta(seconds=c.rule.duration_s),
              "opens_in_s": max(0, round((c.first_true_at + timedelta(seconds=c.rule.duration_s) - now)
                                         .total_seconds()))}
             for c in pending if c.rule.step == step), key=lambda p: p["opens_at"])
        causes = [f for f in step_findings if f.pk not in explained_by]
        if causes:
            verdict, reason = CheckStatus.FAILED, summary_param(causes[0])
        elif step_findings:
            cause = root_cause(step_findings[0], explained_by)
            verdict = CheckStatus.FAILED
            reason = Msg("{summary} — a consequence of: {cause}", summary=summary_param(step_findings[0]),
                         cause=summary_param(cause))
        elif not fresh:
            verdict, reason = CheckStatus.UNKNOWN, stale_reason
        elif nvml_down and step == TriageStep.VISIBILITY:
            verdict = CheckStatus.UNKNOWN
            reason = Msg("NVML unavailable ({status}); waiting for the condition to hold",
                         status=Msg.known(status.get_nvml_status_display()))
        elif nvml_down:
            verdict, reason = CheckStatus.UNKNOWN, Msg("blocked: NVML is unavailable (step 1)")
        elif step_pending:
            # Inside its hold time a condition is forming: never a pass (the console shows it amber).
            first = step_pending[0]
            verdict = CheckStatus.PENDING
            reason = Msg("forming, opens in {duration}: {summary}", duration=_duration(first["opens_in_s"]),
                         summary=first["summary_param"])
        else:
            verdict, reason = CheckStatus.PASSED, Msg("no problem found")
        steps.append({"step": step, "number": step_number(step), "title": Msg.known(TriageStep(step).label),
                      "status": verdict, "reason": reason, "findings": step_findings, "pending": step_pending})

    headline, headline_finding = _headline(steps, explained_by, node)
    for step in steps:
        step["title"], step["reason"] = render(step["title"]), render(step["reason"])
        for pending_row in step["pending"]:
            pending_row.pop("summary_param")
    consequences = [{"finding": f.pk, "rule": f.rule.slug, "summary": render(summary_param(f)),
                     "explained_by": explained_by[f.pk].pk, "explained_by_rule": explained_by[f.pk].rule.slug,
                     "root_cause": root_cause(f, explained_by).pk}
                    for f in findings if f.pk in explained_by]
    return {"node": node.pk, "hostname": node.hostname, "generated_at": now,
            "last_report_at": status.received_at if status else None, "fresh": fresh,
            "headline": render(headline), "headline_finding": headline_finding, "steps": steps,
            "consequences": consequences}


def findings_explained(findings: list[Finding]) -> dict[int, Finding]:
    """finding id → the open finding that explains it, from the `explains` declarations stored in each finding's
    evidence. `findings` in headline order (severity, then age): when two findings claim each other, the first
    one keeps the claim."""
    by_rule: dict[str, list[Finding]] = defaultdict(list)
    for finding in findings:
        by_rule[finding.rule.slug].append(finding)
    explained: dict[int, Finding] = {}
    for cause in findings:
        for spec in (cause.evidence or {}).get("explains") or []:
            if spec.get("when_critical") and cause.severity != Severity.CRITICAL:
                continue
            for slug in spec.get("rules") or []:
                for other in by_rule.get(slug, ()):
                    if other.pk == cause.pk or other.pk in explained or _claims(other, cause, explained):
                        continue
                    if spec.get("same_gpu", True) and cause.gpu_id is not None and other.gpu_id != cause.gpu_id:
                        continue
                    if spec.get("subjects") and not other.subject.endswith(tuple(spec["subjects"])):
                        continue
                    explained[other.pk] = cause
    return explained


def _claims(finding: Finding, target: Finding, explained: dict[int, Finding]) -> bool:
    """Whether `finding` already explains `target`, directly or through a chain (no cycles)."""
    seen = set()
    current = target
    while current.pk in explained and current.pk not in seen:
        seen.add(current.pk)
        current = explained[current.pk]
        if current.pk == finding.pk:
            return True
    return False


def root_cause(finding: Finding, explained: dict[int, Finding]) -> Finding:
    seen = {finding.pk}
    while finding.pk in explained and explained[finding.pk].pk not in seen:
        finding = explained[finding.pk]
        seen.add(finding.pk)
    return finding


def _owner(finding: Finding, node: Node) -> Msg | str:
    party = finding.responsible_party
    if party == Owner.PROVIDER:
        return node.provider.name if node.provider_id else Msg("the provider")
    if party == Owner.SHARED:
        return Msg("shared with {provider}", provider=node.provider.name) if node.provider_id else Msg("shared")
    return Msg.known(Owner(party).label.lower()) if party in Owner.values else (party or Msg("us"))


def _headline(steps: list[dict], explained_by: dict[int, Finding], node: Node) -> tuple[Msg, Finding | None]:
    for step in steps:
        if step["status"] == CheckStatus.FAILED:
            causes = [f for f in step["findings"] if f.pk not in explained_by]
            if not causes:
                continue  # only consequences here: the headline is their cause, on a later step
            finding = causes[0]
            explained = [f for f in explained_by if root_cause_id(f, explained_by) == finding.pk]
            if len(explained) == 1:
                text = Msg("Step {number} — {summary} — owner: {owner} (explains 1 other finding)",
                           number=step["number"], summary=summary_param(finding), owner=_owner(finding, node))
            elif explained:
                text = Msg("Step {number} — {summary} — owner: {owner} (explains {count} other findings)",
                           number=step["number"], summary=summary_param(finding), owner=_owner(finding, node),
                           count=len(explained))
            else:
                text = Msg("Step {number} — {summary} — owner: {owner}", number=step["number"],
                           summary=summary_param(finding), owner=_owner(finding, node))
            return text, finding
    for step in steps:
        if step["status"] == CheckStatus.UNKNOWN:
            return Msg("Step {number} — unknown: {reason}", number=step["number"], reason=step["reason"]), None
    for step in steps:
        if step["status"] == CheckStatus.PENDING:
            return Msg("Step {number} — {reason}", number=step["number"], reason=step["reason"]), None
    return Msg("All four steps passed"), None


def root_cause_id(finding_id: int, explained: dict[int, Finding]) -> int:
    seen = {finding_id}
    current = finding_id
    while current in explained and explained[current].pk not in seen:
        current = explained[current].pk
        seen.add(current)
    return current


def _duration(seconds: int) -> Msg:
    """4 min, 45 s, 2 h 5 min: how long until a forming condition opens a finding."""
    if seconds < 60:
        return Msg("{seconds} s", seconds=seconds)
    minutes = -(-seconds // 60)  # round up: "opens in 1 min" at 59 s left would be wrong the other way
    if minutes < 60:
        return Msg("{minutes} min", minutes=minutes)
    hours, minutes = divmod(minutes, 60)
    return Msg("{hours} h {minutes} min", hours=hours, minutes=minutes) if minutes else \
        Msg("{hours} h", hours=hours)
