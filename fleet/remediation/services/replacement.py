"""A replacement node closes the loop: when a node enrols into a pool where an incident asked for a replacement,
it is linked to that incident (the oldest request first) and the waiting verify step checks it."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from fleet.inventory.models import Node

from ..choices import OPEN_STATES, StepStatus, TimelineKind
from ..models import Incident
from .engine import current_run, incident_lock, run_enqueue
from .incidents import timeline_add


def replacement_link(*, node_id: int, now: datetime | None = None) -> Incident | None:
    now = now or timezone.now()
    with transaction.atomic():
        node = Node.objects.filter(pk=node_id).first()
        if node is None or node.pool_id is None:
            return None
        if Incident.objects.filter(replacement_node=node).exists():
            return None
        candidate = (Incident.objects.filter(pool_id=node.pool_id, state__in=sorted(OPEN_STATES),
                                             replacement_requested_at__isnull=False, replacement_node__isnull=True)
                     .exclude(node_id=node.pk).order_by("replacement_requested_at", "pk")
                     .values_list("pk", flat=True).first())
        if candidate is None:
            return None
        incident = incident_lock(candidate)
        incident.replacement_node = node
        incident.save(update_fields=["replacement_node", "updated_at"])
        timeline_add(incident, TimelineKind.REPLACEMENT_LINKED,
                     f"replacement {node.hostname} enrolled into pool {node.pool} and is linked to this incident",
                     at=now, output={"replacement_node": node.pk, "hostname": node.hostname})
        run = current_run(incident)
        if run is not None and run.status == StepStatus.WAITING:
            run.next_poll_at = now
            run_enqueue(run, now=now)
    return incident
