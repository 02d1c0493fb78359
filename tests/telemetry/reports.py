"""Build protocol-v1 reports for server tests (the agent's own simulator is used in end-to-end tests)."""

import copy
import uuid
from datetime import UTC, datetime

H100 = "NVIDIA H100 80GB HBM3"


def gpu_entry(index: int, **overrides) -> dict:
    entry = {
        "index": index, "uuid": f"GPU-{index:08d}-aaaa-bbbb-cccc-000000000000", "name": H100,
        "serial": f"SN{index:06d}", "pci_bus_id": f"00000000:{index + 1:02x}:00.0", "lost": False,
        "memory_total_bytes": 85520809984, "memory_used_bytes": 1 << 30,
        "utilization_gpu_pct": 90, "utilization_memory_pct": 40, "temperature_c": 60, "power_draw_w": 500.0,
        "power_limit_w": 700.0, "sm_clock_mhz": 1980, "clock_event_reasons_mask": 0, "clock_event_reasons": [],
        "ecc": {"volatile_corrected": 0, "volatile_uncorrected": 0, "aggregate_corrected": 0,
                "aggregate_uncorrected": 0},
        "retired_pages": {"count": 0, "pending": False},
        "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False},
        "pcie": {"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16},
        "compute_capability": "9.0", "processes": [{"pid": 100 + index, "used_memory_bytes": 1 << 30,
                                                     "name": "python"}],
        "nvlink": [1, 1],
    }
    entry.update(overrides)
    return entry


def inventory(gpus: list[dict], boot_id: str = "1d1c8f5e-0000-4000-8000-000000000001", **stack) -> dict:
    base_stack = {"driver_version": "550.54.15", "cuda_driver_version": "12.4", "cuda_toolkits": ["12.4"],
                  "python": "3.11.7",
                  "frameworks": [{"name": "torch", "version": "2.4.0", "cuda": "12.4",
                                  "arch_list": ["sm_80", "sm_90"]}],
                  "container_runtime": "docker 26.1.0", "nvidia_container_toolkit": "1.15.0",
                  "os": "Ubuntu 22.04.4 LTS", "kernel": "5.15.0-105-generic"}
    base_stack.update(stack)
    inv = {"host": {"os": base_stack["os"], "kernel": base_stack["kernel"], "cpu_model": "Xeon", "cpu_count": 96,
                    "mem_total_bytes": 2 << 40, "boot_id": boot_id},
           "gpus": [{k: g[k] for k in ("index", "uuid", "name", "serial", "pci_bus_id", "memory_total_bytes",
                                       "compute_capability")} for g in gpus],
           "stack": base_stack}
    inv["hash"] = uuid.uuid5(uuid.NAMESPACE_OID, repr(sorted(str(inv).split()))).hex * 2
    return inv


class ReportBuilder:
    """Produces a stream of reports for one agent instance with growing sequence numbers."""

    def __init__(self, node_id: int, *, gpus: int = 8, instance_id: str | None = None):
        self.node_id = node_id
        self.instance_id = instance_id or str(uuid.uuid4())
        self.sequence = 0
        self.gpus = [gpu_entry(i) for i in range(gpus)]

    def report(self, *, at: datetime | None = None, with_inventory: bool = False, events=(), stack=None,
               boot_id: str = "1d1c8f5e-0000-4000-8000-000000000001", **overrides) -> dict:
        self.sequence += 1
        at = at or datetime.now(UTC)
        report = {
            "schema_version": "1.0",
            "agent": {"version": "0.1.0", "instance_id": self.instance_id},
            "node": {"node_id": self.node_id, "machine_id": f"machine-{self.node_id:08d}", "hostname": "gpu-x"},
            "sequence": self.sequence,
            "collected_at": at.isoformat().replace("+00:00", "Z"),
            "interval_s": 15,
            "visibility": {"nvml": "ok", "message": None, "gpu_count": len(self.gpus),
                           "expected_gpu_count": len(self.gpus), "lost_gpus": []},
            "gpus": copy.deepcopy(self.gpus),
            "system": {"cpu_busy_pct": 35.0, "cpu_steal_pct": 0.1, "cpu_iowait_pct": 0.5, "cpu_count": 96,
                       "mem_total_bytes": 1000, "mem_available_bytes": 600, "load1": 4.0, "load5": 4.0,
                       "load15": 4.0, "disks": [{"name": "nvme0n1", "read_bytes_per_s": 1.0,
                                                 "write_bytes_per_s": 2.0, "await_ms": 0.3, "util_pct": 5.0}],
                       "tcp_retrans_pct": 0.01, "pressure": None},
            "cloud": {"provider": None, "instance_id": None, "instance_type": None, "region": None, "spot": None,
                      "bare_metal": True, "notice": None},
            "checkpoint": None,
            "events": list(events),
            "inventory": inventory(self.gpus, boot_id, **(stack or {})) if with_inventory else None,
        }
        report.update(overrides)
        return report


def assert_second_report_refused(agent, mutate, field: str):
    """Send a good report and a bad one (`mutate` spoils it) in one batch: a 400 naming `field`, nothing stored."""
    from fleet.telemetry.models import Event, NodeSample, NodeStatus

    builder = ReportBuilder(agent.node_id)
    good = builder.report(with_inventory=True)
    bad = builder.report()
    mutate(bad)
    response = agent.send(good, bad)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert any(name.startswith(field) for name in error["fields"]), error
    assert (NodeStatus.objects.count(), stored_reports(NodeSample), Event.objects.count()) == (0, 0, 0)


def stored_reports(model, **filters) -> int:
    """How many reports the history of `model` (NodeSample or GPUSample) holds: rows are buckets of reports."""
    from django.db.models import Sum

    return model.objects.filter(**filters).aggregate(n=Sum("samples"))["n"] or 0
