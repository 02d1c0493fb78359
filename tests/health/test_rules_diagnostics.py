"""`dcgm_diag_failed`: DCGM's active diagnostic, as an operator meets it. The events are the ones the agent builds
from recorded `dcgmi diag -j` outputs (tests/agents/fixtures/dcgm), so the rule reads what a node really sends."""

import json
import subprocess
import sys
from datetime import timedelta

import pytest

from fleet.health.models import Finding
from fleet.health.selectors.triage import node_triage
from fleet.health.services.evaluation import evaluate
from fleet.inventory.models import GPU
from fleet_agent.dcgm import diagnose
from tests.agents.fake_dcgmi import FIXTURES

from .factories import T0, ChangeLogEntryFactory, EventFactory, healthy_node
from .harness import open_findings

pytestmark = pytest.mark.django_db

START = T0 + timedelta(minutes=1)
PASS_R1 = ("dcgm3_r2_pass.json", 0)  # a DCGM 3 document: one GPU's level-2 tests all passed
PASS_R3 = ("dcgm3_r3_pass.json", 0)
MEMORY_FAIL_R3 = ("dcgm4_r3_8gpu_memory_fail.json", 226)
PERSISTENCE_FAIL_R1 = ("dcgm4_r1_gb10_software_fail.json", 226)


def _diag(node, level: int, fixture: tuple[str, int] | None, at, *, stdout: str | None = None):
    """The `diag` event the agent reports for a run of `dcgmi diag -r level -j` printing the fixture."""
    text = stdout if stdout is not None else (FIXTURES / fixture[0]).read_text()
    status = fixture[1] if fixture else 255

    def runner(argv, timeout):
        return subprocess.CompletedProcess(argv, status, text, "")

    gpus = {g.index: {"uuid": g.uuid, "pci_bus_id": g.pci_bus_id} for g in GPU.objects.filter(node=node)}
    events = []
    # Any executable stands in for dcgmi's path; the runner answers with the recorded output.
    diagnose(level, dcgmi=sys.executable, gpus_by_index=gpus, sink=events.append, runner=runner, clock=lambda: at)
    (event,) = events
    return EventFactory(node=node, kind="diag", code=event["code"], severity=event["severity"], at=at,
                        message=event["message"], raw=event["raw"], pci_bus_id="",
                        gpu=GPU.objects.filter(node=node, uuid=event["gpu_uuid"]).first())


def test_a_failed_memory_test_is_a_hardware_finding_on_the_gpu_dcgm_named():
    node = healthy_node(delivery_form="bare_metal_owned")
    gpu5 = GPU.objects.get(node=node, index=5)
    _diag(node, 3, MEMORY_FAIL_R3, START)
    evaluate(now=START + timedelta(seconds=1))
    finding = open_findings("dcgm_diag_failed", node).get()
    assert (finding.step, finding.layer, finding.responsible_party, finding.severity) == (
        "platform_hardware", "hardware", "hardware_vendor", "critical")
    assert finding.gpu_id == gpu5.pk and finding.subject == f"gpu:{gpu5.pk}:diag:memory"
    assert finding.summary == ("DCGM diagnostic level 3 (long (r3)): test 'memory' failed on GPU 5: Found 2 faulty "
                               "memory elements on GPU 5")
    values = finding.evidence["values"]
    assert (values["test"], values["category"], values["level"], values["dcgm_version"]) == (
        "memory", "Hardware", 3, "4.1.1")
    assert "RMA / replace the GPU" in finding.recommended_action
    triage = node_triage(node=node, now=START + timedelta(seconds=2))
    assert triage["headline"].startswith("Step 4 — DCGM diagnostic level 3") and "GPU 5" in triage["headline"]


def test_on_a_cloud_instance_the_same_failure_is_the_providers():
    node = healthy_node(delivery_form="cloud_dedicated")
    _diag(node, 3, MEMORY_FAIL_R3, START)
    evaluate(now=START)
    assert open_findings("dcgm_diag_failed", node).get().responsible_party == "provider"


def test_a_failed_test_stands_until_a_run_at_its_level_passes_and_a_reboot_does_not_clear_it():
    node = healthy_node(delivery_form="bare_metal_owned")
    _diag(node, 3, MEMORY_FAIL_R3, START)
    evaluate(now=START)
    ChangeLogEntryFactory(node=node, at=START + timedelta(minutes=5))  # rebooted
    _diag(node, 1, PASS_R1, START + timedelta(minutes=10))  # level 1 does not run the long memory tests
    evaluate(now=START + timedelta(minutes=11))
    assert open_findings("dcgm_diag_failed", node).exists()
    _diag(node, 3, PASS_R3, START + timedelta(minutes=50))  # the part was swapped; level 3 passes
    evaluate(now=START + timedelta(minutes=51))
    assert not open_findings("dcgm_diag_failed", node).exists()
    assert Finding.objects.get(node=node, rule__slug="dcgm_diag_failed").state == "resolved"


def test_a_deployment_check_is_the_nodes_configuration_not_the_part():
    node = healthy_node(delivery_form="bare_metal_owned", gpus=1)
    _diag(node, 1, PERSISTENCE_FAIL_R1, START)
    evaluate(now=START)
    finding = open_findings("dcgm_diag_failed", node).get()
    assert (finding.layer, finding.severity, finding.responsible_party) == ("gpu_driver", "warning", "us")
    assert "test 'software' failed on GPU 0: Persistence Mode" in finding.summary
    assert "persistence mode" in finding.recommended_action


def test_a_run_without_a_verdict_neither_opens_nor_clears():
    node = healthy_node(delivery_form="bare_metal_owned")
    _diag(node, 2, None, START, stdout="Error: Unable to complete diagnostic for group 0. Return: (-7) Host engine "
                                        "connection invalid/disconnected.")
    evaluate(now=START)
    assert not open_findings("dcgm_diag_failed", node).exists()
    _diag(node, 3, MEMORY_FAIL_R3, START + timedelta(minutes=1))
    _diag(node, 3, None, START + timedelta(minutes=2), stdout="Error: nv-hostengine is not running")
    evaluate(now=START + timedelta(minutes=3))
    assert open_findings("dcgm_diag_failed", node).exists()


@pytest.mark.parametrize("raw", ["", "not json", "[1]", json.dumps({"outcome": "fail", "failures": "x"}),
                                 json.dumps({"outcome": "fail", "failures": [1, {"test": ""}, {"test": {"a": 1}}]}),
                                 json.dumps({"outcome": "fail", "failures": [{"test": "memory", "gpu_index": True,
                                                                              "gpu_uuid": 5}]})])
def test_a_malformed_summary_is_a_claim_that_opens_nothing_odd(raw):
    node = healthy_node(delivery_form="bare_metal_owned")
    EventFactory(node=node, kind="diag", code=3, severity="critical", at=START, message="diag", raw=raw)
    evaluate(now=START)
    findings = list(open_findings("dcgm_diag_failed", node))
    assert all(f.gpu_id is None for f in findings)  # nothing attributed to a GPU the claim did not name well
    assert len(findings) <= 1
