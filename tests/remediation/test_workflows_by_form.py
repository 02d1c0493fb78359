"""The same Xid 79 leads to different work on each delivery form; each workflow runs to its end with the manual
executor, and the timeline shows every step."""

from datetime import timedelta

import pytest

from fleet.inventory.models import Node
from fleet.remediation.choices import IncidentState, StepStatus, TimelineKind
from fleet.remediation.models import FindingIntake, Incident, StepRun
from fleet.remediation.services.actions import incident_step_complete
from tests.factories import UserFactory
from tests.health.factories import T0

from .helpers import fault_and_intake, node_in, pool_for, reboot, report, tick, trigger, walk

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator():
    return UserFactory(username="op", role="operator")


def _kinds(incident):
    return [(e.kind, e.step_kind) for e in incident.timeline.all()]


def test_owned_metal_reboots_verifies_and_returns(operator):
    pool = pool_for("bare_metal_owned")
    node = node_in(pool)
    fault_and_intake([node])
    incident = Incident.objects.get(node=node)
    assert incident.workflow.slug == "owned-reboot"
    assert (incident.delivery_form, incident.layer, incident.responsible_party) == (
        "bare_metal_owned", "hardware", "hardware_vendor")
    assert incident.cause == "xid:79" and incident.cause_kind == "xid"
    assert incident.policy.priority == 70 and incident.policy_version == 1
    assert incident.state == IncidentState.RUNNING
    assert FindingIntake.objects.get(finding=trigger(incident)).outcome == "opened"

    def on_step(run, at):
        if run.kind == "reboot" and run.status == StepStatus.WAITING:
            reboot(node, at=at)
        if run.kind == "verify":
            report(node, at=at)

    walk(incident, operator, at=T0, on_step=on_step)
    incident.refresh_from_db()
    assert incident.state == IncidentState.RESOLVED, incident.state_reason
    kinds = [run.kind for run in StepRun.objects.filter(incident=incident, status="done")]
    assert kinds == ["cordon", "drain", "collect_evidence", "reboot", "run_diagnostics", "verify", "return_to_service"]
    done = [k for k, step in _kinds(incident) if k == TimelineKind.STEP_DONE]
    assert len(done) == 7
    assert incident.evidence.count() == 1
    verify = StepRun.objects.get(incident=incident, kind="verify")
    assert {g["name"] for g in verify.output["gates"]} == {"reporting", "baseline", "quiet"}
    node.refresh_from_db()
    assert node.state == "active"


def test_cloud_replaces_the_instance_and_retires_the_old_node(operator, django_capture_on_commit_callbacks):
    pool = pool_for("cloud_dedicated")
    node = node_in(pool)
    fault_and_intake([node])
    incident = Incident.objects.get(node=node)
    assert incident.workflow.slug == "cloud-replace"
    assert incident.responsible_party == "provider"
    replacement = {}

    def on_step(run, at):
        if run.kind == "verify" and "node" not in replacement:
            with django_capture_on_commit_callbacks(execute=True):
                replacement["node"] = node_in(pool)
            report(replacement["node"], at=at)

    walk(incident, operator, at=T0, on_step=on_step)
    incident.refresh_from_db()
    assert incident.state == IncidentState.RESOLVED, incident.state_reason
    assert incident.replacement_node == replacement["node"]
    retire = StepRun.objects.get(incident=incident, kind="retire")
    assert retire.approved_by == "op"
    assert Node.objects.get(pk=node.pk).state == "retired"
    assert TimelineKind.REPLACEMENT_LINKED in [k for k, _ in _kinds(incident)]
    approved = incident.timeline.get(kind=TimelineKind.APPROVED)
    assert approved.actor_label == "op"


def test_hosted_metal_waits_for_the_provider(operator):
    pool = pool_for("bare_metal_hosted")
    node = node_in(pool)
    fault_and_intake([node])
    incident = Incident.objects.get(node=node)
    assert incident.workflow.slug == "hosted-hardware-ticket"
    waited = []

    def on_step(run, at):
        if run.kind == "await_external" and run.status == StepStatus.WAITING:
            waited.append(run.waiting_on)
            reboot(node, at=at)  # the provider repaired it
        if run.kind == "verify":
            report(node, at=at)

    walk(incident, operator, at=T0, on_step=on_step)
    incident.refresh_from_db()
    assert incident.state == IncidentState.RESOLVED
    assert waited == ["provider"]
    assert [r.kind for r in StepRun.objects.filter(incident=incident, status="done")] == [
        "cordon", "drain", "collect_evidence", "open_ticket", "await_external", "run_diagnostics", "verify",
        "return_to_service"]


def test_verify_holds_until_the_gates_pass(operator):
    pool = pool_for("bare_metal_owned")
    node = node_in(pool)
    fault_and_intake([node])
    incident = Incident.objects.get(node=node)
    at = T0 + timedelta(minutes=1)

    def on_step(run, now):
        if run.kind == "verify":
            raise StopIteration

    with pytest.raises(StopIteration):
        walk(incident, operator, at=at, on_step=on_step)
    # The operator says the agent's smoke test passed, but the Xid finding is still open: the step waits.
    tick(incident, at=at + timedelta(minutes=5))
    run = StepRun.objects.get(incident=incident, kind="verify")
    incident_step_complete(incident_id=incident.pk, step_index=run.step_index, actor=operator,
                           now=at + timedelta(minutes=6))
    run.refresh_from_db()
    incident.refresh_from_db()
    assert run.status == StepStatus.WAITING and run.executor_done
    assert run.waiting_on == "verification"
    assert "critical finding(s) open: xid" in run.message
    assert incident.state == IncidentState.WAITING
