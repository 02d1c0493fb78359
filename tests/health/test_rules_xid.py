from datetime import timedelta

import pytest

from fleet.health.choices import Severity, XidAction
from fleet.health.models import XidPolicy
from fleet.health.rules.catalog import RULES_BY_SLUG
from fleet.health.rules.xid import unknown_policy
from fleet.health.services.evaluation import evaluate
from fleet.inventory.models import GPU
from fleet_agent.xid import (
    ACTIONS,
    FATAL_XID_SUPPORT_THRESHOLD,
    REBOOTS_BEFORE_HARDWARE,
    SEVERITIES,
    UNKNOWN_XID,
    XID_CATALOG,
)

from .factories import T0, ChangeLogEntryFactory, EventFactory, healthy_node
from .harness import open_findings

pytestmark = pytest.mark.django_db

START = T0 + timedelta(minutes=1)


def _xid(node, code, at, *, gpu=None, bus="", message="", severity="critical"):
    return EventFactory(node=node, kind="xid", code=code, at=at, gpu=gpu, pci_bus_id=bus, severity=severity,
                        message=message or f"Xid {code}")


def test_policy_table_is_seeded_from_the_agent_catalog():
    """The server's table and the agent's catalog say the same about every code; the layer is the server's."""
    rows = {row["code"]: row for row in XidPolicy.objects.values("code", "meaning", "severity", "action",
                                                                  "escalation")}
    assert rows.keys() == XID_CATALOG.keys()
    for code, entry in XID_CATALOG.items():
        assert rows[code] == {"code": code, "meaning": entry["meaning"], "severity": entry["severity"],
                              "action": entry["action"], "escalation": entry["escalation"]}, code
    xid79 = XidPolicy.objects.get(code=79)
    assert (xid79.severity, xid79.action, xid79.layer, xid79.changed_in_version) == ("critical", "reboot",
                                                                                     "hardware", 1)
    assert XidPolicy.objects.get(code=13).layer == "application"
    assert XidPolicy.objects.get(code=45).action == "ignore"
    assert set(range(144, 151)) <= set(XidPolicy.objects.values_list("code", flat=True))


def test_policy_vocabulary_and_defaults_are_the_catalogs():
    assert set(Severity.values) == set(SEVERITIES)
    assert set(XidAction.values) == set(ACTIONS)
    unknown = unknown_policy(9999)
    assert (unknown["meaning"], unknown["severity"], unknown["action"], unknown["escalation"], unknown["known"]) == (
        UNKNOWN_XID["meaning"], UNKNOWN_XID["severity"], UNKNOWN_XID["action"], UNKNOWN_XID["escalation"], False)
    defaults = RULES_BY_SLUG["xid_escalation"].default_params()
    assert defaults["reboots_before_hardware"] == REBOOTS_BEFORE_HARDWARE
    assert (defaults["fatal_count"], defaults["fatal_window_s"]) == FATAL_XID_SUPPORT_THRESHOLD


def test_xid_79_opens_at_once_then_resolves_after_a_reboot_and_the_clear_hold():
    node = healthy_node(delivery_form="cloud_dedicated")
    gpu = GPU.objects.get(node=node, index=2)
    _xid(node, 79, START, gpu=gpu, message="GPU has fallen off the bus.")
    result = evaluate(now=START + timedelta(seconds=1))
    assert result.opened == 1
    finding = open_findings("xid", node).get()
    assert (finding.step, finding.layer, finding.responsible_party) == ("platform_hardware", "hardware", "provider")
    assert finding.subject == f"gpu:{gpu.pk}:xid:79"
    assert finding.gpu_id == gpu.pk
    assert finding.severity == "critical"
    assert finding.xid_policy_version == 1
    assert finding.summary.startswith("Xid 79 on GPU 2: GPU has fallen off the bus (1× since 12:01:00 UTC)")
    assert "first action: reboot the machine" in finding.summary
    assert finding.evidence["log_lines"][0]["line"].startswith("NVRM: Xid (PCI:")
    assert finding.evidence["values"]["policy"]["action"] == "reboot"

    ChangeLogEntryFactory(node=node, at=START + timedelta(minutes=5))  # the machine rebooted
    evaluate(now=START + timedelta(minutes=6))
    assert open_findings("xid", node).exists(), "clear-hold of 300 s still running"
    evaluate(now=START + timedelta(minutes=11))
    assert not open_findings("xid", node).exists()


def test_same_xid_routes_to_the_provider_on_cloud_and_to_us_and_the_vendor_on_owned_bare_metal():
    cloud = healthy_node(delivery_form="cloud_dedicated")
    owned = healthy_node(delivery_form="bare_metal_owned")
    for node in (cloud, owned):
        _xid(node, 79, START, gpu=GPU.objects.get(node=node, index=0))
    evaluate(now=START)
    on_cloud, on_owned = open_findings("xid", cloud).get(), open_findings("xid", owned).get()
    assert (on_cloud.layer, on_owned.layer) == ("hardware", "hardware")
    assert on_cloud.responsible_party == "provider"
    assert on_cloud.action_kind == "provider_ticket"
    assert "open a ticket with" in on_cloud.recommended_action
    assert "ask for the instance to be replaced" in on_cloud.recommended_action
    assert on_owned.responsible_party == "hardware_vendor"
    assert on_owned.action_kind == "vendor_rma"
    assert on_owned.recommended_action.startswith("Our hardware, with vendor support: drain the node, then reboot "
                                                  "the machine")
    assert "open an RMA with the hardware vendor" in on_owned.recommended_action


def test_application_xid_is_ours_and_a_warning():
    node = healthy_node(delivery_form="cloud_shared")
    _xid(node, 13, START, bus="0000:1a:00.0", severity="warning")
    evaluate(now=START)
    finding = open_findings("xid", node).get()
    assert (finding.layer, finding.responsible_party, finding.severity) == ("application", "us", "warning")
    assert finding.gpu.index == 2, "the PCI address maps to the GPU"
    assert "restart the application" in finding.recommended_action


def test_xid_45_alone_is_ignored_and_unknown_codes_are_watched():
    node = healthy_node()
    _xid(node, 45, START)
    evaluate(now=START)
    assert not open_findings("xid", node).exists()
    _xid(node, 999, START)
    evaluate(now=START + timedelta(seconds=15))
    finding = open_findings("xid", node).get()
    assert finding.summary.startswith("Xid 999 on an unidentified GPU: unknown Xid")
    assert finding.evidence["values"]["policy_known"] is False
    assert finding.severity == "warning"


def test_xid_without_reboot_resolves_after_its_window():
    node = healthy_node()
    _xid(node, 31, START, gpu=GPU.objects.get(node=node, index=0))
    evaluate(now=START)
    assert open_findings("xid", node).exists()
    evaluate(now=START + timedelta(hours=1))
    assert open_findings("xid", node).exists()
    evaluate(now=START + timedelta(hours=1, seconds=1))
    evaluate(now=START + timedelta(hours=1, minutes=5, seconds=1))
    assert not open_findings("xid", node).exists()


def test_policy_edit_changes_the_classification_and_the_recorded_version():
    node = healthy_node()
    _xid(node, 92, START, gpu=GPU.objects.get(node=node, index=0), severity="warning")
    evaluate(now=START)
    finding = open_findings("xid", node).get()
    assert (finding.severity, finding.xid_policy_version) == ("warning", 1)
    XidPolicy.objects.filter(code=92).update(severity="critical", action="reset_gpu", changed_in_version=2)
    evaluate(now=START + timedelta(seconds=15))
    finding.refresh_from_db()
    assert (finding.severity, finding.xid_policy_version) == ("critical", 2)
    assert "first action: reset the GPU" in finding.summary


def test_escalation_when_the_same_xid_returns_after_two_reboots():
    node = healthy_node(delivery_form="bare_metal_owned")
    gpu = GPU.objects.get(node=node, index=3)
    day = timedelta(days=1)
    _xid(node, 79, START, gpu=gpu)
    ChangeLogEntryFactory(node=node, at=START + timedelta(hours=1))
    _xid(node, 79, START + day, gpu=gpu)
    evaluate(now=START + day)
    assert not open_findings("xid_escalation", node).exists(), "back after one reboot: not yet hardware"

    ChangeLogEntryFactory(node=node, at=START + day + timedelta(hours=1))
    _xid(node, 79, START + 2 * day, gpu=gpu)
    evaluate(now=START + 2 * day)
    finding = open_findings("xid_escalation", node).get()
    assert (finding.step, finding.layer, finding.responsible_party) == ("platform_hardware", "hardware",
                                                                         "hardware_vendor")
    assert finding.subject == f"gpu:{gpu.pk}"
    assert finding.summary == "GPU 3: Xid 79 came back after 2 reboots — escalated: hardware, RMA / replace the GPU"
    assert finding.evidence["values"]["recurring"] == [{"code": 79, "boots_with_xid": 3}]
    assert finding.xid_policy_version == 1

    # Quiet for the recurrence window (7 days) plus the clear-hold (1 h): resolved.
    evaluate(now=START + 9 * day + timedelta(seconds=1))
    assert open_findings("xid_escalation", node).exists()
    evaluate(now=START + 9 * day + timedelta(hours=1, seconds=1))
    assert not open_findings("xid_escalation", node).exists()


def test_escalation_on_five_fatal_xids_in_a_day_on_one_gpu():
    node = healthy_node(delivery_form="cloud_dedicated")
    gpu, other = GPU.objects.get(node=node, index=0), GPU.objects.get(node=node, index=1)
    for i, code in enumerate([48, 48, 95, 48]):
        _xid(node, code, START + timedelta(hours=i), gpu=gpu)
    _xid(node, 48, START, gpu=other)
    _xid(node, 13, START, gpu=gpu, severity="warning")  # not fatal
    evaluate(now=START + timedelta(hours=5))
    assert not open_findings("xid_escalation", node).exists()
    _xid(node, 48, START + timedelta(hours=5), gpu=gpu)
    evaluate(now=START + timedelta(hours=5, seconds=15))
    finding = open_findings("xid_escalation", node).get()
    assert finding.gpu_id == gpu.pk
    assert finding.summary.startswith("GPU 0: 5 fatal Xids (48, 95) within 24 h")
    assert finding.responsible_party == "provider"
    assert finding.evidence["values"]["fatal_count"] == 5


def test_a_burst_of_nonfatal_nvlink5_lines_is_watched_and_one_fatal_line_resets():
    """NVIDIA decodes Xid 144–150 per sub-code and the line says which: non-fatal ones are watched (no reset, no
    climb to an RMA); a fatal one among them asks for a GPU reset."""
    node = healthy_node(delivery_form="bare_metal_owned")
    gpu = GPU.objects.get(node=node, index=5)
    nonfatal = "Xid 145 (NVLink5 error): RLW, nonfatal, cross-contain=0, injected=0, Link 3 (0x00000004 0x1)"
    for minute in range(6):
        _xid(node, 145, START + timedelta(minutes=minute), gpu=gpu, message=nonfatal, severity="warning")
    evaluate(now=START + timedelta(minutes=6))
    finding = open_findings("xid", node).get()
    assert (finding.severity, finding.evidence["values"]["action"]) == ("warning", "watch")
    assert finding.evidence["values"]["decoded"] == "non-fatal on link 3"
    assert not open_findings("xid_escalation", node).exists()

    _xid(node, 145, START + timedelta(minutes=7), gpu=gpu, severity="critical",
         message="Xid 145 (NVLink5 error): RLW, fatal, cross-contain=0, injected=0, Link 3 (0x00000002 0x1)")
    evaluate(now=START + timedelta(minutes=8))
    finding = open_findings("xid", node).get()
    assert (finding.severity, finding.evidence["values"]["action"]) == ("critical", "reset_gpu")
    assert "reset the GPU" in finding.summary


def test_xid_154_acts_on_the_recovery_action_its_line_states():
    node = healthy_node(delivery_form="bare_metal_owned")
    gpu = GPU.objects.get(node=node, index=1)
    _xid(node, 154, START, gpu=gpu, severity="critical", message="Xid 154 (GPU recovery action changed (refers to "
         "another Xid)): GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)")
    evaluate(now=START + timedelta(seconds=1))
    finding = open_findings("xid", node).get()
    assert (finding.severity, finding.evidence["values"]["action"]) == ("critical", "reboot")
    assert finding.evidence["values"]["decoded"] == "the driver asks for a node reboot"
