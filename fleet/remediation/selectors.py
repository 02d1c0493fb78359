"""Read-side queries of remediation: incident lists and details, queue positions, pool overviews, metrics."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Count, F, Q, QuerySet
from django.utils import timezone

from .choices import ACTIVE_STATES, OPEN_STATES, CauseKind, IncidentState
from .models import CircuitBreaker, Incident, PoolRemediationSettings, StepRun

MTTR_WINDOW = timedelta(days=30)
REMEDIATIONS_WINDOW = timedelta(days=7)


def incident_list() -> QuerySet[Incident]:
    return Incident.objects.select_related("node", "pool", "site", "provider", "workflow", "policy",
                                           "replacement_node")


def queue_position(incident: Incident) -> int | None:
    """1-based place among its pool's queued incidents (oldest first), or None when not queued."""
    if incident.state != IncidentState.QUEUED:
        return None
    ahead = Incident.objects.filter(pool_id=incident.pool_id, state=IncidentState.QUEUED).filter(
        Q(opened_at__lt=incident.opened_at) | Q(opened_at=incident.opened_at, pk__lt=incident.pk)).count()
    return ahead + 1


def plan_with_status(incident: Incident) -> list[dict]:
    """The plan's steps, each with the state of its latest attempt."""
    latest: dict[int, StepRun] = {}
    for run in StepRun.objects.filter(incident=incident).order_by("step_index", "attempt"):
        latest[run.step_index] = run
    rows = []
    for index, spec in enumerate(incident.plan):
        run = latest.get(index)
        rows.append({"index": index, "kind": spec["kind"], "title": spec.get("title", ""),
                     "params": spec.get("params") or {}, "timeout_s": spec.get("timeout_s"),
                     "on_failure": spec.get("on_failure") or {}, "requires_approval": bool(
                         run.requires_approval if run else spec.get("requires_approval")),
                     "status": run.status if run else "", "attempt": run.attempt if run else 0,
                     "executor": run.executor if run else "", "waiting_on": run.waiting_on if run else "",
                     "message": run.message if run else "", "current": index == incident.current_step
                     and incident.state in OPEN_STATES})
    return rows


def pools_overview() -> list[dict]:
    """Per pool: remediation slots in use, the queue, the breaker, dry run (the console's overview)."""
    from fleet.inventory.models import Pool

    active = dict(Incident.objects.filter(state__in=sorted(ACTIVE_STATES), dry_run=False, node__isnull=False)
                  .values("pool_id").annotate(n=Count("node_id", distinct=True)).values_list("pool_id", "n"))
    queued = dict(Incident.objects.filter(state=IncidentState.QUEUED).values("pool_id").annotate(n=Count("pk"))
                  .values_list("pool_id", "n"))
    breakers = {b.pool_id: b for b in CircuitBreaker.objects.filter(pool__isnull=False)}
    settings = {s.pool_id: s for s in PoolRemediationSettings.objects.all()}
    rows = []
    for pool in Pool.objects.order_by("name"):
        breaker, row_settings = breakers.get(pool.pk), settings.get(pool.pk)
        rows.append({"pool": pool.pk, "name": pool.name,
                     "max_concurrent_replacements": pool.max_concurrent_replacements,
                     "active_nodes": active.get(pool.pk, 0), "queued": queued.get(pool.pk, 0),
                     "dry_run": bool(row_settings and row_settings.dry_run),
                     "breaker_id": breaker.pk if breaker else None,
                     "breaker_state": breaker.state if breaker else "closed",
                     "breaker_incident": breaker.incident.key if breaker and breaker.incident_id and
                     breaker.state == "open" else None})
    return rows


def incidents_open_by_state_and_cause() -> dict[tuple[str, str], int]:
    rows = (Incident.objects.filter(state__in=sorted(OPEN_STATES)).order_by().values("state", "cause_kind")
            .annotate(n=Count("pk")).values_list("state", "cause_kind", "n"))
    counts = {(state, cause): 0 for state in sorted(OPEN_STATES) for cause in CauseKind.values}
    for state, cause, n in rows:
        counts[(state, cause)] = n
    return counts


def mttr_by_provider_and_cause(*, now: datetime | None = None) -> dict[tuple[str, str], tuple[float, int]]:
    """Mean seconds from opening to resolution of incidents resolved in the last 30 days (dry runs excluded),
    with how many there were, per provider and cause kind."""
    now = now or timezone.now()
    rows = (Incident.objects.filter(state=IncidentState.RESOLVED, dry_run=False, closed_at__gte=now - MTTR_WINDOW)
            .annotate(took=F("closed_at") - F("opened_at")).values_list("provider__name", "cause_kind", "took"))
    sums: dict[tuple[str, str], list[float]] = {}
    for provider, cause, took in rows:
        sums.setdefault((provider or "", cause), []).append(took.total_seconds())
    return {key: (sum(values) / len(values), len(values)) for key, values in sums.items()}


def remediations_per_node(*, now: datetime | None = None) -> dict[str, int]:
    """Remediations started per node in the last 7 days (the window of the repeat-offender escalation)."""
    now = now or timezone.now()
    rows = (Incident.objects.filter(started_at__gte=now - REMEDIATIONS_WINDOW, dry_run=False, node__isnull=False)
            .values("node__hostname").annotate(n=Count("pk")).values_list("node__hostname", "n"))
    return dict(rows)


def breakers_open() -> list[tuple[str, str, int]]:
    return [(b.scope, str(b.pool or b.site), 1 if b.state == "open" else 0)
            for b in CircuitBreaker.objects.select_related("pool", "site")]
