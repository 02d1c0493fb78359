"""The periodic sweep (beat): what no event triggered, or what a lost worker left behind.

* intake of findings not decided yet (findings opened outside a worker cycle, snoozes that ended);
* steps whose SLA ran out (→ the step fails and its on-failure rule applies);
* steps due: pending ones whose back-off or window passed, waiting ones due for a poll, running ones whose
  worker's lease expired (resumed with the same idempotency key);
* incidents that lost their way (started, but no open step);
* admission of queued incidents, per pool.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from ..choices import ACTIVE_STATES, IncidentState, StepStatus
from ..models import Incident, StepRun
from .engine import incident_advance, incident_lock, incidents_admit_safely, reenqueue_after, run_enqueue, run_fail
from .intake import findings_intake

logger = logging.getLogger(__name__)
BATCH = 500


def remediation_sweep(*, now: datetime | None = None) -> dict:
    now = now or timezone.now()
    result = {"intake": findings_intake(now=now)["processed"], "timed_out": 0, "enqueued": 0, "advanced": 0,
              "admitted": 0}
    for run_id in StepRun.objects.filter(status=StepStatus.WAITING, deadline_at__lte=now).values_list(
            "pk", flat=True)[:BATCH]:
        result["timed_out"] += _time_out(run_id, now=now)

    stale = Q(enqueued_at__isnull=True) | Q(enqueued_at__lte=now - reenqueue_after())
    # A running step whose lease ran out lost its worker (no heartbeat): hand it over at once, unless it was
    # handed over already since the lease ran out.
    lost_worker = Q(status=StepStatus.RUNNING, lease_until__lte=now) & (
        Q(enqueued_at__isnull=True) | Q(enqueued_at__lte=F("lease_until")))
    due = (Q(status=StepStatus.WAITING, next_poll_at__lte=now) & stale) | lost_worker
    for run_id in StepRun.objects.filter(due, incident__state__in=sorted(ACTIVE_STATES)).values_list(
            "pk", flat=True)[:BATCH]:
        with transaction.atomic():
            run = StepRun.objects.select_for_update().get(pk=run_id)
            run_enqueue(run, now=now)
            result["enqueued"] += 1

    pending = StepRun.objects.filter(status=StepStatus.PENDING).filter(
        Q(not_before__isnull=True) | Q(not_before__lte=now)).filter(stale).filter(
        incident__state__in=[IncidentState.RUNNING, IncidentState.WAITING, IncidentState.PAUSED])
    lost = Incident.objects.filter(state__in=[IncidentState.RUNNING, IncidentState.WAITING]).exclude(
        step_runs__status__in=[StepStatus.PENDING, StepStatus.RUNNING, StepStatus.WAITING,
                               StepStatus.AWAITING_APPROVAL])
    incident_ids = set(pending.values_list("incident_id", flat=True)[:BATCH]) | set(
        lost.values_list("pk", flat=True)[:BATCH])
    for incident_id in sorted(incident_ids):
        with transaction.atomic():
            incident = incident_lock(incident_id)
            if incident is not None:
                incident_advance(incident, now=now)
                result["advanced"] += 1

    for pool_id in set(Incident.objects.filter(state=IncidentState.QUEUED).values_list("pool_id", flat=True)):
        incidents_admit_safely(pool_id)
        result["admitted"] += 1
    return result


def _time_out(run_id: int, *, now: datetime) -> int:
    with transaction.atomic():
        run = StepRun.objects.filter(pk=run_id).first()
        if run is None:
            return 0
        incident = incident_lock(run.incident_id)
        run = StepRun.objects.get(pk=run_id)
        if (incident is None or not incident.is_open or run.status != StepStatus.WAITING
                or run.step_index != incident.current_step or run.deadline_at is None or run.deadline_at > now):
            return 0
        timeout = incident.plan[run.step_index].get("timeout_s")
        run_fail(incident, run, now=now, actor="engine",
                 message=f"timed out: not finished within {timeout} s (the step's SLA)"
                 + (f"; last state: {run.message}" if run.message else ""))
    return 1
