"""Done-when for DCGM diagnostics as gates: the real agent (the `fleet-agent run` daemon, on simulated NVML, with a
fake `dcgmi` on its path replaying recorded `dcgmi diag -j` outputs) against the live API. A remediation workflow's
`run_diagnostics` step goes to the node through the action channel (`agent` executor); the result gates the next
step — a pass lets the workflow go on, a failed test stops it with the node cordoned — and the failed test becomes a
`dcgm_diag_failed` finding (step, layer, party, headline) read back through the live API."""

from __future__ import annotations

import shutil
import threading
import time
import uuid
from pathlib import Path

import pytest
import requests
from django.utils import timezone

from fleet.executors.models import AgentAction
from fleet.health.services.evaluation import evaluate
from fleet.inventory.models import Node
from fleet.remediation.choices import StepStatus
from fleet.remediation.models import Incident, PoolRemediationSettings, StepRun
from fleet.remediation.services.actions import incident_step_complete
from fleet.remediation.services.engine import current_run, step_execute
from fleet.telemetry.models import NodeStatus
from fleet.telemetry.services.enrollment import enrollment_token_create
from fleet_agent.client import ControlPlaneClient
from fleet_agent.config import load_config
from fleet_agent.credentials import credential_path
from fleet_agent.daemon import Daemon
from fleet_agent.enroll import enroll
from fleet_agent.simnvml import SimulatedGpu, SimulatedNvml
from tests.agents import fake_dcgmi
from tests.factories import PoolFactory, ProviderFactory, UserFactory
from tests.processes import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

FIXTURES = Path(__file__).parents[1] / "agents" / "fixtures"


@pytest.fixture
def diag_node(live_server, tmp_path, seeded_remediation, token_for):
    """An enrolled own-metal node whose agent allows only `dcgm_diag`; its dcgmi passes level 1 and fails the
    memory test on GPU 5 at levels 2 and 3."""
    operator = UserFactory(username="diag-op", role="operator")
    provider = ProviderFactory(kind="own", cloud="")
    pool = PoolFactory(provider=provider, delivery_form="bare_metal_owned", billing_mode="reserved", gpus_per_node=8)
    PoolRemediationSettings.objects.update_or_create(pool=pool, defaults={"executors": ["agent"],
                                                                          "verify_quiet_period_s": 0})
    _, token = enrollment_token_create(actor=operator, name="diag", provider=provider, pool=pool,
                                       delivery_form="bare_metal_owned", billing_mode="reserved")
    proc = tmp_path / "proc"
    shutil.copytree(FIXTURES / "proc" / "t0", proc)
    (proc / "sys/kernel/random/boot_id").write_text(f"{uuid.uuid4()}\n")
    dcgmi = fake_dcgmi.install(tmp_path / "bin", {1: ("dcgm3_r2_pass.json", 0),
                                                  2: ("dcgm4_r3_8gpu_memory_fail.json", 226),
                                                  3: ("dcgm4_r3_8gpu_memory_fail.json", 226)})
    config = load_config(config_file=None, environ={}, flags={
        "server": live_server.url, "state_dir": str(tmp_path / "state"), "interval_s": "1", "kernel_log": "off",
        "cloud": "none", "nvml_events": "off", "proc_root": str(proc), "host_root": str(FIXTURES / "host"),
        "stack_refresh_s": "3600", "expected_gpus": "8", "dcgmi": str(dcgmi)})
    config.values["actions_allow"] = ["dcgm_diag"]
    facts = {"machine_id": uuid.uuid4().hex, "hostname": "diag-01", "agent_version": "0.1.0", "gpu_count": 8,
             "gpu_model": "NVIDIA H100 80GB HBM3"}
    enroll(ControlPlaneClient(live_server.url), token, facts, credential_file=credential_path(tmp_path / "state"))
    nvml = SimulatedNvml([SimulatedGpu.from_model("H100-SXM-80GB", i, node_key="diag") for i in range(8)])
    daemon = Daemon(config, nvml_module=nvml)
    runner = threading.Thread(target=daemon.run, daemon=True)
    runner.start()
    node = Node.objects.get()
    wait_for(lambda: NodeStatus.objects.filter(node=node).exists(), timeout=30, what="the agent's first report")
    _, key = token_for("operator")
    api = requests.Session()
    api.headers["Authorization"] = f"Token {key}"
    node.api = lambda path: api.get(f"{live_server.url}/api/v1/{path}", timeout=10)
    node.post = lambda path, body: api.post(f"{live_server.url}/api/v1/{path}", json=body, timeout=10)
    node.bin = tmp_path / "bin"
    node.sim_gpus = nvml.gpus
    yield node
    daemon.stop_event.set()
    runner.join(timeout=20)


def run_until(incident_id: int, operator, done, *, timeout: float = 120.0) -> Incident:
    """Act as the worker (execute due steps, poll waiting ones) and as an operator (complete what waits for a
    person) until `done(incident)`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        incident = Incident.objects.get(pk=incident_id)
        if done(incident):
            return incident
        run = current_run(incident)
        now = timezone.now()
        if run is None or run.status in (StepStatus.DONE, StepStatus.FAILED):
            time.sleep(0.2)
        elif run.status == StepStatus.PENDING:
            step_execute(incident_id=incident_id, step_index=run.step_index, attempt=run.attempt, now=now)
        elif run.status == StepStatus.WAITING and not run.executor_done and run.next_poll_at is None:
            incident_step_complete(incident_id=incident_id, step_index=run.step_index, actor=operator,
                                   note=f"{run.kind} done by hand", now=now)
        elif run.status == StepStatus.WAITING:
            StepRun.objects.filter(pk=run.pk).update(next_poll_at=now)
            step_execute(incident_id=incident_id, step_index=run.step_index, attempt=run.attempt, now=now)
            time.sleep(0.3)
        else:
            time.sleep(0.2)
    incident = Incident.objects.get(pk=incident_id)
    raise AssertionError(f"{incident.key}: {incident.state} {incident.state_reason}")


def test_a_passing_level_1_gate_lets_the_enrolment_workflow_go_on(diag_node):
    operator = UserFactory(username="diag-op-2", role="operator")
    opened = diag_node.post("incidents/", {"node": diag_node.pk, "workflow": "enrolment-diagnostics",
                                           "note": "new node"})
    assert opened.status_code == 201, opened.text
    incident = run_until(opened.json()["id"], operator, lambda i: not i.is_open)
    assert incident.state == "resolved", incident.state_reason
    gate = StepRun.objects.get(incident=incident, kind="run_diagnostics", status="done")
    assert gate.executor == "agent" and gate.output["dcgm_outcome"] == "pass" and gate.output["level"] == 1
    assert "DCGM diagnostic level 1 passed" in gate.message
    assert "diag -r 1 -j" in fake_dcgmi.calls(diag_node.bin)
    action = AgentAction.objects.get(node=diag_node, kind="dcgm_diag")
    assert action.state == "done" and action.params == {"level": 1}
    assert diag_node.api(f"findings/?node={diag_node.pk}&rule=dcgm_diag_failed").json()["count"] == 0


def test_a_failed_level_2_gate_stops_the_workflow_and_the_test_becomes_a_hardware_finding(diag_node):
    operator = UserFactory(username="diag-op-3", role="operator")
    opened = diag_node.post("incidents/", {"node": diag_node.pk, "workflow": "job-failed-diagnostics",
                                           "note": "job 4711 failed"})
    assert opened.status_code == 201, opened.text
    incident = run_until(opened.json()["id"], operator, lambda i: i.state == "needs_attention")
    gate = StepRun.objects.get(incident=incident, kind="run_diagnostics")
    assert gate.status == "failed" and "memory (GPU 5)" in gate.message and gate.output["dcgm_outcome"] == "fail"
    assert not StepRun.objects.filter(incident=incident, kind="return_to_service").exists()  # stopped at the gate
    assert Node.objects.get(pk=diag_node.pk).state == "cordoned"

    # The run's diag event came in with the outcome's report; the health engine reads it.
    evaluate(node_ids=[diag_node.pk], now=timezone.now())
    findings = diag_node.api(f"findings/?node={diag_node.pk}&rule=dcgm_diag_failed&state=open").json()["results"]
    (finding,) = findings
    assert (finding["step"], finding["layer"], finding["responsible_party"], finding["severity"]) == (
        "platform_hardware", "hardware", "hardware_vendor", "critical")
    assert "test 'memory' failed on GPU 5: Found 2 faulty memory elements on GPU 5" in finding["summary"]
    assert finding["gpu"] is not None
    triage = diag_node.api(f"nodes/{diag_node.pk}/triage/").json()
    assert triage["headline"].startswith("Step 4 — DCGM diagnostic level 2") and "GPU 5" in triage["headline"]
