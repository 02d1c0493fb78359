"""The remediation each class of Xid gets, end to end through the real rule engine and the real intake (on
PostgreSQL in CI's first pass): the kernel line's code and text → the finding → the policy → the incident's
workflow and the first step that acts. The expectations are NVIDIA's resolutions (its Xid catalog) carried to the
delivery form's owner, as an operator would expect them."""

import pytest

from fleet.health.models import Finding
from fleet.health.services.evaluation import evaluate
from fleet.inventory.models import GPU
from fleet.remediation.models import FindingIntake, Incident
from fleet.remediation.services.intake import findings_intake
from tests.health.factories import T0, EventFactory

from .helpers import node_in, pool_for

pytestmark = pytest.mark.django_db

PREPARATION = {"cordon", "drain", "collect_evidence", "checkpoint"}


def _fault(form: str, code: int, message: str = "", severity: str = "critical"):
    node = node_in(pool_for(form))
    EventFactory(node=node, gpu=GPU.objects.get(node=node, index=3), kind="xid", code=code, at=T0,
                 severity=severity, message=message or f"Xid {code}")
    evaluate(node_ids=[node.pk], now=T0)
    findings_intake(now=T0)
    return node


def _acting_step(incident: Incident) -> str:
    return next(step["kind"] for step in incident.plan if step["kind"] not in PREPARATION)


@pytest.mark.parametrize(("form", "code", "message", "workflow", "first_action"), [
    # RESET_GPU in NVIDIA's catalog, on our own metal: reset the GPU first.
    ("bare_metal_owned", 143, "GPU initialization error", "owned-gpu-reset", "reset_gpu"),
    ("bare_metal_owned", 109, "Context Switch Timeout Error", "owned-gpu-reset", "reset_gpu"),
    # RESTART_BM (fallen off the bus): reboot, then RMA if it comes back.
    ("bare_metal_owned", 79, "GPU has fallen off the bus.", "owned-reboot", "reboot"),
    # A cloud instance's hardware is the provider's: replace the instance.
    ("cloud_dedicated", 79, "GPU has fallen off the bus.", "cloud-replace", "open_ticket"),
    ("cloud_dedicated", 64, "GPU memory remapping failure", "cloud-replace", "open_ticket"),
    # A hosted server's hardware: the provider's hardware ticket.
    ("bare_metal_hosted", 48, "An uncorrectable double bit error", "hosted-hardware-ticket", "open_ticket"),
    # A fatal NVLink5 line on our metal: NVIDIA's decode resets the GPU.
    ("bare_metal_owned", 145, "RLW, fatal, cross-contain=0, injected=0, Link 3 (0x00000002)", "owned-gpu-reset",
     "reset_gpu"),
])
def test_each_class_opens_the_owners_workflow_with_nvidias_first_action(form, code, message, workflow,
                                                                        first_action):
    node = _fault(form, code, message)
    incident = Incident.objects.get(node=node)
    assert incident.workflow.slug == workflow and incident.cause == f"xid:{code}"
    assert _acting_step(incident) == first_action


@pytest.mark.parametrize(("code", "message", "severity"), [
    (13, "Graphics Exception: ESR 0x404600=0x80000002", "warning"),  # the application's: restart it
    (63, "Row Remapper: New row marked for remapping", "info"),      # benign until the next reset
    (145, "RLW, nonfatal, cross-contain=0, injected=0, Link 3 (0x00000004)", "warning"),  # non-fatal NVLink5
])
def test_application_benign_and_nonfatal_classes_open_no_incident(code, message, severity):
    node = _fault("bare_metal_owned", code, message, severity=severity)
    assert not Incident.objects.filter(node=node).exists()
    finding = Finding.objects.filter(node=node, rule__slug="xid").first()
    if code == 63:
        assert finding is None  # NVIDIA: IGNORE — the pending remap is pending_page_retirement's to report
        return
    assert finding.severity == "warning"
    if code == 13:
        assert finding.layer == "application" and "restart the application" in finding.summary
    assert FindingIntake.objects.get(finding=finding).outcome in ("no_policy", "ignored")
