"""Factories for the data the health engine reads: latest node/GPU status, events, change log entries."""

from datetime import UTC, datetime

import factory

from fleet.telemetry.models import ChangeLogEntry, Event, GPUStatus, NodeStatus
from tests.factories import GPUFactory, NodeFactory, SoftwareStackFactory

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
H100_MEMORY = 85520809984


class NodeStatusFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = NodeStatus

    node = factory.SubFactory(NodeFactory)
    received_at = T0
    collected_at = T0
    sequence = factory.Sequence(int)
    agent_instance_id = "agent-instance-1"
    agent_version = "0.1.0"
    interval_s = 15
    nvml_status = "ok"
    gpu_count_seen = 8
    cpu_busy_pct = 35.0
    cpu_steal_pct = 0.2
    cpu_iowait_pct = 0.5
    mem_total_bytes = 2 * 1024**4
    mem_available_bytes = 1024**4
    load1 = 12.0
    disk_await_ms_max = 0.4
    disk_util_pct_max = 3.0
    tcp_retrans_pct = 0.01


class GPUStatusFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = GPUStatus

    gpu = factory.SubFactory(GPUFactory)
    node = factory.SelfAttribute("gpu.node")
    collected_at = T0
    utilization_gpu_pct = 85.0
    utilization_memory_pct = 40.0
    memory_used_bytes = 40 * 2**30
    memory_total_bytes = H100_MEMORY
    temperature_c = 61.0
    power_draw_w = 512.0
    power_limit_w = 700.0
    sm_clock_mhz = 1980
    clock_event_reasons_mask = 0
    ecc_volatile_corrected = 0
    ecc_volatile_uncorrected = 0
    ecc_aggregate_corrected = 0
    ecc_aggregate_uncorrected = 0
    retired_pages_count = 0
    retired_pages_pending = False
    remapped_rows_correctable = 0
    remapped_rows_uncorrectable = 0
    remapped_rows_pending = False
    remapped_rows_failure = False
    pcie_gen_current = 5
    pcie_gen_max = 5
    pcie_width_current = 16
    pcie_width_max = 16
    process_count = 1
    process_memory_bytes = 40 * 2**30
    processes = factory.LazyFunction(lambda: [{"pid": 4242, "used_memory_bytes": 40 * 2**30, "name": "python"}])


class EventFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Event

    node = factory.SubFactory(NodeFactory)
    kind = "xid"
    code = 79
    severity = "critical"
    at = T0
    message = "GPU has fallen off the bus."
    pci_bus_id = ""
    raw = factory.LazyAttribute(lambda e: f"NVRM: Xid (PCI:{e.pci_bus_id or '0000:18:00'}): {e.code}, pid=<unknown>, "
                                          f"name=<unknown>, {e.message}")


class ChangeLogEntryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ChangeLogEntry

    node = factory.SubFactory(NodeFactory)
    at = T0
    field = "boot_id"
    old = "boot-a"
    new = "boot-b"
    summary = "node rebooted"


def bus_id(index: int) -> str:
    return f"00000000:{0x18 + index:02x}:00.0"


def healthy_node(*, gpus: int = 8, at: datetime = T0, stack: bool = True, status: bool = True, **node_kwargs):
    """A node that passes every rule: 8 H100s, a matching stack, a fresh report."""
    node_kwargs.setdefault("expected_gpu_count", gpus)
    node = NodeFactory(**node_kwargs)
    rows = [GPUFactory(node=node, index=i, pci_bus_id=bus_id(i)) for i in range(gpus)]
    if stack:
        node.current_stack = SoftwareStackFactory(node=node, collected_at=at)
        node.save(update_fields=["current_stack"])
    if status:
        NodeStatusFactory(node=node, received_at=at, collected_at=at, gpu_count_seen=gpus)
        for gpu in rows:
            GPUStatusFactory(gpu=gpu, node=node, collected_at=at)
    return node
