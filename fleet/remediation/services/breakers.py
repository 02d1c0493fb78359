"""Circuit breakers per pool and per site (NVSentinel's idea, with an explicit count and share).

When MORE than `threshold_pct` of a pool's (or site's) nodes — and at least `min_nodes` of them — got a new
critical finding within `window_s`, the breaker trips: automation pauses there, one `mass_failure` incident opens
against the provider or facility instead of N replacements, and the findings attach to it. Only an operator
closes it again (resetting the breaker, or finishing or cancelling that incident); paused incidents then resume.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from fleet.core.models import AuditEntry
from fleet.core.services import audit_record
from fleet.health.choices import FindingState, Severity
from fleet.health.models import Finding
from fleet.inventory.choices import NodeState
from fleet.inventory.models import Node, Pool, Site

from ..choices import (
    ACTIVE_STATES,
    BreakerScope,
    BreakerState,
    CauseKind,
    IncidentEventKind,
    IncidentState,
    TimelineKind,
)
from ..models import CircuitBreaker, Incident, Workflow
from .incidents import emit, finding_attach, incident_create, incident_set_state, timeline_add
from .overrides import suppressed_finding_ids

MASS_FAILURE_WORKFLOW = "mass-failure"


def breaker_for(*, pool: Pool | None = None, site: Site | None = None, lock: bool = False) -> CircuitBreaker:
    if pool is not None:
        breaker, _ = CircuitBreaker.objects.get_or_create(pool=pool, defaults={"scope": BreakerScope.POOL})
    else:
        breaker, _ = CircuitBreaker.objects.get_or_create(site=site, defaults={"scope": BreakerScope.SITE})
    if lock:
        breaker = CircuitBreaker.objects.select_for_update().get(pk=breaker.pk)
    return breaker


def blocking_breaker(*, pool_id: int | None, site_id: int | None) -> CircuitBreaker | None:
    """The open breaker (pool first, then site) that pauses automation for this scope, if any."""
    q = Q(pk__in=[])
    if pool_id is not None:
        q |= Q(pool_id=pool_id)
    if site_id is not None:
        q |= Q(site_id=site_id)
    return (CircuitBreaker.objects.filter(q, state=BreakerState.OPEN).select_related("incident")
            .order_by("-scope").first())


def _scope_nodes(breaker: CircuitBreaker):
    nodes = Node.objects.exclude(state=NodeState.RETIRED)
    if breaker.scope == BreakerScope.POOL:
        return nodes.filter(pool_id=breaker.pool_id)
    return nodes.filter(Q(site_id=breaker.site_id) | Q(site__isnull=True, pool__site_id=breaker.site_id))


def node_site_id(node: Node) -> int | None:
    if node.site_id is not None:
        return node.site_id
    return node.pool.site_id if node.pool_id is not None else None


def breakers_check(*, node: Node, now: datetime) -> CircuitBreaker | None:
    """Evaluate the node's pool and site breakers (tripping one if its threshold is crossed); the open one."""
    targets = []
    if node.pool_id is not None:
        targets.append({"pool": node.pool})
    site_id = node_site_id(node)
    if site_id is not None:
        targets.append({"site": Site.objects.get(pk=site_id)})
    for target in targets:
        breaker = breaker_for(lock=True, **target)
        if breaker.state == BreakerState.OPEN:
            return breaker
        nodes = _scope_nodes(breaker)
        total = nodes.count()
        findings = list(Finding.objects.filter(node__in=nodes, state=FindingState.OPEN, severity=Severity.CRITICAL,
                                               opened_at__gte=now - timedelta(seconds=breaker.window_s))
                        .select_related("rule", "node"))
        suppressed = suppressed_finding_ids(findings, now=now)
        findings = [f for f in findings if f.pk not in suppressed]
        unhealthy = {f.node_id for f in findings}
        if total and len(unhealthy) >= breaker.min_nodes and len(unhealthy) * 100 > breaker.threshold_pct * total:
            breaker_trip(breaker, findings=findings, total=total, now=now)
            return breaker
    return None


def breaker_trip(breaker: CircuitBreaker, *, findings: list[Finding], total: int, now: datetime) -> Incident:
    from .engine import incident_start

    unhealthy = sorted({f.node_id for f in findings})
    target = breaker.pool if breaker.scope == BreakerScope.POOL else breaker.site
    share = round(100 * len(unhealthy) / total)
    reason = (f"{len(unhealthy)} of {total} nodes ({share} %) of {breaker.scope} {target} turned unhealthy within "
              f"{breaker.window_s // 60 or breaker.window_s} {'min' if breaker.window_s >= 60 else 's'} "
              f"(threshold: more than {breaker.threshold_pct} %)")
    layer, party = Counter((f.layer, f.responsible_party) for f in findings).most_common(1)[0][0]
    workflow = Workflow.objects.get(slug=MASS_FAILURE_WORKFLOW)
    provider = target.provider
    incident = incident_create(
        node=None, cause_kind=CauseKind.MASS_FAILURE, cause=f"mass_failure:{breaker.scope}:{target.pk}",
        title=f"Mass failure: {reason}", workflow=workflow, at=now, opened_by="circuit breaker",
        pool=breaker.pool, site=breaker.site if breaker.scope == BreakerScope.SITE else breaker.pool.site,
        provider=provider,
        boundary={"layer": layer, "responsible_party": party, "responsibility_source": "",
                  "delivery_form": getattr(target, "delivery_form", "")},
        message=f"circuit breaker tripped: {reason}", output={"unhealthy_nodes": unhealthy, "total_nodes": total})
    incident.breaker = breaker
    incident.save(update_fields=["breaker"])
    for finding in findings:
        finding_attach(incident, finding, at=now, trigger=True)
    breaker.state, breaker.tripped_at, breaker.tripped_reason = BreakerState.OPEN, now, reason[:300]
    breaker.unhealthy_nodes, breaker.total_nodes, breaker.incident = unhealthy, total, incident
    breaker.reset_at, breaker.reset_by, breaker.reset_note = None, "", ""
    breaker.save()
    timeline_add(incident, TimelineKind.BREAKER_TRIPPED, reason, at=now, output={"breaker": breaker.pk})
    scope = Q(pool_id=breaker.pool_id) if breaker.scope == BreakerScope.POOL else Q(site_id=breaker.site_id)
    for paused in Incident.objects.select_for_update().filter(scope, state__in=sorted(ACTIVE_STATES)).exclude(
            cause_kind=CauseKind.MASS_FAILURE):
        if paused.state == IncidentState.PAUSED:
            continue
        text = f"automation paused: the {breaker.scope} circuit breaker tripped (mass-failure incident {incident.key})"
        incident_set_state(paused, IncidentState.PAUSED, reason=text)
        paused.save()
        timeline_add(paused, TimelineKind.PAUSED, text, at=now)
    emit(incident, IncidentEventKind.BREAKER_TRIPPED, at=now, breaker=breaker.pk, scope=breaker.scope,
         unhealthy_nodes=unhealthy, total_nodes=total)
    incident_start(incident, now=now, message="started: the provider or facility is asked, automation stays paused")
    return incident


def breaker_snapshot(breaker: CircuitBreaker) -> dict:
    return {"state": breaker.state, "threshold_pct": breaker.threshold_pct, "window_s": breaker.window_s,
            "min_nodes": breaker.min_nodes, "incident": breaker.incident_id, "tripped_at": breaker.tripped_at}


def breaker_reset(*, breaker: CircuitBreaker, actor, note: str = "", now: datetime | None = None) -> CircuitBreaker:
    """Close a breaker (an operator's decision): its mass-failure incident resolves, paused incidents resume and
    queued ones are admitted again. Closing a closed breaker changes nothing."""
    from .engine import incident_advance, incident_close, incident_lock, incidents_admit_safely

    now = now or timezone.now()
    with transaction.atomic():
        breaker = CircuitBreaker.objects.select_for_update().get(pk=breaker.pk)
        if breaker.state == BreakerState.CLOSED:
            return breaker
        before = breaker_snapshot(breaker)
        label = getattr(actor, "username", "") or str(actor or "engine")
        breaker.state, breaker.reset_at, breaker.reset_by, breaker.reset_note = BreakerState.CLOSED, now, label, \
            note[:300]
        breaker.save()
        audit_record(actor=actor, action=AuditEntry.Action.ACTION, instance=breaker, before=before,
                     after=breaker_snapshot(breaker), note=f"circuit breaker reset: {note}"[:200])
        if breaker.incident_id is not None:
            mass = incident_lock(breaker.incident_id)
            if mass is not None and mass.is_open:
                timeline_add(mass, TimelineKind.BREAKER_RESET, f"circuit breaker closed by {label}: {note}", at=now,
                             actor=actor)
                incident_close(mass, IncidentState.RESOLVED, f"circuit breaker closed by {label}", now=now,
                               actor=actor)
        scope = Q(pool_id=breaker.pool_id) if breaker.scope == BreakerScope.POOL else Q(site_id=breaker.site_id)
        for paused_id in Incident.objects.filter(scope, state=IncidentState.PAUSED).values_list("pk", flat=True):
            incident = incident_lock(paused_id)
            if blocking_breaker(pool_id=incident.pool_id, site_id=incident.site_id) is not None:
                continue  # the other scope's breaker still holds it
            timeline_add(incident, TimelineKind.RESUMED, f"resumed: the {breaker.scope} circuit breaker was closed "
                                                         f"by {label}", at=now, actor=actor)
            incident_set_state(incident, IncidentState.RUNNING)
            incident_advance(incident, now=now)
        pools = [breaker.pool_id] if breaker.scope == BreakerScope.POOL else list(
            Pool.objects.filter(site_id=breaker.site_id).values_list("pk", flat=True))
        for pool_id in pools:
            transaction.on_commit(lambda p=pool_id: incidents_admit_safely(p), robust=True)
    return breaker
