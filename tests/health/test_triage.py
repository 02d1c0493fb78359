from datetime import timedelta

import pytest
from django.utils import timezone

from fleet.health.selectors import node_triage
from fleet.health.services.evaluation import evaluate
from fleet.inventory.models import GPU, SoftwareStack
from tests.factories import NodeFactory

from .factories import T0, healthy_node
from .harness import set_gpu, set_status

pytestmark = pytest.mark.django_db


def _statuses(triage):
    return [(s["step"], s["status"]) for s in triage["steps"]]


def test_all_four_steps_pass_on_a_healthy_node():
    node = healthy_node()
    evaluate(now=T0)
    triage = node_triage(node=node, now=T0 + timedelta(seconds=10))
    assert _statuses(triage) == [("visibility", "passed"), ("software_chain", "passed"), ("capacity", "passed"),
                                 ("platform_hardware", "passed")]
    assert [s["number"] for s in triage["steps"]] == [1, 2, 3, 4]
    assert triage["headline"] == "All four steps passed"
    assert triage["headline_finding"] is None


def test_the_first_failing_step_is_the_headline_in_plain_words():
    node = healthy_node()
    SoftwareStack.objects.filter(pk=node.current_stack_id).update(
        driver_version="535.54.03", cuda_driver_version="12.2", cuda_toolkits=["12.2"],
        frameworks=[{"name": "torch", "version": "2.4", "cuda": "12.4", "arch_list": ["sm_90"]}])
    set_gpu(GPU.objects.get(node=node, index=0), ecc_volatile_uncorrected=4)
    evaluate(now=T0)
    triage = node_triage(node=node, now=T0 + timedelta(seconds=5))
    assert _statuses(triage) == [("visibility", "passed"), ("software_chain", "failed"), ("capacity", "passed"),
                                 ("platform_hardware", "failed")]
    assert triage["headline"] == ("Step 2 — driver 535.54.03 supports CUDA ≤ 12.2, torch 2.4 was built for CUDA 12.4 "
                                  "— owner: us")
    assert triage["headline_finding"].rule.slug == "cuda_driver_too_old"
    step4 = triage["steps"][3]
    assert step4["findings"][0].rule.slug == "ecc_uncorrectable"
    assert step4["reason"] == "GPU 0: 4 uncorrectable ECC error(s) since the last reset"


def test_a_node_that_never_reported_is_unknown_everywhere():
    node = NodeFactory()
    triage = node_triage(node=node)
    assert {s["status"] for s in triage["steps"]} == {"unknown"}
    assert triage["headline"] == "Step 1 — unknown: the node has never reported"
    assert triage["fresh"] is False


def test_a_stale_report_makes_steps_unknown_but_keeps_failed_ones():
    node = healthy_node()
    set_status(node, gpu_count_seen=7)
    evaluate(now=T0)
    evaluate(now=T0 + timedelta(seconds=30))
    triage = node_triage(node=node, now=T0 + timedelta(minutes=10))
    assert _statuses(triage) == [("visibility", "failed"), ("software_chain", "unknown"), ("capacity", "unknown"),
                                 ("platform_hardware", "unknown")]
    assert triage["steps"][1]["reason"] == "no report since 2026-12-01 12:00:00 UTC"
    assert triage["headline"].startswith("Step 1 — 7 of 8 GPUs visible — owner: ")


def test_nvml_unavailable_blocks_the_later_steps():
    node = healthy_node()
    set_status(node, nvml_status="driver_not_loaded")
    evaluate(now=T0)
    triage = node_triage(node=node, now=T0 + timedelta(seconds=5))
    assert triage["steps"][0]["status"] == "unknown", "pending: the condition has not held 30 s yet"
    assert triage["steps"][0]["pending"][0]["rule"] == "nvml_unavailable"
    evaluate(now=T0 + timedelta(seconds=30))
    triage = node_triage(node=node, now=T0 + timedelta(seconds=35))
    assert _statuses(triage) == [("visibility", "failed"), ("software_chain", "unknown"), ("capacity", "unknown"),
                                 ("platform_hardware", "unknown")]
    assert triage["steps"][2]["reason"] == "blocked: NVML is unavailable (step 1)"
    assert triage["headline"].startswith("Step 1 — NVML unavailable: the NVIDIA kernel driver is not loaded")


def test_a_condition_inside_its_hold_time_is_pending_never_passed():
    node = healthy_node()
    set_status(node, tcp_retrans_pct=4.0)
    evaluate(now=T0)
    triage = node_triage(node=node, now=T0 + timedelta(seconds=60))
    step3 = triage["steps"][2]
    assert step3["status"] == "pending"
    assert step3["pending"][0]["rule"] == "tcp_retransmits"
    assert step3["pending"][0]["opens_after_s"] == 300
    assert step3["pending"][0]["opens_in_s"] == 240
    assert step3["pending"][0]["opens_at"] == T0 + timedelta(seconds=300)
    assert step3["reason"].startswith("forming, opens in 4 min: TCP retransmits 4.00 %")
    assert triage["headline"].startswith("Step 3 — forming, opens in 4 min")
    assert "passed" not in triage["headline"]
    assert [s["status"] for s in triage["steps"]] == ["passed", "passed", "pending", "passed"]


def test_triage_api(viewer_api):
    node = healthy_node()
    set_status(node, received_at=timezone.now(), gpu_count_seen=6)
    evaluate(now=timezone.now() - timedelta(minutes=1))
    evaluate()
    response = viewer_api.get(f"/api/v1/nodes/{node.pk}/triage/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["headline"] == f"Step 1 — 6 of 8 GPUs visible — owner: {node.provider.name}"
    assert body["consequences"] == []
    assert body["headline_finding"]["rule"] == "gpu_count_low"
    assert body["steps"][0]["findings"][0]["responsible_party"] == "provider"
    assert body["steps"][0]["findings"][0]["evidence"]["values"]["gpu_count_seen"] == 6
    assert [s["status"] for s in body["steps"]] == ["failed", "passed", "passed", "passed"]
    assert viewer_api.get("/api/v1/nodes/999999/triage/").status_code == 404
