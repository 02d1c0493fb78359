"""The `run_diagnostics` gate, server side: the agent executor asks for `dcgm_diag` at the step's level, on the node
or its replacement; the node's outcome decides the gate (pass, fail, no verdict, no DCGM, `require_dcgm`); the
API and workflow validation refuse bad levels with a 400 naming the field; the shipped workflows carry the gates,
and migration 0003 adds them only to workflows nobody edited."""

import json
from datetime import UTC, datetime

import pytest

from fleet.executors import interface as steps
from fleet.executors.backends.agent import AgentExecutor
from fleet.executors.models import AgentAction
from fleet.remediation.models import Workflow
from fleet.remediation.seed import WORKFLOWS, add_diagnostic_gates
from tests.telemetry.reports import ReportBuilder

pytestmark = pytest.mark.django_db


def ctx(node_id, *, params=None, facts=None, attempt=1):
    return steps.StepContext(incident_id=1, incident_key="INC-9", node_id=node_id, step_index=2, attempt=attempt,
                             kind="run_diagnostics", params=params or {}, dry_run=False,
                             idempotency_key=steps.idempotency_key("INC-9", 2, attempt), facts=facts or {})


def outcome(action, result, diag_outcome, message, exit_status=0):
    evidence = {"dcgm_diag_outcome": diag_outcome, "dcgm_diag_level": str(action.params["level"]),
                "dcgm_diag_summary": json.dumps({"outcome": diag_outcome, "failures": []})}
    return {"id": str(action.public_id), "kind": "dcgm_diag", "result": result, "exit_status": exit_status,
            "message": message, "stdout_tail": "", "stderr_tail": "", "duration_s": 12.0, "started_at": None,
            "finished_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"), "evidence": evidence}


@pytest.mark.parametrize("result, diag_outcome, params, status", [
    ("done", "pass", {"level": 2}, "done"),
    ("failed", "fail", {"level": 2}, "failed"),
    ("failed", "error", {"level": 2}, "failed"),            # dcgmi gave no verdict: the gate does not pass
    ("done", "unavailable", {"level": 1}, "done"),          # no DCGM on the node: no gate, said so
    ("done", "unavailable", {"level": 1, "require_dcgm": True}, "failed"),
    ("done", "fail", {"level": 3}, "failed"),               # a node claiming "done" without a pass is no pass
])
def test_the_nodes_outcome_decides_the_gate(enroll, result, diag_outcome, params, status):
    agent = enroll()
    executor = AgentExecutor()
    started = executor.start(ctx(agent.node_id, params=params))
    assert started.status == "waiting" and started.waiting_on == "executor"
    action = AgentAction.objects.get()
    assert (action.kind, action.params) == ("dcgm_diag", {"level": params["level"]})
    agent.send(ReportBuilder(agent.node_id).report(action_results=[
        outcome(action, result, diag_outcome, f"DCGM diagnostic level {params['level']}: {diag_outcome}")]))
    answer = executor.poll(ctx(agent.node_id, params=params))
    assert answer.status == status, answer.message
    assert answer.output["dcgm_outcome"] == diag_outcome and answer.output["level"] == params["level"]
    if diag_outcome == "unavailable" and status == "done":
        assert answer.output["skipped"] is True and answer.message.startswith("no gate")


def test_a_replacement_target_waits_for_the_replacement_then_asks_it(enroll):
    old, new = enroll(), enroll(machine_id="fedcba9876543210", hostname="gpu-b")
    executor = AgentExecutor()
    waiting = executor.start(ctx(old.node_id, params={"level": 1, "target": "replacement"}))
    assert (waiting.status, waiting.waiting_on) == ("waiting", "replacement") and not AgentAction.objects.exists()
    executor.start(ctx(old.node_id, params={"level": 1, "target": "replacement"},
                       facts={"replacement_node_id": new.node_id}))
    assert AgentAction.objects.get().node_id == new.node_id


def test_a_level_3_action_lives_long_enough_for_the_run():
    from fleet.executors.backends.agent import DIAG_TTL_S

    assert DIAG_TTL_S[3] >= 3 * 3600


@pytest.mark.parametrize("params", [{}, {"level": 4}, {"level": "1"}, {"level": True}, {"level": 1, "x": 2}])
def test_api_refuses_a_bad_level(operator_api, enroll, params):
    agent = enroll()
    answer = operator_api.post("/api/v1/agent-actions/", {"node": agent.node_id, "kind": "dcgm_diag",
                                                          "params": params}, format="json")
    assert answer.status_code == 400, answer.json()
    assert any(f.startswith("params.") for f in answer.json()["error"]["fields"])
    assert not AgentAction.objects.exists()


def test_api_queues_a_diagnostic(operator_api, enroll):
    agent = enroll()
    created = operator_api.post("/api/v1/agent-actions/", {"node": agent.node_id, "kind": "dcgm_diag",
                                                           "params": {"level": 3}}, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["params"] == {"level": 3}


@pytest.mark.parametrize("step, field", [
    ({"kind": "run_diagnostics", "params": {"level": 5}}, "steps[0].params.level"),
    ({"kind": "run_diagnostics", "params": {"level": "2"}}, "steps[0].params.level"),
    ({"kind": "run_diagnostics", "params": {"target": "other"}}, "steps[0].params.target"),
    ({"kind": "run_diagnostics", "params": {"require_dcgm": "yes"}}, "steps[0].params.require_dcgm"),
])
def test_workflow_validation_names_the_bad_parameter(operator_api, seeded_remediation, step, field):
    answer = operator_api.post("/api/v1/workflows/", {"slug": "diag-x", "name": "x", "steps": [step]}, format="json")
    assert answer.status_code == 400, answer.json()
    assert field in answer.json()["error"]["fields"]
    assert not Workflow.objects.filter(slug="diag-x").exists()


def test_the_shipped_workflows_gate_at_the_levels_nvidia_recommends(seeded_remediation):
    levels = {w.slug: [(s["params"].get("level"), s["params"].get("target"), s["on_failure"]["action"])
                       for s in w.steps if s["kind"] == "run_diagnostics"] for w in Workflow.objects.all()}
    assert levels["owned-reboot"] == [(1, None, "escalate")]      # after a reboot; fails → RMA
    assert levels["owned-gpu-reset"] == [(1, None, "escalate")]   # after a reset; fails → reboot
    assert levels["owned-rma"] == [(3, None, "wait")]             # before the RMA closes
    assert levels["hosted-hardware-ticket"] == [(3, None, "wait")]
    assert levels["cloud-replace"] == [(1, "replacement", "wait")]  # the replacement, at enrolment
    assert levels["job-failed-diagnostics"] == [(2, None, "wait")]  # after a failed job
    assert levels["enrolment-diagnostics"] == [(1, None, "wait")]
    rma = [s["kind"] for s in Workflow.objects.get(slug="owned-rma").steps]
    assert rma.index("run_diagnostics") == rma.index("await_external") + 1 and rma[-2:] == ["verify",
                                                                                             "return_to_service"]


def test_migration_adds_the_gates_only_to_workflows_nobody_edited(seeded_remediation):
    shipped = {w["slug"]: w for w in WORKFLOWS}
    old = [s for s in shipped["owned-reboot"]["steps"] if s["kind"] != "run_diagnostics"]
    Workflow.objects.filter(slug="owned-reboot").update(steps=old, version=1)
    edited = [s for s in shipped["owned-rma"]["steps"] if s["kind"] != "run_diagnostics"]
    Workflow.objects.filter(slug="owned-rma").update(steps=edited, version=3)
    Workflow.objects.filter(slug="job-failed-diagnostics").delete()
    add_diagnostic_gates(Workflow)
    reboot = Workflow.objects.get(slug="owned-reboot")
    assert reboot.version == 2 and "run_diagnostics" in [s["kind"] for s in reboot.steps]
    rma = Workflow.objects.get(slug="owned-rma")
    assert rma.version == 3 and "run_diagnostics" not in [s["kind"] for s in rma.steps]  # an operator's edit
    assert Workflow.objects.filter(slug="job-failed-diagnostics", built_in=True).exists()
