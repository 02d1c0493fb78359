"""The console in real Chromium against a live server running the demo fleet: log in, filter nodes, open the
node with the Xid 79 finding and see it on the hardware layer with its responsible party, and compare a
cloud node's boundary with an owned bare-metal node's.

The fleet is the one `make run` shows — `demo_seed` plus the demo scenario's simulated agents (the real agent
code) reporting over HTTP — with two more nodes whose GPU 0 logs an Xid 79 at once (the demo's own faults
start a minute or more after launch). The health engine evaluates the reports; nothing is hand-made.
Screenshots land in test-artifacts/e2e/<test>/.
"""

import copy
import json
from datetime import timedelta
from importlib import resources

import pytest

from fleet.accounts.choices import Role
from fleet.core.demo import demo_seed
from fleet.health.services.evaluation import evaluate
from fleet.remediation.services.intake import findings_intake
from fleet_agent.simulator import SimulatedAgent, parse_scenario
from fleet_agent.timeutil import utc_now
from tests.factories import UserFactory

from .conftest import ARTIFACTS, run_console_script

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

PASSWORD = "pw-for-tests-123"  # UserFactory's default
XID79 = [{"at_s": 0, "fault": "xid", "gpu": 0, "code": 79}]
EXTRA_NODES = [
    {"name": "aws-spot-xid79", "provider": "aws", "delivery_form": "cloud_dedicated", "billing_mode": "spot",
     "region": "us-east-1", "instance_type": "p5.48xlarge", "gpu": {"model": "H100-SXM-80GB", "count": 8},
     "faults": XID79},
    {"name": "own-bm-xid79", "provider": "own", "delivery_form": "bare_metal_owned", "billing_mode": "owned",
     "region": "onprem-1", "instance_type": "bare-metal", "gpu": {"model": "H100-SXM-80GB", "count": 8},
     "faults": XID79},
]


def run_demo_fleet(server: str, work_dir) -> dict[str, str]:
    """Seed the demo fleet, let every simulated agent enrol and report twice, evaluate; return hostnames."""
    data = json.loads(resources.files("fleet_agent.scenarios").joinpath("demo-fleet.json").read_text())
    data["nodes"].extend(copy.deepcopy(EXTRA_NODES))
    scenario = parse_scenario(data, "demo-fleet-e2e")
    admin = UserFactory(username="e2e-admin", role=Role.ADMIN, is_superuser=True)
    UserFactory(username="e2e-operator", role=Role.OPERATOR)
    UserFactory(username="e2e-viewer", role=Role.VIEWER)
    hostnames = {}
    start = utc_now() - timedelta(seconds=20)
    for group in demo_seed(scenario=scenario, actor=admin):
        for ordinal in range(len(group.scenario.nodes)):
            agent = SimulatedAgent.from_scenario(group.scenario, ordinal, work_dir=work_dir, start=start)
            try:
                agent.enroll(server, group.token)
                for t in (0, 15):
                    agent.step(t)
                assert agent.deliver(force=True), f"{agent.hostname} could not deliver"
                hostnames[agent.spec.name] = agent.hostname
            finally:
                agent.close()
    evaluate()
    findings_intake()  # remediation opens its incidents (what the worker does after a cycle)
    return hostnames


def _run(live_server_url, hostnames: dict, *, expect_finding: bool):
    artifacts = ARTIFACTS / ("xid79-finding" if expect_finding else "boundary")
    result = run_console_script(base_url=live_server_url, artifacts=artifacts, env={
        "E2E_USERNAME": "e2e-operator", "E2E_VIEWER_USERNAME": "e2e-viewer", "E2E_PASSWORD": PASSWORD,
        "E2E_CLOUD_NODE": hostnames["aws-spot-xid79"], "E2E_METAL_NODE": hostnames["own-bm-xid79"],
        "E2E_CLOUD_PROVIDER": "AWS", "E2E_EXPECT_FINDING": "1" if expect_finding else "0",
    })
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"console e2e failed (screenshots in {artifacts}):\n{output[-6000:]}"
    for name in ("01-login", "02-nodes-filtered", "03-cloud-node", "04-metal-node", "05-metal-node-zh", "06-overview",
                 "10-rules-viewer", "11-tokens-created", "12-incidents"):
        assert (artifacts / f"{name}.png").stat().st_size > 0
    return output


def test_login_filter_and_boundary_differs_between_cloud_and_owned_metal(live_server_url, committed_db, tmp_path):
    hostnames = run_demo_fleet(live_server_url, tmp_path)
    output = _run(live_server_url, hostnames, expect_finding=False)
    assert "hardware is owned by the provider" in output
    assert "hardware is ours with the vendor" in output
    assert "a viewer sees no write controls on the rules page (0 found)" in output
    assert "the read-only key cannot write (403)" in output
    assert "the key is gone from the page once dismissed" in output
    assert "a viewer manages their own API tokens" in output


def test_xid79_finding_sits_on_the_hardware_layer_with_its_responsible_party(live_server_url, committed_db,
                                                                             tmp_path):
    hostnames = run_demo_fleet(live_server_url, tmp_path)
    output = _run(live_server_url, hostnames, expect_finding=True)
    assert "cloud node: the Xid 79 finding sits on the hardware layer" in output
    assert "owned bare metal: responsible party highlighted is us + vendor" in output
    assert "owned bare metal: the node page lists its remediation incident" in output
    assert "the incident shows the boundary row that chose owned-reboot" in output
