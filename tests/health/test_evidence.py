import json
from datetime import timedelta

import pytest
from django.utils import timezone

from fleet.health.selectors.evidence import finding_evidence, node_evidence
from fleet.health.selectors.evidence_text import evidence_text
from fleet.health.services.evaluation import evaluate
from fleet.inventory.choices import BASELINE_STACK_FIELDS, STACK_FIELDS
from fleet.inventory.models import GPU, Baseline, SoftwareStack
from tests.factories import BaselineFactory, PoolFactory, ProviderFactory

from .factories import ChangeLogEntryFactory, EventFactory, healthy_node
from .harness import open_findings, set_gpu

pytestmark = pytest.mark.django_db

XID_LINE = ("[Tue Dec  1 11:59:58 2026] NVRM: Xid (PCI:0000:1a:00): 79, pid=<unknown>, name=<unknown>, "
            "GPU has fallen off the bus.")


@pytest.fixture
def faulty_node():
    now = timezone.now()
    pool = PoolFactory(name="h100-train")
    BaselineFactory(pool=pool, driver_version="550.54.15", cuda_driver_version="12.4")
    node = healthy_node(pool=pool, provider=ProviderFactory(name="AWS", support_contact="aws support case"),
                        instance_id="i-0abc", instance_type="p5.48xlarge", at=now)
    SoftwareStack.objects.filter(pk=node.current_stack_id).update(driver_version="550.90.07")
    lost = GPU.objects.get(node=node, index=2)
    set_gpu(lost, lost=True, utilization_gpu_pct=None)
    EventFactory(node=node, gpu=lost, kind="xid", code=79, at=now - timedelta(seconds=2), raw=XID_LINE)
    EventFactory(node=node, gpu=GPU.objects.get(node=node, index=5), kind="xid", code=13, severity="warning",
                 at=now - timedelta(seconds=1), raw="NVRM: Xid (PCI:0000:1d:00): 13, Graphics Exception")
    ChangeLogEntryFactory(node=node, at=now - timedelta(days=1), field="driver_version", old="550.54.15",
                          new="550.90.07", summary="driver 550.54.15 → 550.90.07")
    evaluate(now=now)
    return node


def test_finding_bundle_has_what_a_support_desk_asks_for(faulty_node):
    finding = open_findings("xid", faulty_node).get(subject__endswith=":xid:79")
    bundle = finding_evidence(finding=finding)
    assert bundle["kind"] == "finding"
    assert bundle["finding"]["recommended_action"].startswith("AWS owns the hardware of this instance")
    assert bundle["finding"]["xid_policy_version"] == 1
    assert bundle["node"]["instance_id"] == "i-0abc"
    assert bundle["node"]["provider_support_contact"] == "aws support case"
    assert {cell["layer"] for cell in bundle["boundary"]} >= {"hardware", "gpu_driver", "application"}
    assert len(bundle["gpus"]) == 8
    assert bundle["gpus"][2]["status"]["lost"] is True
    assert bundle["gpus"][0]["serial"] == GPU.objects.get(node=faulty_node, index=0).serial
    # Kernel log: this GPU's lines only (GPU 5's Xid 13 is someone else's story).
    assert [line["line"] for line in bundle["kernel_log"]] == [XID_LINE]
    assert "Driver Version: 550.90.07" in bundle["nvidia_smi"]
    assert "ERR! GPU is lost" in bundle["nvidia_smi"]
    assert bundle["stack"]["current"]["driver_version"] == "550.90.07"
    assert bundle["stack"]["drift"] == [{"field": "driver_version", "expected": "550.54.15", "actual": "550.90.07"}]
    assert bundle["changes"][0]["summary"] == "driver 550.54.15 → 550.90.07"
    assert bundle["status"]["nvml_status"] == "ok"


def test_bundle_shows_every_stack_field_and_everything_the_baseline_pins(faulty_node):
    Baseline.objects.filter(pool=faulty_node.pool).update(container_runtime="docker 26.1.0",
                                                          nvidia_container_toolkit="1.15.0")
    stack = node_evidence(node=faulty_node)["stack"]
    assert list(stack["current"]) == ["collected_at", *STACK_FIELDS]
    assert stack["baseline"]["container_runtime"] == "docker 26.1.0"
    assert stack["baseline"]["nvidia_container_toolkit"] == "1.15.0"
    assert set(BASELINE_STACK_FIELDS) <= set(stack["baseline"])


def test_node_bundle_lists_open_findings_and_all_recent_log_lines(faulty_node):
    bundle = node_evidence(node=faulty_node)
    assert bundle["kind"] == "node"
    rules = {f["rule"] for f in bundle["findings"]}
    assert {"xid", "gpu_lost", "stack_drift"} <= rules
    assert len(bundle["kernel_log"]) == 2
    assert bundle["kernel_log"][0]["at"] < bundle["kernel_log"][1]["at"]


def test_plain_text_bundle(faulty_node):
    text = evidence_text(node_evidence(node=faulty_node))
    assert text.startswith(f"Evidence bundle (node) — {faulty_node.hostname}")
    for section in ("== Open findings", "== Node", "== Responsibility boundary", "== Latest status",
                    "== nvidia-smi (rebuilt)", "== GPUs", "== Kernel log (2 lines)", "== Software stack",
                    "== Recent changes"):
        assert section in text, section
    assert XID_LINE in text
    assert "drift driver_version: pinned 550.54.15, actual 550.90.07" in text
    assert "next action: AWS owns the hardware of this instance" in text


def test_evidence_downloads(viewer_api, faulty_node):
    finding = open_findings("xid", faulty_node).get(subject__endswith=":xid:79")
    response = viewer_api.get(f"/api/v1/findings/{finding.pk}/evidence/", {"format": "text"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert response["Content-Disposition"].startswith(f'attachment; filename="evidence-{faulty_node.hostname}'
                                                      f'-finding-{finding.pk}-')
    assert response["Content-Disposition"].endswith('.txt"')
    assert XID_LINE in response.content.decode()

    response = viewer_api.get(f"/api/v1/findings/{finding.pk}/evidence/")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json()["finding"]["id"] == finding.pk

    response = viewer_api.get(f"/api/v1/nodes/{faulty_node.pk}/evidence/", {"format": "json"})
    assert response.status_code == 200
    body = json.loads(response.content)
    assert body["node"]["hostname"] == faulty_node.hostname
    assert response["Content-Disposition"].endswith('.json"')
    text = viewer_api.get(f"/api/v1/nodes/{faulty_node.pk}/evidence/", {"format": "text"})
    assert text.status_code == 200 and "== Kernel log" in text.content.decode()


def test_evidence_of_unknown_objects_is_404(viewer_api):
    assert viewer_api.get("/api/v1/nodes/987654/evidence/").status_code == 404
    missing = viewer_api.get("/api/v1/findings/987654/evidence/", {"format": "text"})
    assert missing.status_code == 404
    assert json.loads(missing.content)["error"]["code"] == "not_found"
