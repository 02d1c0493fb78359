"""The action channel, server side: actions ride the answer to a node's reports, signed for that node; outcomes
count only for that node's open actions, first outcome wins; expiry; the API; the `agent` executor."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from fleet.executors import interface as steps
from fleet.executors.backends.agent import AgentExecutor
from fleet.executors.choices import AgentActionState
from fleet.executors.models import AgentAction
from fleet.executors.services.agent_actions import agent_action_request
from fleet.inventory.models import Node
from fleet.telemetry.models import NodeStatus
from fleet_agent.protocol import action_signature, action_signing_key
from tests.telemetry.reports import ReportBuilder

pytestmark = pytest.mark.django_db


def outcome(action_id, result="done", **extra):
    return {"id": str(action_id), "kind": "collect_evidence", "result": result, "exit_status": 0,
            "message": "ok", "stdout_tail": "", "stderr_tail": "", "duration_s": 0.5, "started_at": None,
            "finished_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"), **extra}


def test_open_actions_ride_the_answer_signed_for_the_node(enroll):
    agent = enroll()
    node = Node.objects.get(pk=agent.node_id)
    builder = ReportBuilder(agent.node_id)
    assert "actions" not in agent.send(builder.report()).json()  # nothing open: the answer is as before

    action, created = agent_action_request(node=node, kind="gpu_reset", params={"gpu_index": 2}, actor=None,
                                           incident_key="INC-1")
    assert created
    answer = agent.send(builder.report()).json()
    [sent] = answer["actions"]
    assert (sent["id"], sent["kind"], sent["params"], sent["node_id"]) == \
        (str(action.public_id), "gpu_reset", {"gpu_index": 2}, node.pk)
    key = action_signing_key(agent.credential)
    assert sent["signature"] == action_signature(key, sent)
    assert sent["signature"] != action_signature(key, {**sent, "params": {"gpu_index": 3}})
    action.refresh_from_db()
    assert (action.state, action.deliveries) == (AgentActionState.DELIVERED, 1)

    # Sent again until an outcome comes back; then never again.
    assert agent.send(builder.report()).json()["actions"][0]["id"] == sent["id"]
    answer = agent.send(builder.report(action_results=[outcome(action.public_id, stdout_tail="reset ok")])).json()
    assert "actions" not in answer
    action.refresh_from_db()
    assert (action.state, action.stdout_tail, action.deliveries) == (AgentActionState.DONE, "reset ok", 2)


def test_outcomes_are_claims_only_for_the_nodes_own_open_actions(enroll):
    mine, other = enroll("m1", "a"), enroll("m2", "b")
    action, _ = agent_action_request(node=Node.objects.get(pk=mine.node_id), kind="reboot", params={}, actor=None)
    # Another node reporting an outcome for this action changes nothing.
    assert other.send(ReportBuilder(other.node_id).report(
        action_results=[outcome(action.public_id)])).status_code == 200
    action.refresh_from_db()
    assert action.state == AgentActionState.PENDING
    builder = ReportBuilder(mine.node_id)
    mine.send(builder.report(action_results=[outcome(action.public_id, "refused", message="not allowed"),
                                             outcome(uuid.uuid4())]))
    mine.send(builder.report(action_results=[outcome(action.public_id, "done")]))  # the first outcome wins
    action.refresh_from_db()
    assert (action.state, action.message) == (AgentActionState.REFUSED, "not allowed")


def test_a_bad_outcome_is_a_400_naming_the_field(enroll):
    agent = enroll()
    bad = ReportBuilder(agent.node_id).report(action_results=[{**outcome(uuid.uuid4()), "result": "exploded"}])
    answer = agent.send(bad)
    assert answer.status_code == 400
    assert any("action_results[0]" in field for field in answer.json()["error"]["fields"])


def test_expired_actions_are_not_handed_out(enroll):
    agent = enroll()
    node = Node.objects.get(pk=agent.node_id)
    old = datetime.now(UTC) - timedelta(hours=2)
    action, _ = agent_action_request(node=node, kind="verify", params={}, actor=None, now=old)
    assert "actions" not in agent.send(ReportBuilder(agent.node_id).report()).json()
    action.refresh_from_db()
    assert action.state == AgentActionState.EXPIRED


@pytest.mark.parametrize("kind, params, field", [
    ("format_disk", {}, "kind"), ("gpu_reset", {}, "params.gpu_index"), ("gpu_reset", {"gpu_index": 99},
                                                                          "params.gpu_index"),
    ("run_hook", {"name": "../x"}, "params.name"), ("reboot", {"now": True}, "params.now")])
def test_api_refuses_bad_actions(operator_api, enroll, kind, params, field):
    agent = enroll()
    answer = operator_api.post("/api/v1/agent-actions/", {"node": agent.node_id, "kind": kind, "params": params},
                               format="json")
    assert answer.status_code == 400, answer.json()
    assert field in answer.json()["error"]["fields"]
    assert not AgentAction.objects.exists()


def test_api_queue_list_cancel(operator_api, viewer_api, enroll):
    agent = enroll()
    assert viewer_api.post("/api/v1/agent-actions/", {"node": agent.node_id, "kind": "verify"},
                           format="json").status_code == 403
    created = operator_api.post("/api/v1/agent-actions/", {"node": agent.node_id, "kind": "run_hook",
                                                           "params": {"name": "drain"}, "ttl_s": 600}, format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert (body["state"], body["params"], body["requested_by"]) == ("pending", {"name": "drain", "timeout_s": 600},
                                                                     "operator-user")
    listed = operator_api.get(f"/api/v1/agent-actions/?node={agent.node_id}").json()
    assert [row["id"] for row in listed["results"]] == [body["id"]]
    cancelled = operator_api.post(f"/api/v1/agent-actions/{body['id']}/cancel/")
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    again = operator_api.post(f"/api/v1/agent-actions/{body['id']}/cancel/")
    assert again.status_code == 409
    assert "actions" not in agent.send(ReportBuilder(agent.node_id).report()).json()


def ctx(node_id, kind, *, attempt=1, params=None, facts=None, dry_run=False):
    return steps.StepContext(incident_id=1, incident_key="INC-3", node_id=node_id, step_index=1, attempt=attempt,
                             kind=kind, params=params or {}, dry_run=dry_run,
                             idempotency_key=steps.idempotency_key("INC-3", 1, attempt), facts=facts or {})


def test_agent_executor_waits_for_the_outcome(enroll):
    agent = enroll()
    executor = steps.executor_named("agent")
    assert isinstance(executor, AgentExecutor)
    started = executor.start(ctx(agent.node_id, "reset_gpu", facts={"gpu_index": 1}))
    assert (started.status, started.waiting_on) == ("waiting", "executor") and started.retry_after
    action = AgentAction.objects.get()
    assert (action.kind, action.params, action.incident_key) == ("gpu_reset", {"gpu_index": 1}, "INC-3")
    assert executor.start(ctx(agent.node_id, "reset_gpu", facts={"gpu_index": 1})).status == "waiting"
    assert AgentAction.objects.count() == 1  # idempotent by the step key
    builder = ReportBuilder(agent.node_id)
    agent.send(builder.report())
    agent.send(builder.report(action_results=[outcome(action.public_id, exit_status=0)]))
    assert executor.poll(ctx(agent.node_id, "reset_gpu")).status == "done"


def test_agent_executor_refused_waits_for_an_operator_failed_fails(enroll):
    agent = enroll()
    executor = AgentExecutor()
    executor.start(ctx(agent.node_id, "reboot"))
    executor.start(ctx(agent.node_id, "verify", attempt=2))
    reboot, verify = AgentAction.objects.order_by("pk")
    builder = ReportBuilder(agent.node_id)
    agent.send(builder.report(action_results=[outcome(reboot.public_id, "refused", message="reboot is not allowed"),
                                              outcome(verify.public_id, "failed", exit_status=1,
                                                      message="a check failed")]))
    refused = executor.poll(ctx(agent.node_id, "reboot"))
    assert (refused.status, refused.retry_after, refused.waiting_on) == ("waiting", None, "operator")
    assert "refused" in refused.message and "not allowed" in refused.message
    failed = executor.poll(ctx(agent.node_id, "verify", attempt=2))
    assert failed.status == "failed" and "a check failed" in failed.message


def test_agent_executor_reboot_is_done_when_the_boot_id_changes(enroll):
    agent = enroll()
    builder = ReportBuilder(agent.node_id)
    agent.send(builder.report(with_inventory=True, boot_id="aaaaaaaa-0000-4000-8000-000000000001"))
    executor = AgentExecutor()
    executor.start(ctx(agent.node_id, "reboot"))
    action = AgentAction.objects.get()
    assert action.boot_id_before.startswith("aaaaaaaa")
    agent.send(builder.report(action_results=[outcome(action.public_id, kind="reboot")]))
    assert executor.poll(ctx(agent.node_id, "reboot")).status == "waiting"
    agent.send(builder.report(with_inventory=True, boot_id="bbbbbbbb-0000-4000-8000-000000000002"))
    assert NodeStatus.objects.get(node_id=agent.node_id).boot_id.startswith("bbbbbbbb")
    assert executor.poll(ctx(agent.node_id, "reboot")).status == "done"


def test_agent_executor_dry_run_and_hooks(enroll):
    agent = enroll()
    executor = AgentExecutor()
    dry = executor.start(ctx(agent.node_id, "drain", dry_run=True))
    assert dry.status == "done" and "dry run" in dry.message and not AgentAction.objects.exists()
    executor.start(ctx(agent.node_id, "drain", params={"hook": "slurm-drain"}))
    assert AgentAction.objects.get().params == {"name": "slurm-drain", "timeout_s": 600}
    assert "request_replacement" not in executor.kinds
