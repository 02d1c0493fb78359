"""Done-when, end to end: for each delivery form, the real agent code (simulated NVML, kernel log, /proc) enrols
and raises Xid 79 through the live HTTP API; a real Celery worker evaluates, opens the incident with the workflow
of the responsible party, and runs it to the end — the manual (runbook) steps completed by an operator through
the API, the way a site without automation works. The timeline shows every step.

Side effects a human would cause are simulated on the node itself: a reboot is a new boot id in the agent's
/proc, a replacement is a second agent enrolling into the same pool.
"""

import json
import time
import uuid
from datetime import timedelta
from importlib import resources

import pytest
import requests

from fleet.health.models import Rule
from fleet.health.tasks import evaluate_nodes
from fleet.inventory.models import Baseline, Pool, Provider
from fleet.remediation.models import Incident, PoolRemediationSettings
from fleet.telemetry.services.enrollment import enrollment_token_create
from fleet_agent.simulator import SimulatedAgent, parse_scenario
from fleet_agent.timeutil import utc_now
from tests.factories import UserFactory
from tests.processes import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CASES = [
    # delivery form, simulator provider, provider kind, workflow, responsible party, plan
    ("cloud_dedicated", "aws", "cloud", "cloud-replace", "provider",
     ["cordon", "drain", "collect_evidence", "open_ticket", "request_replacement", "run_diagnostics", "verify",
      "retire"]),
    ("cloud_shared", "aws", "cloud", "cloud-replace", "provider",
     ["cordon", "drain", "collect_evidence", "open_ticket", "request_replacement", "run_diagnostics", "verify",
      "retire"]),
    ("bare_metal_hosted", "idc", "idc", "hosted-hardware-ticket", "provider",
     ["cordon", "drain", "collect_evidence", "open_ticket", "await_external", "run_diagnostics", "verify",
      "return_to_service"]),
    ("bare_metal_owned", "own", "own", "owned-reboot", "hardware_vendor",
     ["cordon", "drain", "collect_evidence", "reboot", "run_diagnostics", "verify", "return_to_service"]),
]


@pytest.fixture
def fast_rules(seeded_remediation):
    Rule.objects.update(duration_s=0, clear_hold_s=0)


def _scenario(provider: str, form: str, name: str):
    data = json.loads(resources.files("fleet_agent.scenarios").joinpath("xid.json").read_text())
    node = data["nodes"][0]
    node.update(provider=provider, delivery_form=form, billing_mode="on_demand", name=name)
    node["faults"] = [f for f in node["faults"] if f["code"] == 79]  # only the Xid 79
    return parse_scenario(data, name)


class Operator:
    """An operator using the REST API of the live server with an API token."""

    def __init__(self, base: str, key: str):
        self.base = base
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Token {key}"

    def get(self, path: str):
        response = self.session.get(f"{self.base}/api/v1/{path}", timeout=10)
        assert response.status_code == 200, response.text
        return response.json()

    def post(self, path: str, body: dict):
        response = self.session.post(f"{self.base}/api/v1/{path}", json=body, timeout=10)
        assert response.status_code == 200, response.text
        return response.json()


def _reboot(agent: SimulatedAgent) -> None:
    (agent.dir / "proc/sys/kernel/random/boot_id").write_text(f"{uuid.uuid4().hex}\n")


def _report(agent: SimulatedAgent, t: float) -> float:
    agent.step(t)
    assert agent.deliver(force=True)
    return t + 5


@pytest.mark.parametrize(("form", "provider", "kind", "workflow", "party", "plan"), CASES, ids=[c[0] for c in CASES])
def test_xid_79_runs_the_workflow_of_the_responsible_party_to_the_end(
        form, provider, kind, workflow, party, plan, live_server, celery_worker, fast_rules, token_for, tmp_path):
    provider_row = Provider.objects.create(name=f"{provider}-{form}", slug=f"{provider}-{form}".replace("_", "-"),
                                           kind=kind, cloud=provider if kind == "cloud" else "")
    loaded = _scenario(provider, form, f"xid-{form}")
    spec = loaded.nodes[0]
    pool = Pool.objects.create(name=f"pool-{form}", provider=provider_row, delivery_form=form,
                               billing_mode="on_demand", gpu_model=spec.gpu_model, gpus_per_node=spec.gpu_count)
    Baseline.objects.create(name="pinned", pool=pool, driver_version=spec.stack["driver_version"],
                            cuda_driver_version=spec.stack["cuda_driver_version"])
    PoolRemediationSettings.objects.filter(pool=pool).update(verify_quiet_period_s=0)
    _, token = enrollment_token_create(actor=UserFactory(role="operator"), name="scenario", provider=provider_row,
                                       pool=pool, delivery_form=form, billing_mode="on_demand")
    _, key = token_for("operator")
    operator = Operator(live_server.url, key)

    agent = SimulatedAgent.from_scenario(loaded, 0, work_dir=tmp_path / "node", start=utc_now() - timedelta(seconds=31))
    agents = [agent]
    try:
        node_id = agent.enroll(live_server.url, token).node_id
        agent.step(0)
        t = _report(agent, 31)  # the Xid 79 at 30 s
        evaluate_nodes.delay(node_ids=[node_id]).get(timeout=30)
        incident = wait_for(lambda: Incident.objects.filter(node_id=node_id).first(),
                            what=f"an incident (worker log: {celery_worker.log_path})")
        detail = operator.get(f"incidents/{incident.pk}/")
        assert detail["workflow"] == workflow
        assert detail["boundary"]["responsible_party"] == party
        assert detail["boundary"]["layer"] == "hardware" and detail["cause"] == "xid:79"
        assert [step["kind"] for step in detail["plan"]] == plan

        deadline = time.monotonic() + 180
        while detail["state"] not in ("resolved", "cancelled"):
            assert time.monotonic() < deadline, f"stuck: {detail['state']} {detail['state_reason']}"
            step = detail["plan"][detail["current_step"]]
            index = step["index"]
            if step["status"] == "awaiting_approval":
                detail = operator.post(f"incidents/{incident.pk}/approve/", {"step_index": index,
                                                                             "note": "approved in the test"})
            elif step["status"] == "waiting" and step["waiting_on"] != "verification":
                if step["kind"] in ("reboot", "await_external"):
                    _reboot(agent)  # we rebooted it / the provider repaired and restarted it
                    t = _report(agent, t)
                    evaluate_nodes.delay(node_ids=[node_id]).get(timeout=30)
                if step["kind"] == "verify":
                    if "replacement" in step["params"].get("target", ""):
                        replacement = SimulatedAgent.from_scenario(
                            _scenario(provider, form, f"replacement-{form}"), 0, work_dir=tmp_path / "replacement")
                        agents.append(replacement)
                        replacement.enroll(live_server.url, token)
                        replacement.step(0)
                        assert replacement.deliver(force=True)
                        wait_for(lambda: Incident.objects.get(pk=incident.pk).replacement_node_id,
                                 what="the replacement linked to the incident")
                    else:
                        t = _report(agent, t)
                detail = operator.post(f"incidents/{incident.pk}/complete/", {
                    "step_index": index, "note": f"{step['kind']} done by the book"})
            else:
                time.sleep(0.2)  # the worker is on it
                detail = operator.get(f"incidents/{incident.pk}/")
    finally:
        for each in agents:
            each.close()

    assert detail["state"] == "resolved", detail["state_reason"]
    timeline = operator.get(f"incidents/{incident.pk}/timeline/")
    done = [entry["step_kind"] for entry in timeline if entry["kind"] == "step_done"]
    assert done == plan
    started = [entry["step_kind"] for entry in timeline if entry["kind"] == "step_started"]
    assert started == plan
    verify = next(s for s in operator.get(f"incidents/{incident.pk}/")["steps"] if s["kind"] == "verify")
    assert all(gate["ok"] for gate in verify["output"]["gates"])
    assert "remediation.run_step" in celery_worker.log_path.read_text()
