"""The server's event vocabulary is the protocol's; what it acts on at once is a deliberate subset."""

from fleet.telemetry.choices import ACTIONABLE_EVENT_KINDS, SERVER_EVENT_KINDS, EventKind, EventSeverity, NvmlStatus
from fleet_agent import protocol
from fleet_agent.schema import report_schema


def test_event_kinds_severities_and_nvml_statuses_are_the_protocols():
    assert tuple(v for v in EventKind.values if v not in SERVER_EVENT_KINDS) == protocol.EVENT_KINDS
    assert not SERVER_EVENT_KINDS & set(report_schema()["$defs"]["event"]["properties"]["kind"]["enum"])
    assert set(EventSeverity.values) == set(protocol.EVENT_SEVERITIES)
    assert NvmlStatus.values == report_schema()["$defs"]["visibility"]["properties"]["nvml"]["enum"]


def test_actionable_events_differ_from_the_agents_urgent_ones_only_as_documented():
    assert set(EventKind.values) >= ACTIONABLE_EVENT_KINDS
    # Every SXid (the agent sends only fatal ones at once); no advisory notice (no health rule reads one).
    assert {EventKind.SXID, EventKind.DIAG} == ACTIONABLE_EVENT_KINDS - protocol.URGENT_EVENT_KINDS
    assert protocol.URGENT_EVENT_KINDS - ACTIONABLE_EVENT_KINDS == protocol.ADVISORY_NOTICE_KINDS
