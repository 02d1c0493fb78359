"""/metrics carries remediation: incidents open by state and cause, MTTR per provider and cause, remediations per
node, breakers and queues."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from fleet.remediation.models import Incident, Workflow

from .helpers import fault_and_intake, node_in, pool_for

pytestmark = pytest.mark.django_db


def _samples(name: str) -> dict:
    text = Client().get("/metrics").content.decode()
    families = {family.name: family for family in text_string_to_metric_families(text)}
    return {tuple(sorted(s.labels.items())): s.value for s in families[name].samples}


def test_remediation_gauges():
    pool = pool_for("cloud_dedicated", max_concurrent=1)
    nodes = [node_in(pool) for _ in range(2)]
    fault_and_intake(nodes)
    running = Incident.objects.get(state="running").node
    now = timezone.now()
    workflow = Workflow.objects.get(slug="cloud-replace")
    for hours in (1, 3):
        Incident.objects.create(key=f"inc-done{hours}", node=running, pool=pool, provider=pool.provider,
                                cause_kind="xid", cause="xid:79", title="t", state="resolved", workflow=workflow,
                                opened_at=now - timedelta(hours=hours + 1), started_at=now - timedelta(hours=hours + 1),
                                closed_at=now - timedelta(hours=1), opened_by="policy")
    open_incidents = _samples("fleet_incidents_open")
    assert open_incidents[(("cause", "xid"), ("state", "running"))] == 1
    assert open_incidents[(("cause", "xid"), ("state", "queued"))] == 1
    assert open_incidents[(("cause", "manual"), ("state", "paused"))] == 0
    mttr = _samples("fleet_incident_mttr_seconds")
    assert mttr == {(("cause", "xid"), ("provider", pool.provider.name)): 2 * 3600.0}  # (1 h + 3 h) / 2
    per_node = _samples("fleet_node_remediations_7d")
    assert per_node[(("node", running.hostname),)] == 3  # 2 resolved + the one running
    assert _samples("fleet_remediation_queue_depth")[(("pool", pool.name),)] == 1
    assert _samples("fleet_circuit_breaker_open")[(("name", pool.name), ("scope", "pool"))] == 0
