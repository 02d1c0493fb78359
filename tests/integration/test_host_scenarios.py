"""Host faults end to end, one per class: the real agent code reads a simulated /proc, /sys, mount table, statvfs
and adjtimex in their real formats, enrols and reports through the live HTTP API; a real Celery worker evaluates;
the finding is on the right triage step, layer and party, the node's triage headline (read through the REST API)
names it, and it resolves when the fault clears.

Each scenario is written the way an operator meets the fault (an NFS server gone, a journal error remounting a
volume read-only, an OOM kill of a data loader, a clock that lost its time source), not from the rule.
"""

import json
from datetime import timedelta
from pathlib import Path

import pytest
import requests

from fleet.health.models import Finding, Rule
from fleet.health.tasks import evaluate_nodes
from fleet_agent.simulator import SimulatedAgent, parse_scenario
from fleet_agent.timeutil import utc_now
from tests.integration.test_scenarios import _enrol_target
from tests.processes import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CASES = [
    # scenario, rule, step, layer, party, words the headline must carry
    ("host_memory_exhausted", "host_memory_exhausted", "capacity", "application", "us", "Host memory exhausted"),
    ("oom_kill", "host_oom_kill", "capacity", "application", "us", "OOM killer"),
    ("swap_storm", "swap_storm", "capacity", "host_os", "us", "Swap storm"),
    ("volume_full", "volume_full", "capacity", "host_os", "us", "Volume /data (xfs) is full"),
    ("volume_read_only", "volume_read_only", "capacity", "host_os", "us", "Volume / (ext4"),
    ("volume_hung", "volume_hung", "capacity", "host_os", "us", "/mnt/checkpoints (nfs4"),
    ("gpu_d_state", "gpu_d_state", "platform_hardware", "gpu_driver", "us", "/dev/nvidia2"),
    ("gpu_job_stuck_on_nfs", "storage_d_state", "capacity", "host_os", "us", "rpc_wait_bit_killable"),
    ("peermem_missing", "peermem_missing", "software_chain", "gpu_driver", "us", "peer-memory module"),
    ("clock_unsynced", "clock_unsynced", "software_chain", "host_os", "provider", "Clock not synchronised"),
]
SCENARIOS = Path(__file__).resolve().parents[2] / "agents" / "scenarios"
STEP_NUMBER = {"visibility": 1, "software_chain": 2, "capacity": 3, "platform_hardware": 4}


@pytest.fixture
def fast_rules(seeded_catalog):
    Rule.objects.update(duration_s=0, clear_hold_s=0)


def _scenario(name: str):
    # The repository's file (the installed package may be another checkout's).
    data = json.loads((SCENARIOS / f"{name}.json").read_text(encoding="utf-8"))
    for fault in data["nodes"][0]["faults"]:
        fault.setdefault("clear_at_s", fault["at_s"] + 60)
    return parse_scenario(data, name)


def _triage(base: str, key: str, node_id: int) -> dict:
    response = requests.get(f"{base}/api/v1/nodes/{node_id}/triage/", headers={"Authorization": f"Token {key}"},
                            timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


def _report(agent: SimulatedAgent, t: float) -> None:
    assert agent.step(t) is not None
    assert agent.deliver(force=True)


@pytest.mark.parametrize(("scenario", "rule", "step", "layer", "party", "headline"), CASES, ids=[c[0] for c in CASES])
def test_host_fault_opens_names_the_headline_and_resolves(scenario, rule, step, layer, party, headline, live_server,
                                                          celery_worker, fast_rules, token_for, tmp_path):
    loaded = _scenario(scenario)
    spec = loaded.nodes[0]
    token = _enrol_target(spec)
    _, key = token_for("operator")
    fault = spec.faults[0]
    # The node's clock reads "now" at the end of the run.
    agent = SimulatedAgent.from_scenario(loaded, 0, work_dir=tmp_path,
                                         start=utc_now() - timedelta(seconds=fault.clear_at_s + 20))
    try:
        node_id = agent.enroll(live_server.url, token).node_id
        _report(agent, 0)
        _report(agent, 15)
        assert not Finding.objects.filter(node_id=node_id, rule__slug=rule).exists()
        # Two reports into the fault: a D-state process must be seen in two scans, a statvfs must stay unanswered.
        _report(agent, fault.at_s + 1)
        _report(agent, fault.at_s + 16)
        evaluate_nodes.delay(node_ids=[node_id]).get(timeout=30)
        finding = wait_for(lambda: Finding.objects.filter(node_id=node_id, rule__slug=rule, state="open").first(),
                           what=f"an open {rule} finding")
        assert (finding.step, finding.layer, finding.responsible_party) == (step, layer, party)
        assert finding.recommended_action and finding.evidence["values"]

        triage = _triage(live_server.url, key, node_id)
        assert triage["headline"].startswith(f"Step {STEP_NUMBER[step]} — "), triage["headline"]
        assert headline in triage["headline"], triage["headline"]
        assert triage["headline_finding"]["rule"] == rule

        # The fault clears (the volume answers again, the module is loaded, the node was rebooted, ...).
        _report(agent, fault.clear_at_s + 1)
        _report(agent, fault.clear_at_s + 16)
        if rule == "host_oom_kill":  # an OOM kill stays on record for its window; the shortest one lets it end
            Rule.objects.filter(slug=rule).update(params={"window_s": 60})
        evaluate_nodes.delay(node_ids=[node_id]).get(timeout=30)
        finding.refresh_from_db()
        assert finding.state == "resolved", f"{rule} still open after the fault cleared: {finding.summary}"
    finally:
        agent.close()


def test_host_memory_exhaustion_is_the_headline_while_the_cpu_looks_like_the_bottleneck(
        live_server, celery_worker, fast_rules, token_for, tmp_path):
    """Reclaim keeps the CPUs busy and the GPUs starve, which also looks like a CPU-bound input pipeline; the
    memory exhaustion is the cause and speaks in the headline."""
    loaded = _scenario("host_memory_exhausted")
    token = _enrol_target(loaded.nodes[0])
    _, key = token_for("operator")
    agent = SimulatedAgent.from_scenario(loaded, 0, work_dir=tmp_path, start=utc_now() - timedelta(seconds=60))
    try:
        node_id = agent.enroll(live_server.url, token).node_id
        _report(agent, 0)
        _report(agent, 31)
        _report(agent, 46)
        evaluate_nodes.delay(node_ids=[node_id]).get(timeout=30)
        open_rules = set(Finding.objects.filter(node_id=node_id, state="open").values_list("rule__slug", flat=True))
        assert "host_memory_exhausted" in open_rules
        triage = _triage(live_server.url, key, node_id)
        assert triage["headline"].startswith("Step 3 — Host memory exhausted"), triage["headline"]
    finally:
        agent.close()
