"""Report assembly: sequence, instance, inventory-on-change, urgent events, broken collectors."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fleet_agent.agent import AgentCore
from fleet_agent.collectors.stack import StackCollector
from fleet_agent.collectors.system import SystemCollector
from fleet_agent.inventory import build_inventory, inventory_hash
from fleet_agent.nvml import NvmlAdapter
from fleet_agent.protocol import is_urgent
from fleet_agent.report import MAX_EVENTS, NodeIdentity, ReportBuilder, cap_events
from fleet_agent.spool import Spool
from tests.agents.conftest import FIXTURES

FIXED = datetime(2026, 12, 2, 18, 45, tzinfo=UTC)


class StubKernelLog:
    def __init__(self):
        self.lines: list[dict] = []
        self.pci_map: dict = {}

    def collect(self):
        events, self.lines = self.lines, []
        return events

    def set_pci_map(self, mapping):
        self.pci_map = mapping


class StubCloud:
    def __init__(self, notice=None):
        self.notice = notice

    def identity(self):
        return {
            "provider": "aws",
            "instance_id": "i-0abc",
            "instance_type": "p5.48xlarge",
            "region": "us-east-1",
            "spot": True,
            "bare_metal": False,
        }

    def poll_notice(self):
        return self.notice


def _core(tmp_path, sim_nvml, *, kernel_log=None, cloud=None, spool=None):
    spool = spool or Spool(tmp_path / "spool.db")
    core = AgentCore(
        builder=ReportBuilder(
            sequences=spool, identity=NodeIdentity("m-1", "gpu-01", 42), interval_s=15, clock=lambda: FIXED
        ),
        nvml=NvmlAdapter(sim_nvml, expected_gpu_count=8),
        system=SystemCollector(FIXTURES / "proc" / "t0"),
        stack=StackCollector(
            host_root=FIXTURES / "host", proc_root=FIXTURES / "proc" / "t0", runner=lambda argv, timeout: None
        ),
        kernel_log=kernel_log,
        cloud=cloud,
        spool=spool,
        clock=lambda: FIXED,
    )
    core.refresh_cloud_identity()
    return core, spool


def test_report_identity_and_sequence(tmp_path, sim_nvml, assert_valid_report):
    core, spool = _core(tmp_path, sim_nvml)
    first, second = core.collect(), core.collect()
    assert_valid_report(first)
    assert first["schema_version"] == "1.0" and first["agent"]["instance_id"] == spool.instance_id
    assert first["node"] == {"node_id": 42, "machine_id": "m-1", "hostname": "gpu-01"}
    assert (first["sequence"], second["sequence"]) == (1, 2)
    assert first["collected_at"] == "2026-12-02T18:45:00Z" and first["interval_s"] == 15
    assert [r.sequence for r in spool.pending()] == [1, 2]  # spooled before anyone sends


def test_inventory_only_until_acknowledged_and_again_when_it_changes(tmp_path, sim_nvml):
    core, spool = _core(tmp_path, sim_nvml)
    first = core.collect()
    assert first["inventory"]["hash"] == inventory_hash(first["inventory"])
    assert first["inventory"]["stack"]["driver_version"] == "550.54.15"
    assert core.collect()["inventory"] is not None  # not acknowledged yet: still sent
    spool.ack(2)
    assert core.collect()["inventory"] is None  # server has it
    sim_nvml.driver_version = "560.35.03"  # upgraded behind our back
    changed = core.collect()
    assert changed["inventory"]["stack"]["driver_version"] == "560.35.03"
    assert changed["inventory"]["hash"] != first["inventory"]["hash"]


def test_new_instance_always_starts_with_inventory(tmp_path, sim_nvml):
    core, spool = _core(tmp_path, sim_nvml)
    core.collect()
    spool.ack(1)
    other_core, _ = _core(tmp_path / "reinstalled", sim_nvml)
    report = other_core.collect()
    assert report["sequence"] == 1 and report["inventory"] is not None
    assert report["agent"]["instance_id"] != spool.instance_id


def test_kernel_log_events_and_urgency(tmp_path, sim_nvml):
    kernel_log = StubKernelLog()
    core, spool = _core(tmp_path, sim_nvml, kernel_log=kernel_log)
    core.collect()
    assert kernel_log.pci_map["00000000:18:00.0"] == sim_nvml.gpus[0].uuid  # attribution map handed over
    assert core.collect_if_urgent() is None  # nothing happened
    kernel_log.lines = [
        {
            "kind": "aer",
            "at": "2026-12-02T18:44:00Z",
            "gpu_uuid": None,
            "pci_bus_id": None,
            "code": None,
            "severity": "info",
            "message": "corrected",
            "raw": "AER",
        }
    ]
    assert core.collect_if_urgent() is None  # not urgent: waits for the regular report
    kernel_log.lines = [
        {
            "kind": "xid",
            "at": "2026-12-02T18:44:30Z",
            "gpu_uuid": sim_nvml.gpus[0].uuid,
            "pci_bus_id": "00000000:18:00.0",
            "code": 79,
            "severity": "critical",
            "message": "Xid 79",
            "raw": "NVRM: Xid ...",
        }
    ]
    urgent = core.collect_if_urgent()
    assert [e["kind"] for e in urgent["events"]] == ["aer", "xid"]
    assert spool.pending(limit=10)[-1].urgent
    assert core.collect()["events"] == []  # not repeated


def test_cloud_notice_is_one_event_and_stays_in_the_cloud_block(tmp_path, sim_nvml):
    notice = {
        "kind": "terminate",
        "deadline": "2026-12-02T18:47:00Z",
        "received_at": "2026-12-02T18:45:00Z",
        "source": "aws.spot.instance-action",
        "detail": {"action": "terminate", "time": "2026-12-02T18:47:00Z"},
    }
    cloud = StubCloud(notice)
    core, _ = _core(tmp_path, sim_nvml, cloud=cloud)
    urgent = core.collect_if_urgent()
    event = urgent["events"][0]
    assert event["kind"] == "preemption_notice" and event["severity"] == "critical"
    assert "2026-12-02T18:47:00Z" in event["message"] and '"action": "terminate"' in event["raw"]
    assert urgent["cloud"]["notice"] == notice and urgent["cloud"]["spot"] is True
    assert core.collect_if_urgent() is None  # same notice: no second event
    later = core.collect()
    assert later["events"] == [] and later["cloud"]["notice"] == notice
    cloud.notice = dict(
        notice, kind="rebalance", deadline=None, source="aws.events.recommendations.rebalance"
    )
    assert core.collect_if_urgent()["events"][0]["kind"] == "rebalance"


def test_a_notice_payload_past_the_schema_is_trimmed_not_lost(tmp_path, sim_nvml, assert_valid_report):
    deep: object = "bottom"
    for _ in range(12):
        deep = {"next": deep, "list": [deep]}
    detail = {"deep": deep, "long": "x" * 10_000, **{f"k{i}": i for i in range(100)}, "y" * 300: float("inf")}
    notice = {"kind": "maintenance", "deadline": None, "received_at": None, "source": "azure.scheduledevents",
              "detail": detail}
    core, _ = _core(tmp_path, sim_nvml, cloud=StubCloud(notice))
    report = core.collect_if_urgent()
    assert_valid_report(report)
    sent = report["cloud"]["notice"]["detail"]
    assert len(sent) == 64 and sent["deep"]["next"]["next"]["next"]["next"]["next"] != "bottom"
    assert len(sent["long"]) == 4096
    assert isinstance(sent["deep"]["next"]["next"]["next"]["next"]["next"], str)  # level 7: the JSON text


def test_a_broken_collector_costs_its_block_not_the_report(tmp_path, sim_nvml, assert_valid_report):
    core, _ = _core(tmp_path, sim_nvml)

    def explode():
        raise RuntimeError("boom")

    core.system.collect = explode
    report = core.collect()
    assert report["system"] is None and report["gpus"]
    assert report["events"][0]["kind"] == "agent_error" and "boom" in report["events"][0]["message"]
    assert_valid_report(report)


def test_events_are_capped_with_a_summary():
    events = [{"kind": "aer"}] * (MAX_EVENTS + 5)
    capped = cap_events(events, lambda: FIXED)
    assert (
        len(capped) == MAX_EVENTS
        and capped[-1]["kind"] == "agent_error"
        and "6 more" in capped[-1]["message"]
    )


@pytest.mark.parametrize(
    ("event", "urgent"),
    [
        ({"kind": "xid", "severity": "info"}, True),
        ({"kind": "gpu_lost", "severity": "critical"}, True),
        ({"kind": "preemption_notice", "severity": "critical"}, True),
        ({"kind": "sxid", "severity": "critical"}, True),
        ({"kind": "sxid", "severity": "warning"}, False),
        ({"kind": "aer", "severity": "critical"}, False),
        ({"kind": "agent_error", "severity": "warning"}, False),
    ],
)
def test_which_events_are_urgent(event, urgent):
    assert is_urgent(event) is urgent


def test_inventory_hash_is_canonical():
    one = build_inventory(
        host={"b": 1, "a": 2}, gpus=[{"index": 0, "uuid": "u", "extra": 9}], stack={"x": None}
    )
    two = build_inventory(host={"a": 2, "b": 1}, gpus=[{"uuid": "u", "index": 0}], stack={"x": None})
    assert one["hash"] == two["hash"] and len(one["hash"]) == 64
    assert "extra" not in one["gpus"][0]


def test_temperature_thresholds_travel_in_the_inventory_only(tmp_path, sim_nvml, assert_valid_report):
    core, _ = _core(tmp_path, sim_nvml)
    report = core.collect()
    assert_valid_report(report)
    assert report["inventory"]["gpus"][0]["temperature_thresholds"] == {
        "shutdown_c": 92, "slowdown_c": 89, "gpu_max_c": 87}
    assert all("temperature_thresholds" not in gpu for gpu in report["gpus"])
    sim_nvml.gpus[0].temperature_thresholds = {}
    core.nvml.forget_static()
    changed = core.collect()  # a changed threshold is an inventory change
    assert_valid_report(changed)
    assert changed["inventory"]["gpus"][0]["temperature_thresholds"] is None
    assert changed["inventory"]["hash"] != report["inventory"]["hash"]
