"""Incident bookkeeping shared by intake, the engine and the operator actions: the timeline, events for other
apps, the facts a step's executor gets, opening and closing."""

from __future__ import annotations

import json
import secrets
from datetime import datetime

from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.urls import reverse

from fleet.inventory.choices import BASELINE_STACK_FIELDS
from fleet.inventory.models import Node
from fleet.inventory.selectors import node_baselines

from ..choices import (
    IncidentEventKind,
    IncidentState,
    TimelineKind,
)
from ..models import Incident, IncidentFinding, StepRun, TimelineEntry
from ..signals import IncidentEvent, incident_event, incident_event_committed

ENGINE = "engine"


def jsonable(data):
    """Round-trip through Django's encoder so datetimes and decimals store as JSON."""
    return json.loads(json.dumps(data, cls=DjangoJSONEncoder))


def incident_key() -> str:
    return f"inc-{secrets.token_hex(6)}"


def actor_label(actor) -> str:
    if actor is None:
        return ENGINE
    return getattr(actor, "username", "") or str(actor)


def timeline_add(incident: Incident, kind: str, message: str, *, at: datetime, actor=None,
                 run: StepRun | None = None, step_index: int | None = None, output: dict | None = None
                 ) -> TimelineEntry:
    user = actor if getattr(actor, "is_authenticated", False) else None
    return TimelineEntry.objects.create(
        incident=incident, at=at, kind=kind, actor=user, actor_label=actor_label(actor)[:150],
        step_index=run.step_index if run is not None else step_index,
        attempt=run.attempt if run is not None else None, step_kind=run.kind if run is not None else "",
        message=message[:1000], output=output or {})


def emit(incident: Incident, kind: str, *, at: datetime, run: StepRun | None = None, **detail) -> None:
    event = IncidentEvent(kind=kind, incident_id=incident.pk, incident_key=incident.key, state=incident.state,
                          at=at, node_id=incident.node_id,
                          step_index=run.step_index if run is not None else None,
                          step_kind=run.kind if run is not None else "",
                          step_status=run.status if run is not None else "", detail=detail)
    incident_event.send(sender=Incident, event=event)
    transaction.on_commit(lambda: incident_event_committed.send(sender=Incident, event=event))


def finding_attach(incident: Incident, finding, *, at: datetime, trigger: bool = False) -> bool:
    """Link a finding to an incident once; True when it was new."""
    _, created = IncidentFinding.objects.get_or_create(incident=incident, finding=finding,
                                                       defaults={"trigger": trigger, "attached_at": at})
    if created and not trigger:
        timeline_add(incident, TimelineKind.FINDING_ATTACHED, f"finding #{finding.pk} attached: {finding.summary}",
                     at=at, output={"finding": finding.pk, "rule": finding.rule.slug})
    return created


def incident_create(*, node: Node | None, cause_kind: str, cause: str, title: str, workflow, at: datetime,
                    opened_by: str, pool=None, site=None, provider=None, dry_run: bool = False,
                    boundary: dict | None = None, policy=None, policy_version: int | None = None,
                    policy_snapshot: dict | None = None, message: str = "", actor=None,
                    output: dict | None = None) -> Incident:
    """A new incident in state `queued`, its plan copied from the workflow, with the first timeline entry."""
    boundary = boundary or {}
    incident = Incident.objects.create(
        key=incident_key(), node=node, cause_kind=cause_kind, cause=cause[:100], title=title[:500],
        pool=pool if pool is not None else (node.pool if node is not None else None),
        site=site if site is not None else _node_site(node),
        provider=provider if provider is not None else (node.provider if node is not None else None),
        state=IncidentState.QUEUED, delivery_form=boundary.get("delivery_form", ""),
        layer=boundary.get("layer", ""), responsible_party=boundary.get("responsible_party", ""),
        responsibility_source=boundary.get("responsibility_source", ""), policy=policy,
        policy_version=policy_version, policy_snapshot=policy_snapshot or {}, workflow=workflow,
        plan=list(workflow.steps), dry_run=dry_run, opened_at=at, opened_by=opened_by[:150])
    timeline_add(incident, TimelineKind.OPENED, message or f"opened: {title}", at=at, actor=actor,
                 output={"workflow": workflow.slug, "workflow_version": workflow.version, "dry_run": dry_run,
                         **(output or {})})
    emit(incident, IncidentEventKind.OPENED, at=at)
    return incident


def _node_site(node: Node | None):
    """A node's site, else its pool's (the circuit breaker counts a node in the same site)."""
    if node is None:
        return None
    if node.site_id is not None:
        return node.site
    return node.pool.site if node.pool_id is not None else None


def incident_set_state(incident: Incident, state: str, *, reason: str = "", waiting_on: str = "") -> bool:
    """Change state, reason and what it waits for; True when anything changed (the caller saves)."""
    changed = (incident.state, incident.state_reason, incident.waiting_on) != (state, reason[:500], waiting_on)
    incident.state, incident.state_reason, incident.waiting_on = state, reason[:500], waiting_on
    return changed


def step_facts(incident: Incident, *, finding=None) -> dict:
    """What an executor (or a runbook) needs to know about the node, its pool and provider, and the fault."""
    from fleet.telemetry.models import NodeStatus

    facts: dict = {"incident_key": incident.key, "cause": incident.cause, "responsible_party":
                   incident.responsible_party, "layer": incident.layer, "title": incident.title,
                   "finding": incident.title,
                   "evidence_url": reverse("incident-evidence", args=[incident.pk])}
    node = incident.node
    if node is None:
        facts.update(hostname=f"pool {incident.pool or incident.site}", provider=str(incident.provider or "?"),
                     pool=str(incident.pool or ""), site=str(incident.site or ""))
        return facts
    node = Node.objects.select_related("provider", "pool", "site").get(pk=node.pk)
    facts.update(
        node_id=node.pk, hostname=node.hostname, instance_id=node.instance_id, instance_type=node.instance_type,
        machine_id=node.machine_id, delivery_form=node.delivery_form, billing_mode=node.billing_mode,
        provider=node.provider.name, provider_support_contact=node.provider.support_contact,
        cloud=node.provider.cloud, pool=node.pool.name if node.pool else "", pool_id=node.pool_id,
        site=node.site.name if node.site else "", region=node.site.region_code if node.site else "",
        labels=node.labels)
    if finding is None:
        link = incident.finding_links.filter(trigger=True).select_related("finding__gpu").first()
        finding = link.finding if link is not None else None
    if finding is not None:
        facts["finding"] = finding.summary
        facts["finding_id"] = finding.pk
        if finding.gpu is not None:
            facts.update(gpu_id=finding.gpu.pk, gpu_index=finding.gpu.index, gpu_serial=finding.gpu.serial,
                         gpu_uuid=finding.gpu.uuid, gpu_pci_bus_id=finding.gpu.pci_bus_id)
    baseline = node_baselines(nodes=[(node.pk, node.pool_id)]).get(node.pk)
    if baseline is not None:
        facts["baseline"] = {name: getattr(baseline, name) for name in BASELINE_STACK_FIELDS}
    deadline = NodeStatus.objects.filter(node=node).values_list("notice_deadline", flat=True).first()
    if deadline is not None:
        facts["notice_deadline"] = deadline.isoformat()
    if incident.replacement_node_id:
        facts["replacement_node_id"] = incident.replacement_node_id
        facts["replacement_hostname"] = incident.replacement_node.hostname
    return facts

