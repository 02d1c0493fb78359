"""The two-person rule through the API: whoever opened an incident, requested a step's attempt or last changed
its workflow cannot approve its destructive step; someone else can; a pool turns the rule off only explicitly;
each refusal is audited and the console gets who may not approve."""

import pytest
from django.db import transaction
from django.utils import timezone
from rest_framework.test import APIClient

from fleet.core.models import AuditEntry
from fleet.remediation.models import Incident, PoolRemediationSettings, StepRun
from fleet.remediation.services.engine import incident_advance, incident_lock
from tests.factories import UserFactory

from .helpers import fault_and_intake, node_in, pool_for

pytestmark = pytest.mark.django_db


def _client(username: str, role: str = "operator") -> APIClient:
    client = APIClient()
    client.force_authenticate(UserFactory(username=username, role=role))
    return client


def _at_the_retire_step(incident: Incident) -> StepRun:
    index = next(i for i, step in enumerate(incident.plan) if step["kind"] in ("retire", "terminate"))
    Incident.objects.filter(pk=incident.pk).update(current_step=index, state="running")
    with transaction.atomic():
        incident_advance(incident_lock(incident.pk), now=timezone.now())
    run = StepRun.objects.get(incident=incident, step_index=index)
    assert run.status == "awaiting_approval"
    return run


@pytest.fixture
def cloud_pool():
    return pool_for("cloud_dedicated")


def test_the_operator_who_opened_an_incident_cannot_approve_its_retirement(cloud_pool):
    alice, bob = _client("alice"), _client("bob")
    node = node_in(cloud_pool)
    response = alice.post("/api/v1/incidents/", {"node": node.pk, "workflow": "operator-replace"}, format="json")
    assert response.status_code == 201, response.content
    incident = Incident.objects.get(pk=response.json()["id"])
    run = _at_the_retire_step(incident)

    detail = bob.get(f"/api/v1/incidents/{incident.pk}/").json()
    assert detail["approval_rule"] == {"step_index": run.step_index, "two_person": True,
                                       "excluded": [{"username": "alice", "reason": "opened the incident"}]}
    refused = alice.post(f"/api/v1/incidents/{incident.pk}/approve/", {"step_index": run.step_index})
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["code"] == "two_person_rule" and "you opened the incident" in error["message"]
    run.refresh_from_db()
    assert run.status == "awaiting_approval" and run.approved_at is None
    assert AuditEntry.objects.filter(object_type="remediation.incident", actor_label="alice",
                                     note__startswith="approve refused: two-person rule").exists()

    approved = bob.post(f"/api/v1/incidents/{incident.pk}/approve/", {"step_index": run.step_index})
    assert approved.status_code == 200, approved.content
    run.refresh_from_db()
    assert run.approved_by == "bob"
    assert incident.timeline.filter(kind="approved", message__contains="two-person rule").exists()


def test_whoever_last_changed_the_workflow_cannot_approve_it(cloud_pool):
    from fleet.remediation.models import Workflow

    editor, other = _client("wf-editor", "admin"), _client("carol", "admin")
    workflow = Workflow.objects.get(slug="cloud-replace")
    steps = workflow.steps
    response = editor.patch(f"/api/v1/workflows/{workflow.slug}/", {"description": "reviewed"}, format="json")
    assert response.status_code == 200, response.content
    node = node_in(cloud_pool)
    fault_and_intake([node], at=timezone.now())
    incident = Incident.objects.get(node=node)
    assert incident.workflow.slug == "cloud-replace" and incident.workflow.steps == steps
    run = _at_the_retire_step(incident)
    refused = editor.post(f"/api/v1/incidents/{incident.pk}/approve/", {"step_index": run.step_index})
    assert refused.status_code == 403
    assert "last changed the workflow cloud-replace" in refused.json()["error"]["message"]
    assert other.post(f"/api/v1/incidents/{incident.pk}/approve/", {"step_index": run.step_index}).status_code == 200


def test_an_automatic_incident_needs_no_second_person_and_a_pool_may_turn_the_rule_off(cloud_pool):
    alice = _client("alice")
    node = node_in(cloud_pool)
    fault_and_intake([node], at=timezone.now())  # opened by policy, workflow unchanged since it was seeded
    incident = Incident.objects.get(node=node)
    run = _at_the_retire_step(incident)
    assert alice.get(f"/api/v1/incidents/{incident.pk}/").json()["approval_rule"] is None
    assert alice.post(f"/api/v1/incidents/{incident.pk}/approve/", {"step_index": run.step_index}).status_code == 200

    admin = _client("an-admin", "admin")
    response = admin.patch(f"/api/v1/pool-remediation/{cloud_pool.pk}/", {"two_person_approval": False}, format="json")
    assert response.status_code == 200, response.content
    assert PoolRemediationSettings.objects.get(pool=cloud_pool).two_person_approval is False
    assert AuditEntry.objects.filter(object_type="remediation.poolremediationsettings",
                                     after__two_person_approval=False).exists()
    other = node_in(cloud_pool)
    opened = alice.post("/api/v1/incidents/", {"node": other.pk, "workflow": "operator-replace"}, format="json")
    incident = Incident.objects.get(pk=opened.json()["id"])
    run = _at_the_retire_step(incident)
    assert alice.post(f"/api/v1/incidents/{incident.pk}/approve/", {"step_index": run.step_index}).status_code == 200


def test_a_pool_can_add_step_kinds_to_the_rule(cloud_pool):
    admin = _client("an-admin", "admin")
    response = admin.patch(f"/api/v1/pool-remediation/{cloud_pool.pk}/", {"two_person_kinds": ["reboot"]},
                           format="json")
    assert response.status_code == 200 and response.json()["two_person_kinds"] == ["reboot"]
    bad = admin.patch(f"/api/v1/pool-remediation/{cloud_pool.pk}/", {"two_person_kinds": ["launch_missiles"]},
                      format="json")
    assert bad.status_code == 400 and "two_person_kinds" in str(bad.json()["error"]["fields"])
