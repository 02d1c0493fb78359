"""From findings to incidents: one decision per finding, written down (`FindingIntake`), so "why did this not
open an incident?" always has an answer.

For a new finding, in order: resolved already → nothing; node retired → nothing; snoozed or marked healthy
(the finding or its GPU) → nothing until the override ends; an open incident for the same node and cause →
attach; an open incident on the node with an open finding that explains this one or that this one explains (the
health catalog's `explains`: an ECC counter after its Xid 48…), or that is the same fault on the same GPU (a lost
GPU after its Xid 79) → attach; the pool's or site's circuit breaker open (or tripping now) → attach to its
mass-failure incident; else the first matching remediation policy opens an incident with its workflow, queued
until the pool has a remediation slot.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from fleet.health.choices import FindingState, Severity
from fleet.health.models import Finding
from fleet.health.selectors.triage import findings_explained
from fleet.inventory.choices import NodeState
from fleet.inventory.models import GPU, Pool
from fleet_agent.xid import NODE_REMEDIATIONS_RMA_THRESHOLD

from ..choices import OPEN_STATES, CauseKind, IntakeOutcome, OverrideKind
from ..models import FindingIntake, Incident
from .breakers import breakers_check
from .engine import incidents_admit_safely, pool_settings
from .incidents import finding_attach, incident_create
from .overrides import suppressing_override
from .policies import MatchFacts, finding_xid_codes, policy_match, policy_snapshot, policy_table_version

logger = logging.getLogger(__name__)

# The window of the "≥ 5 remediations on one node → RMA / replace" escalation (the count is in the seeded policies).
REPEAT_WINDOW = timedelta(seconds=NODE_REMEDIATIONS_RMA_THRESHOLD[1])
PREEMPTION_RULES = {"preemption_notice", "silent_spot_node"}
MAX_PER_SWEEP = 500
# Causes that are one fault when they name the same GPU, beyond the health catalog's `explains`: Xid 79 is the
# driver saying the GPU fell off the bus, and `gpu_lost` is the same GPU then missing from NVML. (The triage keeps
# its own order for them: step 1, the GPU is not visible, heads it.)
SAME_FAULT_ON_ONE_GPU = (frozenset({"xid:79", "rule:gpu_lost"}),)


def finding_cause(finding: Finding) -> tuple[str, str]:
    """(cause kind, cause) — one open incident per node and cause."""
    slug = finding.rule.slug
    if slug in PREEMPTION_RULES:
        return CauseKind.PREEMPTION, "preemption"
    if slug == "xid":
        code = ((finding.evidence or {}).get("values") or {}).get("code")
        if isinstance(code, int):
            return CauseKind.XID, f"xid:{code}"
    return CauseKind.RULE, f"rule:{slug}"


def recent_remediations(finding: Finding, *, now: datetime) -> int:
    """Remediations of the same fault in the last 7 days: on the finding's node, for the same cause, and — when
    the finding names a GPU — on the same part (its serial; a replaced card starts clean). An earlier incident whose
    findings named another card does not count; one that named none counts (it may have been this part). Dry runs
    and mass failures do not count. Unrelated faults on one node no longer add up to a hardware verdict."""
    cause = finding_cause(finding)[1]
    incidents = (Incident.objects.filter(node_id=finding.node_id, cause=cause, started_at__gte=now - REPEAT_WINDOW,
                                         dry_run=False).exclude(cause_kind=CauseKind.MASS_FAILURE))
    gpu = finding.gpu
    if gpu is None:
        return incidents.count()
    same_part = Q(gpu__serial=gpu.serial) if gpu.serial else Q(gpu_id=gpu.pk)
    other_parts = (Finding.objects.filter(incident_links__incident=OuterRef("pk"), gpu__isnull=False)
                   .exclude(same_part))
    this_part = Finding.objects.filter(same_part, incident_links__incident=OuterRef("pk"))
    return incidents.exclude(Q(Exists(other_parts)) & ~Q(Exists(this_part))).count()


def replaced_cards_with_the_same_fault(finding: Finding, *, now: datetime) -> list[str]:
    """Serials of the cards this finding's GPU replaced in the same slot (same index or PCI address on the node)
    that had an incident for the same cause in the last 7 days: the fault followed the slot, not the card."""
    gpu = finding.gpu
    if gpu is None:
        return []
    slot = Q(index=gpu.index) | (Q(pci_bus_id=gpu.pci_bus_id) if gpu.pci_bus_id else Q(pk__in=[]))
    earlier = GPU.objects.filter(slot, node_id=finding.node_id, present=False).exclude(pk=gpu.pk)
    if gpu.serial:
        earlier = earlier.exclude(serial=gpu.serial)
    cause = finding_cause(finding)[1]
    faulted = Finding.objects.filter(gpu__in=earlier, incident_links__incident__cause=cause,
                                     incident_links__incident__started_at__gte=now - REPEAT_WINDOW,
                                     incident_links__incident__dry_run=False)
    return sorted({serial or uuid for serial, uuid in faulted.values_list("gpu__serial", "gpu__uuid")})


def match_facts(finding: Finding, *, now: datetime) -> MatchFacts:
    node = finding.node
    values = (finding.evidence or {}).get("values") or {}
    return MatchFacts(rule=finding.rule.slug, xid_codes=finding_xid_codes(finding),
                      xid_action=str(values.get("action") or "") if finding.rule.slug == "xid" else "",
                      severity=finding.severity, layer=finding.layer, party=finding.responsible_party,
                      delivery_form=node.delivery_form, billing_mode=node.billing_mode,
                      provider_id=node.provider_id, pool_id=node.pool_id,
                      recent_remediations=recent_remediations(finding, now=now))


def findings_intake(*, finding_ids: list[int] | None = None, now: datetime | None = None) -> dict:
    """Decide for the given findings (None: every open finding not decided yet, and decisions due again)."""
    now = now or timezone.now()
    if finding_ids is None:
        undecided = Finding.objects.filter(state=FindingState.OPEN, intake__isnull=True)
        due = Finding.objects.filter(state=FindingState.OPEN, intake__retry_at__lte=now)
        finding_ids = sorted(set(undecided.values_list("pk", flat=True)[:MAX_PER_SWEEP])
                             | set(due.values_list("pk", flat=True)[:MAX_PER_SWEEP]))
    counts: dict[str, int] = {}
    pools: set[int | None] = set()
    for finding_id in finding_ids:
        for attempt in range(2):
            try:
                outcome, pool_id = _intake_one(finding_id, now=now)
                break
            except IntegrityError:
                # A concurrent intake opened the same node+cause incident first: the second pass attaches.
                if attempt:
                    raise
        if outcome is None:
            continue
        counts[outcome] = counts.get(outcome, 0) + 1
        if outcome == IntakeOutcome.OPENED:
            pools.add(pool_id)
    for pool_id in pools:
        incidents_admit_safely(pool_id)
    return {"processed": sum(counts.values()), "outcomes": counts}


def incident_of_the_same_fault(finding: Finding) -> tuple[Incident, Finding] | None:
    """The open incident on the finding's node that holds an open finding explaining this one or explained by it,
    with that finding; None when there is none. One fault seen by two rules is one incident, and takes one slot."""
    linked = list(Finding.objects.select_related("rule").filter(
        node_id=finding.node_id, state=FindingState.OPEN, incident_links__incident__state__in=sorted(OPEN_STATES))
        .exclude(pk=finding.pk).distinct())
    if not linked:
        return None
    explained = findings_explained([finding, *linked])
    cause = finding_cause(finding)[1]
    for other in linked:
        pair = {cause, finding_cause(other)[1]}
        same_gpu_fault = finding.gpu_id is not None and other.gpu_id == finding.gpu_id and any(
            pair == group for group in SAME_FAULT_ON_ONE_GPU)
        if same_gpu_fault or explained.get(finding.pk) == other or explained.get(other.pk) == finding:
            incident = (Incident.objects.select_for_update()
                        .filter(finding_links__finding=other, state__in=sorted(OPEN_STATES)).first())
            if incident is not None:
                return incident, other
    return None


def _intake_one(finding_id: int, *, now: datetime) -> tuple[str | None, int | None]:
    with transaction.atomic():
        finding = (Finding.objects.select_related("rule", "gpu", "node__pool", "node__site", "node__provider")
                   .filter(pk=finding_id).first())
        if finding is None:
            return None, None
        node = finding.node
        if node.pool_id is not None:
            # Intake and admission for one pool take turns: the breaker count and the slot count stay exact.
            Pool.objects.select_for_update().filter(pk=node.pool_id).values_list("pk", flat=True).first()
        decided = FindingIntake.objects.filter(finding=finding).first()
        if decided is not None and (decided.retry_at is None or decided.retry_at > now):
            return None, None
        outcome, fields = _decide(finding, now=now)
        FindingIntake.objects.update_or_create(finding=finding, defaults={
            "decided_at": now, "outcome": outcome, "incident": fields.get("incident"),
            "policy": fields.get("policy"), "policy_version": fields.get("policy_version"),
            "retry_at": fields.get("retry_at"), "message": fields.get("message", "")[:500]})
        return outcome, node.pool_id


def _decide(finding: Finding, *, now: datetime) -> tuple[str, dict]:
    node = finding.node
    if finding.state != FindingState.OPEN:
        return IntakeOutcome.RESOLVED_FIRST, {"message": "resolved before remediation looked at it"}
    if node.state == NodeState.RETIRED:
        return IntakeOutcome.NODE_RETIRED, {"message": "the node is retired"}
    override = suppressing_override(finding, now=now)
    if override is not None:
        outcome = IntakeOutcome.SNOOZED if override.kind == OverrideKind.SNOOZE else IntakeOutcome.MARKED_HEALTHY
        target = f"GPU {override.gpu_id}" if override.gpu_id else "the finding"
        return outcome, {"retry_at": override.until,
                         "message": f"{override.kind} on {target} by {override.created_by_label} until "
                                    f"{override.until:%Y-%m-%d %H:%M} UTC: {override.reason}"}
    cause_kind, cause = finding_cause(finding)
    existing = Incident.objects.select_for_update().filter(node=node, cause=cause,
                                                           state__in=sorted(OPEN_STATES)).first()
    if existing is not None:
        finding_attach(existing, finding, at=now)
        return IntakeOutcome.ATTACHED, {"incident": existing, "message": f"attached to {existing.key}"}
    same_fault = incident_of_the_same_fault(finding)
    if same_fault is not None:
        incident, other = same_fault
        finding_attach(incident, finding, at=now)
        return IntakeOutcome.ATTACHED, {"incident": incident, "message": f"attached to {incident.key}: the same "
                                        f"fault as finding #{other.pk} ({other.rule.slug})"}

    facts = match_facts(finding, now=now)
    policy = policy_match(facts)
    wants_incident = policy is not None and policy.workflow_id is not None and policy.workflow.enabled
    breaker = breakers_check(node=node, now=now) if (finding.severity == Severity.CRITICAL or wants_incident) \
        else None
    if breaker is not None and breaker.incident_id is not None and (
            wants_incident or finding.severity == Severity.CRITICAL):
        mass = Incident.objects.select_for_update().get(pk=breaker.incident_id)
        finding_attach(mass, finding, at=now)
        return IntakeOutcome.MASS_FAILURE, {"incident": mass, "message": f"the {breaker.scope} circuit breaker is "
                                                                         f"open: attached to {mass.key}"}
    if policy is None:
        return IntakeOutcome.NO_POLICY, {"message": "no remediation policy matches"}
    version = policy_table_version()
    if not wants_incident:
        why = "the policy opens no incident" if policy.workflow_id is None else \
            f"workflow {policy.workflow.slug} is disabled"
        return IntakeOutcome.IGNORED, {"policy": policy, "policy_version": version, "message": why}

    settings_row = pool_settings(node.pool_id)
    replaced = replaced_cards_with_the_same_fault(finding, now=now)
    slot_note = (f" — new card, same fault: the card it replaced in this slot ({', '.join(replaced)}) had it too; "
                 "suspect the slot, riser, board or power" if replaced else "")
    incident = incident_create(
        node=node, cause_kind=cause_kind, cause=cause, title=f"{node.hostname}: {finding.summary}{slot_note}",
        workflow=policy.workflow, at=now, opened_by="policy", dry_run=bool(settings_row and settings_row.dry_run),
        boundary={"delivery_form": node.delivery_form, "layer": finding.layer,
                  "responsible_party": finding.responsible_party,
                  "responsibility_source": finding.responsibility_source},
        policy=policy, policy_version=version, policy_snapshot=policy_snapshot(policy),
        message=f"opened by policy #{policy.priority} \"{policy.name}\" (table v{version}) from finding "
                f"#{finding.pk}: {finding.summary}{slot_note}",
        output={"finding": finding.pk, "match": facts.as_dict(), "replaced_cards_same_fault": replaced})
    finding_attach(incident, finding, at=now, trigger=True)
    return IntakeOutcome.OPENED, {"incident": incident, "policy": policy, "policy_version": version,
                                  "message": f"opened {incident.key} ({policy.workflow.slug})"}

