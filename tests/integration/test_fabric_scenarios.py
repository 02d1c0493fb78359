"""The GPU configuration and fabric checks end to end, one fault class each, as an operator meets them.

The real agent code runs on simulated NVML (persistence, ECC and MIG modes, GSP firmware, NVSwitch fabric
registration, NVLink states and error counters) and a simulated /sys, /proc and host tree (PCI devices, InfiniBand
ports, the fabric manager and IMEX daemons), enrols with a token and reports through the real HTTP API of a live
server; a real Celery worker evaluates. Each case checks the finding's triage step, layer and responsible party,
the node's headline as the REST API gives it, and that the finding resolves once the fault is gone.

The node is an 8 × H100 HGX server of our own (4 NVSwitches; 8 × 400 Gb/s InfiniBand for the port cases): the
GPU-driver layer is ours to fix, the hardware layer ours with the hardware vendor.
"""

from datetime import timedelta

import pytest
import requests

from fleet.health.models import Finding
from fleet.health.tasks import evaluate_nodes
from fleet.inventory.models import Baseline
from fleet_agent.simulator import SimulatedAgent, parse_scenario
from fleet_agent.timeutil import utc_now
from tests.integration.test_scenarios import _enrol_target, fast_rules  # noqa: F401 - fixture
from tests.processes import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

FAULT_AT, CLEAR_AT = 30, 60
# After the fault clears: two ordinary reports, then one past the agent's 900 s error-growth window.
AFTER_CLEAR = (CLEAR_AT + 1, CLEAR_AT + 16, CLEAR_AT + 960)

IB = {"fabric": {"ib_ports": 8}}  # 8 × 400 Gb/s InfiniBand, one port per GPU
CASES = [
    # id, fault (without times), node extras, baseline pins, rule, step, layer, party
    ("gpu_on_bus_not_in_nvml", {"fault": "gpu_not_in_nvml", "gpu": 5}, {}, {},
     "gpu_missing_from_nvml", "visibility", "gpu_driver", "us"),
    ("fabric_manager_stopped", {"fault": "fabric_manager_down"}, {}, {},
     "fabric_manager_down", "software_chain", "gpu_driver", "us"),
    ("imex_daemon_stopped", {"fault": "imex_down"}, {"fabric": {"imex": True}}, {},
     "imex_down", "software_chain", "gpu_driver", "us"),
    ("persistence_mode_off", {"fault": "persistence_off", "gpu": "all"}, {}, {},
     "persistence_mode_off", "software_chain", "gpu_driver", "us"),
    ("ecc_disable_pending", {"fault": "ecc_mode", "gpu": "all", "current": 1, "pending": 0}, {}, {},
     "ecc_mode", "software_chain", "gpu_driver", "us"),
    ("ecc_disabled", {"fault": "ecc_mode", "gpu": 1, "current": 0, "pending": 0}, {}, {},
     "ecc_mode", "software_chain", "gpu_driver", "us"),
    ("mig_enabled_against_baseline", {"fault": "mig_mode", "gpu": "all", "current": 1, "pending": 1}, {},
     {"mig_mode": "disabled"}, "mig_mode", "software_chain", "gpu_driver", "us"),
    ("gsp_firmware_mixed", {"fault": "gsp_drift", "gpu": 3, "version": "535.183.01"}, {}, {},
     "gsp_firmware_drift", "software_chain", "gpu_driver", "us"),
    ("nvlink_link_down", {"fault": "nvlink_down", "gpu": 2, "link": 5}, {}, {},
     "nvlink_down", "platform_hardware", "hardware", "hardware_vendor"),
    ("nvlink_crc_errors", {"fault": "nvlink_errors", "gpu": 4, "link": 7, "counter": "crc_flit", "per_s": 20}, {},
     {}, "nvlink_errors", "platform_hardware", "hardware", "hardware_vendor"),
    ("ib_port_down", {"fault": "ib_port_down", "port": 3}, IB, {},
     "ib_port_down", "platform_hardware", "hardware", "hardware_vendor"),
    ("ib_port_trained_down", {"fault": "ib_port_degraded", "port": 6, "rate_gbps": 200}, IB, {},
     "ib_port_degraded", "platform_hardware", "hardware", "hardware_vendor"),
    ("ib_symbol_errors", {"fault": "ib_errors", "port": 1, "counter": "symbol_error", "per_s": 5}, IB, {},
     "ib_port_degraded", "platform_hardware", "hardware", "hardware_vendor"),
]
STEP_NUMBERS = {"visibility": 1, "software_chain": 2, "capacity": 3, "platform_hardware": 4}


def _scenario(name: str, fault: dict, node_extras: dict):
    node = {"name": name.replace("_", "-"), "provider": "own", "delivery_form": "bare_metal_owned",
            "billing_mode": "owned", "gpu": {"model": "H100-SXM-80GB", "count": 8}, **node_extras,
            "faults": [{"at_s": FAULT_AT, "clear_at_s": CLEAR_AT, **fault}]}
    return parse_scenario({"name": name, "interval_s": 15, "seed": 3, "nodes": [node]}, name)


def _evaluate(node_id: int) -> None:
    evaluate_nodes.delay(node_ids=[node_id]).get(timeout=30)


def _triage(base: str, key: str, node_id: int) -> dict:
    response = requests.get(f"{base}/api/v1/nodes/{node_id}/triage/", headers={"Authorization": f"Token {key}"},
                            timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.parametrize(("name", "fault", "node_extras", "pins", "rule", "step", "layer", "party"), CASES,
                         ids=[c[0] for c in CASES])
def test_fabric_fault_is_named_routed_and_resolved(name, fault, node_extras, pins, rule, step, layer, party,
                                                   live_server, celery_worker, fast_rules, token_for, tmp_path):  # noqa: F811
    loaded = _scenario(name, fault, node_extras)
    token = _enrol_target(loaded.nodes[0])
    if pins:
        Baseline.objects.filter(pool__name="own-pool").update(**pins)
    _, key = token_for("viewer")
    agent = SimulatedAgent.from_scenario(loaded, 0, work_dir=tmp_path,
                                         start=utc_now() - timedelta(seconds=AFTER_CLEAR[-1] + 5))
    try:
        node_id = agent.enroll(live_server.url, token).node_id
        agent.step(0)
        assert agent.deliver(force=True)
        _evaluate(node_id)
        assert not Finding.objects.filter(node_id=node_id, state="open").exists(), \
            [f.summary for f in Finding.objects.filter(node_id=node_id, state="open")]

        agent.step(FAULT_AT + 1)
        assert agent.deliver(force=True)
        _evaluate(node_id)
        finding = wait_for(lambda: Finding.objects.filter(node_id=node_id, rule__slug=rule, state="open").first(),
                           what=f"an open {rule} finding")
        assert (finding.step, finding.layer, finding.responsible_party) == (step, layer, party)
        assert finding.recommended_action and finding.evidence
        triage = _triage(live_server.url, key, node_id)
        assert triage["headline"].startswith(f"Step {STEP_NUMBERS[step]} — {finding.summary} — owner: "), \
            triage["headline"]
        assert triage["headline_finding"]["id"] == finding.pk

        for t in AFTER_CLEAR:
            agent.step(t)
            assert agent.deliver(force=True)
        _evaluate(node_id)
        finding.refresh_from_db()
        assert finding.state == "resolved", f"{rule} still open after the fault cleared: {finding.summary}"
    finally:
        agent.close()


def test_gpu_gone_from_the_bus_stays_a_hardware_fault(live_server, celery_worker, fast_rules, token_for, tmp_path):  # noqa: F811
    """The other half of the PCI comparison: a GPU missing from NVML *and* from the bus is not the driver's."""
    loaded = _scenario("gpu-off-bus", {"fault": "gpu_missing", "gpu": 7}, {})
    token = _enrol_target(loaded.nodes[0])
    _, key = token_for("viewer")
    agent = SimulatedAgent.from_scenario(loaded, 0, work_dir=tmp_path, start=utc_now() - timedelta(seconds=40))
    try:
        node_id = agent.enroll(live_server.url, token).node_id
        agent.step(0)
        agent.step(FAULT_AT + 1)
        assert agent.deliver(force=True)
        _evaluate(node_id)
        finding = wait_for(lambda: Finding.objects.filter(node_id=node_id, rule__slug="gpu_count_low",
                                                          state="open").first(), what="a gpu_count_low finding")
        assert (finding.layer, finding.responsible_party) == ("hardware", "hardware_vendor")
        assert "7 on the PCI bus" in finding.summary
        assert not Finding.objects.filter(node_id=node_id, rule__slug="gpu_missing_from_nvml").exists()
        assert _triage(live_server.url, key, node_id)["headline"].startswith(f"Step 1 — {finding.summary} — owner: ")
    finally:
        agent.close()
