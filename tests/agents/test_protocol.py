"""The shared vocabulary agrees with the wire schema and with what the agent actually sends."""

import pytest

from fleet_agent import protocol
from fleet_agent.agent import notice_event
from fleet_agent.collectors.stack import StackCollector
from fleet_agent.schema import report_schema
from tests.agents.test_stack import tool_runner

DEFS = report_schema()["$defs"]


def test_event_kinds_and_severities_are_the_schemas():
    assert list(protocol.EVENT_KINDS) == DEFS["event"]["properties"]["kind"]["enum"]
    assert list(protocol.EVENT_SEVERITIES) == DEFS["event"]["properties"]["severity"]["enum"]
    assert set(protocol.EVENT_KINDS) >= protocol.URGENT_EVENT_KINDS


def test_notice_kinds_are_the_schemas_and_split_into_reclaims_and_advisories():
    assert list(protocol.NOTICE_KINDS) == DEFS["notice"]["properties"]["kind"]["enum"]
    assert set(protocol.NOTICE_KINDS) == protocol.RECLAIM_NOTICE_KINDS | protocol.ADVISORY_NOTICE_KINDS
    assert not protocol.RECLAIM_NOTICE_KINDS & protocol.ADVISORY_NOTICE_KINDS
    assert {"rebalance", "maintenance"} == protocol.ADVISORY_NOTICE_KINDS
    assert set(protocol.EVENT_KINDS) >= protocol.NOTICE_EVENT_KINDS


@pytest.mark.parametrize(("notice_kind", "event_kind"), [
    ("terminate", "preemption_notice"), ("stop", "preemption_notice"), ("hibernate", "preemption_notice"),
    ("preempt", "preemption_notice"), ("rebalance", "rebalance"), ("maintenance", "maintenance"),
    (None, "preemption_notice"),
])
def test_each_notice_is_announced_by_its_event(notice_kind, event_kind):
    assert protocol.notice_event_kind(notice_kind) == event_kind
    event = notice_event({"kind": notice_kind, "received_at": "2026-12-02T10:00:00Z", "source": "test"})
    assert event["kind"] == event_kind
    assert event["kind"] in protocol.NOTICE_EVENT_KINDS
    assert protocol.is_urgent(event)  # every notice has a deadline: it goes out at once


def test_stack_fields_are_the_schemas_and_the_collectors(tmp_path):
    assert list(protocol.STACK_FIELDS) == list(DEFS["stack"]["properties"]) == DEFS["stack"]["required"]
    for name in protocol.STACK_LIST_FIELDS:
        assert "array" in DEFS["stack"]["properties"][name]["type"]
    stack = StackCollector(host_root=tmp_path, proc_root=tmp_path, runner=tool_runner({})).stack("550.54.15", "12.4")
    assert tuple(stack) == protocol.STACK_FIELDS


def test_clock_event_reasons_are_one_bit_each_and_decode_in_bit_order():
    bits = [bit for bit, _ in protocol.CLOCK_EVENT_REASONS]
    assert bits == sorted(bits) and all(bit & (bit - 1) == 0 for bit in bits)
    assert protocol.CLOCK_REASON_NAMES[protocol.CLOCK_REASON_HW_POWER_BRAKE_SLOWDOWN] == "HwPowerBrakeSlowdown"
    mask = protocol.CLOCK_REASON_HW_THERMAL_SLOWDOWN | protocol.CLOCK_REASON_GPU_IDLE | 0x8000  # an unknown bit
    assert protocol.decode_clock_event_reasons(mask) == ["GpuIdle", "HwThermalSlowdown"]
    assert protocol.decode_clock_event_reasons(0) == []
    assert protocol.decode_clock_event_reasons(None) is None
