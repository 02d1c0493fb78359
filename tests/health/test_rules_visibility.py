from datetime import timedelta

import pytest

from fleet.health.services.evaluation import evaluate
from fleet.inventory.models import GPU
from fleet.telemetry.models import GPUStatus
from tests.factories import BaselineFactory, PoolFactory

from .factories import T0, EventFactory, bus_id, healthy_node
from .harness import lifecycle, open_findings, set_gpu, set_status

pytestmark = pytest.mark.django_db


def test_nvml_unavailable_driver_not_loaded_is_ours_on_dedicated_cloud():
    node = healthy_node(delivery_form="cloud_dedicated")
    result = lifecycle(
        "nvml_unavailable", node,
        fault=lambda at: set_status(node, nvml_status="driver_not_loaded", nvml_message="NVML: Driver Not Loaded"),
        clear=lambda at: set_status(node, nvml_status="ok", nvml_message=""))
    finding = result.opened
    assert (finding.step, finding.layer, finding.responsible_party) == ("visibility", "gpu_driver", "us")
    assert finding.severity == "critical"
    assert "kernel driver is not loaded" in finding.summary
    assert "Driver Not Loaded" in finding.summary
    assert finding.evidence["values"]["nvml_status"] == "driver_not_loaded"


def test_nvml_unavailable_on_shared_cloud_is_the_providers_image():
    node = healthy_node(delivery_form="cloud_shared")
    result = lifecycle("nvml_unavailable", node,
                       fault=lambda at: set_status(node, nvml_status="library_not_found"),
                       clear=lambda at: set_status(node, nvml_status="ok"))
    assert result.opened.responsible_party == "provider"
    assert result.opened.action_kind == "provider_ticket"
    assert "do not change it yourself" in result.opened.recommended_action


def test_nvml_no_permission_is_a_host_os_problem():
    node = healthy_node(delivery_form="bare_metal_owned")
    result = lifecycle("nvml_unavailable", node,
                       fault=lambda at: set_status(node, nvml_status="no_permission"),
                       clear=lambda at: set_status(node, nvml_status="ok"))
    assert (result.opened.layer, result.opened.responsible_party) == ("host_os", "us")


def test_fewer_gpus_than_expected():
    node = healthy_node(gpus=8)
    result = lifecycle("gpu_count_low", node, fault=lambda at: set_status(node, gpu_count_seen=7),
                       clear=lambda at: set_status(node, gpu_count_seen=8))
    finding = result.opened
    assert (finding.step, finding.layer, finding.responsible_party) == ("visibility", "hardware", "provider")
    assert finding.summary == "7 of 8 GPUs visible"
    assert finding.evidence["values"] == {"gpu_count_seen": 7, "expected_gpu_count": 8}


def test_gpu_count_falls_back_to_the_pool_when_the_node_expects_nothing():
    pool = PoolFactory(gpus_per_node=8)
    node = healthy_node(gpus=4, expected_gpu_count=0, pool=pool)
    evaluate(now=T0 + timedelta(minutes=5))
    evaluate(now=T0 + timedelta(minutes=6))
    assert open_findings("gpu_count_low", node).get().summary == "4 of 8 GPUs visible"


def test_gpu_lost_from_status_opens_at_once_on_that_gpu():
    node = healthy_node()
    gpu = GPU.objects.get(node=node, index=3)
    result = lifecycle("gpu_lost", node,
                       fault=lambda at: set_gpu(gpu, lost=True, utilization_gpu_pct=None, memory_used_bytes=None),
                       clear=lambda at: set_gpu(gpu, lost=False, utilization_gpu_pct=80))
    finding = result.opened
    assert (finding.step, finding.layer, finding.responsible_party) == ("visibility", "hardware", "provider")
    assert finding.gpu_id == gpu.pk
    assert finding.subject == f"gpu:{gpu.pk}"
    assert finding.summary.startswith("GPU 3 is lost")


def test_gpu_lost_from_a_kernel_log_event_with_only_a_pci_address():
    node = healthy_node(delivery_form="bare_metal_owned")
    gpu = GPU.objects.get(node=node, index=5)
    start = T0 + timedelta(minutes=1)
    EventFactory(node=node, kind="gpu_lost", code=None, at=start, pci_bus_id="0000:1d:00.0",
                 raw="NVRM: GPU 0000:1d:00.0: GPU has fallen off the bus.")
    set_status(node, lost_gpus=[bus_id(5)])
    evaluate(now=start)
    finding = open_findings("gpu_lost", node).get()
    assert finding.gpu_id == gpu.pk, "the PCI address must map to the GPU row"
    assert (finding.step, finding.layer, finding.responsible_party, finding.action_kind) == (
        "visibility", "hardware", "hardware_vendor", "vendor_rma")
    assert finding.evidence["log_lines"][0]["line"] == "NVRM: GPU 0000:1d:00.0: GPU has fallen off the bus."
    assert sorted(finding.evidence["values"]["sources"]) == ["kernel_log", "visibility.lost_gpus"]

    # The next report no longer lists it, but the kernel-log event keeps it lost for window_s (300 s) …
    set_status(node, lost_gpus=[])
    evaluate(now=start + timedelta(seconds=300))
    assert open_findings("gpu_lost", node).exists()
    # … then the clear-hold (120 s) runs.
    evaluate(now=start + timedelta(seconds=301))
    evaluate(now=start + timedelta(seconds=420))
    assert open_findings("gpu_lost", node).exists()
    evaluate(now=start + timedelta(seconds=421))
    finding.refresh_from_db()
    assert finding.state == "resolved"
    assert finding.resolution == "condition clear for 120 s (clear-hold 120 s)"


def test_gpu_model_differs_from_the_baseline():
    pool = PoolFactory()
    BaselineFactory(pool=pool, gpu_model="NVIDIA H100 80GB HBM3", gpu_memory_bytes=85520809984)
    node = healthy_node(pool=pool)

    def fault(at):
        GPU.objects.filter(node=node, index__lt=2).update(model="NVIDIA A100-SXM4-40GB", memory_total_bytes=42949672960)

    def clear(at):
        GPU.objects.filter(node=node).update(model="NVIDIA H100 80GB HBM3", memory_total_bytes=85520809984)

    result = lifecycle("gpu_baseline_mismatch", node, fault=fault, clear=clear)
    finding = result.opened
    assert (finding.step, finding.layer, finding.responsible_party) == ("visibility", "hardware", "provider")
    assert "2 GPU(s) differ from the baseline" in finding.summary
    assert "NVIDIA A100-SXM4-40GB" in finding.summary
    assert finding.evidence["values"]["mismatched"][0]["count"] == 2


def test_memory_within_tolerance_is_not_a_mismatch():
    pool = PoolFactory()
    BaselineFactory(pool=pool, gpu_model="", gpu_memory_bytes=85520809984)
    node = healthy_node(pool=pool, expected_gpu_model="")
    GPU.objects.filter(node=node).update(memory_total_bytes=85520809984 - 2**20)
    evaluate(now=T0)
    evaluate(now=T0 + timedelta(minutes=5))
    assert not open_findings("gpu_baseline_mismatch", node).exists()


def test_node_silent():
    node = healthy_node(delivery_form="cloud_dedicated", billing_mode="reserved")
    result = lifecycle("node_silent", node, fault=lambda at: set_status(node, silent=True, silent_since=at),
                       clear=lambda at: set_status(node, silent=False, silent_since=None, received_at=at))
    finding = result.opened
    assert (finding.step, finding.layer, finding.responsible_party) == ("visibility", "host_os", "us")
    assert finding.summary.startswith("No report since 2026-12-01 12:00:00 UTC")


def test_silent_node_keeps_other_findings_as_they_are():
    node = healthy_node()
    set_status(node, gpu_count_seen=6)
    evaluate(now=T0)
    evaluate(now=T0 + timedelta(minutes=1))
    assert open_findings("gpu_count_low", node).exists()
    set_status(node, silent=True, silent_since=T0 + timedelta(minutes=2), gpu_count_seen=8)
    evaluate(now=T0 + timedelta(hours=1))
    assert open_findings("gpu_count_low", node).exists(), "no report means unknown, not healthy"
    assert GPUStatus.objects.filter(node=node).count() == 8


def test_a_lost_gpu_the_log_line_does_not_name_is_reported_unidentified():
    """An old driver's "fallen off the bus" line with no address, and no other line of the message naming the GPU:
    the GPU is still reported lost — as an unidentified GPU of the node, with the line as evidence."""
    node = healthy_node(delivery_form="bare_metal_owned")
    start = T0 + timedelta(minutes=1)
    EventFactory(node=node, kind="gpu_lost", code=None, at=start, pci_bus_id="",
                 raw="NVRM: GPU has fallen off the bus.",
                 message="NVRM: GPU has fallen off the bus. (unattributed: no line of the same message names the GPU)")
    evaluate(now=start)
    finding = open_findings("gpu_lost", node).get()
    assert finding.gpu_id is None and finding.severity == "critical"
    assert finding.summary.startswith("an unidentified GPU is lost")
    assert finding.evidence["log_lines"][0]["line"] == "NVRM: GPU has fallen off the bus."
