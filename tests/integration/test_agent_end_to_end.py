"""The real agent (simulated NVML) against a live server: enrol with a token, report, read it back through
the API; a replayed batch is acknowledged and ignored; another node's credential is refused."""

import json
import urllib.error
import urllib.request

import pytest

from fleet.accounts.services import api_token_create
from fleet.telemetry.models import NodeSample
from fleet.telemetry.services.enrollment import enrollment_token_create
from fleet_agent.simulator import SimulatedAgent, load_scenario
from tests.factories import ProviderFactory, UserFactory
from tests.telemetry.reports import stored_reports

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _call(url: str, *, auth: str, body: dict | None = None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Authorization": auth,  # noqa: S310 (local server)
                                                              "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_agent_enrols_reports_and_is_visible_in_the_api(live_server, tmp_path):
    operator = UserFactory(role="operator")
    _, api_key = api_token_create(user=operator, name="e2e")
    provider = ProviderFactory(kind="own", cloud="")
    _, token = enrollment_token_create(actor=operator, name="e2e", provider=provider,
                                       delivery_form="bare_metal_owned", billing_mode="reserved")
    scenario = load_scenario("healthy")
    first = SimulatedAgent.from_scenario(scenario, 0, work_dir=tmp_path / "a")
    second = SimulatedAgent.from_scenario(scenario, 1, work_dir=tmp_path / "b")
    try:
        node_a = first.enroll(live_server.url, token).node_id
        node_b = second.enroll(live_server.url, token).node_id
        reports = [first.step(0), first.step(15)]
        assert first.deliver(force=True)

        user = f"Token {api_key}"
        status, body = _call(f"{live_server.url}/api/v1/nodes/{node_a}/status/", auth=user)
        assert status == 200
        assert body["sequence"] == reports[-1]["sequence"]
        assert len(body["gpus"]) == scenario.nodes[0].gpu_count
        status, node = _call(f"{live_server.url}/api/v1/nodes/{node_a}/", auth=user)
        assert node["hostname"] == first.hostname and node["machine_id"] == first.machine_id

        credential = json.loads((tmp_path / "a" / first.hostname / "credential.json").read_text())["credential"]
        status, ack = _call(f"{live_server.url}/api/v1/agent/reports", auth=f"Node {credential}",
                            body={"reports": reports})
        assert status == 200
        assert (ack["accepted"], ack["duplicates"], ack["acked_sequence"]) == (0, 2, reports[-1]["sequence"])
        assert stored_reports(NodeSample, node_id=node_a) == 2

        impostor = second.step(0)  # node B's report, sent with node A's credential
        assert impostor["node"]["node_id"] == node_b
        status, error = _call(f"{live_server.url}/api/v1/agent/reports", auth=f"Node {credential}",
                              body={"reports": [impostor]})
        assert status == 403
        assert "only report for itself" in error["error"]["message"]
        assert stored_reports(NodeSample, node_id=node_b) == 0
    finally:
        first.close()
        second.close()
