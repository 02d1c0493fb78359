from datetime import timedelta

import pytest

from fleet.health.models import Rule, RuleOverride
from fleet.health.services.evaluation import evaluate
from fleet.inventory.models import GPU
from fleet.telemetry.models import GPUStatus
from tests.factories import PoolFactory

from .factories import H100_MEMORY, T0, healthy_node
from .harness import lifecycle, open_findings, set_gpu, set_status

pytestmark = pytest.mark.django_db


def test_gpu_memory_above_95_percent_sustained():
    node = healthy_node()
    gpu = GPU.objects.get(node=node, index=2)
    result = lifecycle("gpu_memory_pressure", node,
                       fault=lambda at: set_gpu(gpu, memory_used_bytes=int(H100_MEMORY * 0.97)),
                       clear=lambda at: set_gpu(gpu, memory_used_bytes=int(H100_MEMORY * 0.5)))
    finding = result.opened
    assert (finding.step, finding.layer, finding.responsible_party) == ("capacity", "application", "us")
    assert finding.gpu_id == gpu.pk
    assert finding.summary.startswith("GPU 2 memory 97.0 % used")
    assert finding.evidence["values"]["memory_used_pct"] == pytest.approx(97.0, abs=0.01)


def test_memory_threshold_per_pool_override():
    pool = PoolFactory()
    node = healthy_node(pool=pool)
    other = healthy_node()
    GPUStatus.objects.filter(node__in=[node, other], gpu__index=0).update(memory_used_bytes=int(H100_MEMORY * 0.9))
    RuleOverride.objects.create(rule=Rule.objects.get(slug="gpu_memory_pressure"), pool=pool,
                                params={"threshold_pct": 85})
    evaluate(now=T0)
    evaluate(now=T0 + timedelta(minutes=5))
    finding = open_findings("gpu_memory_pressure").get()
    assert finding.node_id == node.pk, "only the pool with the lower threshold fires"
    assert finding.evidence["rule"]["pool_override"] is True
    assert finding.evidence["rule"]["params"]["threshold_pct"] == 85


def test_residual_processes_holding_memory_at_zero_utilisation():
    node = healthy_node()
    gpu = GPU.objects.get(node=node, index=6)
    processes = [{"pid": 991, "used_memory_bytes": 12 * 2**30, "name": "python"},
                 {"pid": 992, "used_memory_bytes": 2**30, "name": "python"}]

    def fault(at):
        set_gpu(gpu, utilization_gpu_pct=0, process_count=2, process_memory_bytes=13 * 2**30, processes=processes)

    result = lifecycle("residual_gpu_processes", node, fault=fault,
                       clear=lambda at: set_gpu(gpu, process_count=0, process_memory_bytes=0, processes=[]))
    finding = result.opened
    assert (finding.step, finding.layer, finding.responsible_party) == ("capacity", "application", "us")
    assert finding.summary == "GPU 6: 2 process(es) hold 13.0 GiB at 0 % utilisation (pids 991, 992)"
    assert result.opened_at - finding.first_seen == timedelta(minutes=10)


def test_low_gpu_utilisation_while_cpu_is_saturated():
    node = healthy_node()

    def fault(at):
        set_status(node, cpu_busy_pct=97.0)
        GPUStatus.objects.filter(node=node).update(utilization_gpu_pct=12.0)

    def clear(at):
        GPUStatus.objects.filter(node=node).update(utilization_gpu_pct=88.0)

    result = lifecycle("data_pipeline_bottleneck", node, fault=fault, clear=clear)
    finding = result.opened
    assert (finding.step, finding.layer, finding.responsible_party) == ("capacity", "application", "us")
    assert "GPUs average 12 % busy while the CPU is 97 % busy" in finding.summary
    assert result.opened_at - finding.first_seen == timedelta(minutes=5)


def test_busy_gpus_with_busy_cpu_are_fine():
    node = healthy_node()
    set_status(node, cpu_busy_pct=97.0)
    evaluate(now=T0)
    evaluate(now=T0 + timedelta(minutes=10))
    assert not open_findings("data_pipeline_bottleneck", node).exists()


def test_high_disk_io_wait():
    node = healthy_node(delivery_form="cloud_shared")
    result = lifecycle("disk_io_wait", node,
                       fault=lambda at: set_status(node, cpu_iowait_pct=35.0, disk_await_ms_max=450.0),
                       clear=lambda at: set_status(node, cpu_iowait_pct=1.0, disk_await_ms_max=1.0))
    finding = result.opened
    assert (finding.step, finding.layer, finding.responsible_party) == ("capacity", "host_os", "provider")
    assert "CPU I/O wait 35.0 %" in finding.summary
    assert "disk await 450 ms" in finding.summary


def test_tcp_retransmits_above_one_percent():
    node = healthy_node(delivery_form="bare_metal_hosted")
    result = lifecycle("tcp_retransmits", node, fault=lambda at: set_status(node, tcp_retrans_pct=2.5),
                       clear=lambda at: set_status(node, tcp_retrans_pct=0.05))
    finding = result.opened
    assert (finding.step, finding.layer, finding.responsible_party) == ("capacity", "host_os", "us")
    assert finding.summary == "TCP retransmits 2.50 % of sent segments (threshold 1 %)"
