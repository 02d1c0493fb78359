"""The cause-and-consequence mechanism (rules declare what they explain) and the sharper verdicts, rule by rule.
The end-to-end versions, through the real agent and the live API, are in tests/integration/test_verdict_scenarios.py.
"""

from datetime import timedelta

import pytest

from fleet.health.models import Finding, Rule
from fleet.health.routing import route
from fleet.health.rules.base import Explains
from fleet.health.rules.catalog import RULES, RULES_BY_SLUG
from fleet.health.rules.software_chain import is_datacenter_gpu
from fleet.health.selectors import node_triage
from fleet.health.selectors.triage import findings_explained
from fleet.health.services.evaluation import evaluate
from fleet.inventory.choices import Layer
from fleet.inventory.models import GPU, SoftwareStack
from fleet.telemetry.models import GPUStatus
from fleet_agent.protocol import CLOCK_REASON_SW_THERMAL_SLOWDOWN

from .factories import T0, ChangeLogEntryFactory, EventFactory, healthy_node
from .harness import open_findings, set_gpu, set_status

pytestmark = pytest.mark.django_db


def _xid(node, code, at, gpu):
    return EventFactory(node=node, kind="xid", code=code, at=at, gpu=gpu, message=f"Xid {code}")


def test_every_explains_declaration_names_rules_that_exist():
    for rule in RULES:
        for spec in rule.explains:
            assert set(spec.rules) <= RULES_BY_SLUG.keys(), rule.slug


def test_contained_ecc_counters_agree_with_xid_94():
    node = healthy_node()
    gpu = GPU.objects.get(node=node, index=2)
    set_gpu(gpu, ecc_volatile_uncorrected=1, remapped_rows_pending=True)
    _xid(node, 94, T0, gpu)
    evaluate(now=T0 + timedelta(seconds=5))
    ecc = open_findings("ecc_uncorrectable", node).get()
    assert ecc.severity == "warning"
    assert "contained (Xid 94)" in ecc.summary and "restart the application" in ecc.summary
    triage = node_triage(node=node, now=T0 + timedelta(seconds=6))
    assert triage["headline_finding"].rule.slug == "xid"
    assert "reset" not in triage["headline"].lower()
    assert {c["rule"] for c in triage["consequences"]} == {"ecc_uncorrectable", "pending_page_retirement"}


def test_one_uncontained_error_makes_the_gpu_uncontained():
    node = healthy_node()
    gpu = GPU.objects.get(node=node, index=2)
    set_gpu(gpu, ecc_volatile_uncorrected=2)
    _xid(node, 94, T0, gpu)
    _xid(node, 95, T0 + timedelta(seconds=1), gpu)
    evaluate(now=T0 + timedelta(seconds=5))
    ecc = open_findings("ecc_uncorrectable", node).get()
    assert ecc.severity == "critical" and "(uncontained)" in ecc.summary


def test_ecc_counters_without_any_xid_keep_their_own_verdict():
    node = healthy_node()
    set_gpu(GPU.objects.get(node=node, index=2), ecc_volatile_uncorrected=1)
    evaluate(now=T0 + timedelta(seconds=5))
    ecc = open_findings("ecc_uncorrectable", node).get()
    assert ecc.severity == "critical" and ecc.evidence["values"]["containment"] is None


def test_a_warning_does_not_explain_a_hung_process():
    node = healthy_node()
    gpu = GPU.objects.get(node=node, index=1)
    set_gpu(gpu, utilization_gpu_pct=0)
    Rule.objects.filter(slug="residual_gpu_processes").update(duration_s=0)
    _xid(node, 13, T0, gpu)  # an application Xid, warning
    evaluate(now=T0 + timedelta(seconds=5))
    triage = node_triage(node=node, now=T0 + timedelta(seconds=6))
    assert triage["headline_finding"].rule.slug == "residual_gpu_processes"
    assert triage["consequences"] == []


def test_an_announced_reclaim_explains_a_silent_on_demand_node():
    node = healthy_node(billing_mode="on_demand", delivery_form="cloud_dedicated")
    Rule.objects.filter(slug="node_silent").update(duration_s=0)
    set_status(node, silent=True, silent_since=T0, notice_kind="stop", notice_deadline=T0 + timedelta(minutes=2))
    evaluate(now=T0 + timedelta(seconds=30))
    assert open_findings("node_silent", node).exists()
    triage = node_triage(node=node, now=T0 + timedelta(seconds=31))
    assert triage["headline_finding"].rule.slug == "preemption_notice"
    assert [c["rule"] for c in triage["consequences"]] == ["node_silent"]
    assert triage["steps"][0]["reason"].startswith("No report since")
    assert "a consequence of: The cloud announced stop" in triage["steps"][0]["reason"]


def test_room_thermal_needs_most_gpus():
    node = healthy_node()
    Rule.objects.filter(slug__in=["room_thermal_throttling", "thermal_throttling"]).update(duration_s=0)
    hot = CLOCK_REASON_SW_THERMAL_SLOWDOWN
    for index in range(3):
        set_gpu(GPU.objects.get(node=node, index=index), clock_event_reasons_mask=hot, temperature_c=90)
    evaluate(now=T0 + timedelta(seconds=5))
    assert not open_findings("room_thermal_throttling", node).exists(), "3 of 8 is not the room"
    assert open_findings("thermal_throttling", node).count() == 3
    GPUStatus.objects.filter(node=node, gpu__index__in=[3, 4]).update(clock_event_reasons_mask=hot, temperature_c=91)
    evaluate(now=T0 + timedelta(seconds=20))
    room = open_findings("room_thermal_throttling", node).get()
    assert room.layer == Layer.FACILITY
    assert room.evidence["values"]["gpu_indices"] == [0, 1, 2, 3, 4]
    triage = node_triage(node=node, now=T0 + timedelta(seconds=21))
    assert triage["headline_finding"].pk == room.pk
    assert len(triage["consequences"]) == 5


def test_toolkit_alone_above_the_ceiling_is_a_warning_on_the_cuda_runtime_layer():
    node = healthy_node()
    SoftwareStack.objects.filter(pk=node.current_stack_id).update(cuda_toolkits=["12.4", "12.8"])
    evaluate(now=T0)
    finding = open_findings("cuda_driver_too_old", node).get()
    assert (finding.layer, finding.severity) == ("cuda_runtime", "warning")
    assert "remove or stop using the CUDA toolkit(s) newer than 12.4" in finding.evidence["remedy"]
    assert "or install cuda-compat for CUDA 12.8" in finding.evidence["remedy"]


def test_cuda_compat_raises_the_ceiling_only_as_far_as_it_goes():
    node = healthy_node()
    SoftwareStack.objects.filter(pk=node.current_stack_id).update(frameworks=[
        {"name": "torch", "version": "2.9.0", "cuda": "13.0", "arch_list": ["sm_90"]},
        {"name": "cuda-compat", "version": "570.86.10", "cuda": "12.8", "arch_list": None, "kind": "cuda_compat"}])
    evaluate(now=T0)
    finding = open_findings("cuda_driver_too_old", node).get()
    assert "cuda-compat 12.8 (libcuda 570.86.10) raises it to 12.8 on these data-center GPUs" in finding.summary
    assert finding.evidence["values"]["effective_max_cuda"] == "12.8"
    assert finding.evidence["values"]["cuda_compat_honoured"] is True


@pytest.mark.parametrize(("model", "datacenter"), [
    ("NVIDIA H100 80GB HBM3", True), ("NVIDIA A100-SXM4-80GB", True), ("Tesla T4", True), ("NVIDIA L40S", True),
    ("NVIDIA A10G", True), ("NVIDIA GB200", True), ("NVIDIA GeForce RTX 4090", False),
    ("NVIDIA RTX 6000 Ada Generation", False), ("Quadro RTX 8000", False), ("", False)])
def test_data_center_gpu_models(model, datacenter):
    assert is_datacenter_gpu(model) is datacenter


def test_escalated_routing_states_the_escalated_action_without_if_it_repeats(settings):
    from fleet.inventory.boundary import DEFAULT_MATRIX
    from fleet.inventory.choices import BoundarySource

    class Cell:
        def __init__(self, layer, owner):
            self.layer, self.owner, self.source = layer, owner, BoundarySource.DEFAULT

    for form in ("cloud_dedicated", "bare_metal_hosted", "bare_metal_owned"):
        cells = {layer: Cell(layer, owners[form]) for layer, owners in DEFAULT_MATRIX.items()}
        text = route(layer="hardware", cells=cells, delivery_form=form, provider_name="ACME",
                     remedy="hardware: RMA / replace the GPU", escalated=True).action
        assert "if it repeats" not in text.lower(), form
        assert "hardware: RMA / replace the GPU" in text
        plain = route(layer="hardware", cells=cells, delivery_form=form, provider_name="ACME",
                      remedy="reset the GPU").action
        assert "repeats" in plain.lower(), form


def test_claims_never_go_round_in_a_circle():
    node = healthy_node()
    gpu = GPU.objects.get(node=node, index=0)
    rule_a, rule_b = Rule.objects.get(slug="xid"), Rule.objects.get(slug="ecc_uncorrectable")
    a = Finding.objects.create(rule=rule_a, node=node, gpu=gpu, subject="a", step="platform_hardware",
                               severity="critical", summary="A", first_seen=T0, opened_at=T0, last_seen=T0,
                               evidence={"explains": [Explains(("ecc_uncorrectable",)).as_dict()]})
    b = Finding.objects.create(rule=rule_b, node=node, gpu=gpu, subject="b", step="platform_hardware",
                               severity="critical", summary="B", first_seen=T0, opened_at=T0, last_seen=T0,
                               evidence={"explains": [Explains(("xid",)).as_dict()]})
    a.rule, b.rule = rule_a, rule_b
    assert findings_explained([a, b]) == {b.pk: a}
    assert findings_explained([b, a]) == {a.pk: b}


def test_a_reboot_we_requested_explains_the_silence_until_the_node_is_back():
    node = healthy_node(billing_mode="on_demand", delivery_form="cloud_shared")
    Rule.objects.filter(slug="node_silent").update(duration_s=0)
    # What remediation writes when its reboot step starts.
    ChangeLogEntryFactory(node=node, at=T0, field="reboot_requested", old=None, new="INC-1",
                          summary="Reboot started by remediation INC-1")
    set_status(node, silent=True, silent_since=T0 + timedelta(seconds=10))
    evaluate(now=T0 + timedelta(seconds=60))
    triage = node_triage(node=node, now=T0 + timedelta(seconds=61))
    assert triage["headline_finding"].rule.slug == "requested_disruption"
    assert triage["headline_finding"].action_kind == "internal_fix"
    assert [c["rule"] for c in triage["consequences"]] == ["node_silent"]
    # The node came back (a new boot id) but stays broken: now the symptom speaks for itself.
    ChangeLogEntryFactory(node=node, at=T0 + timedelta(seconds=90), field="boot_id")
    evaluate(now=T0 + timedelta(seconds=120))
    assert not open_findings("requested_disruption", node).exists()
    assert node_triage(node=node, now=T0 + timedelta(seconds=121))["headline_finding"].rule.slug == "node_silent"


def test_remediation_records_the_reboot_it_starts():
    from fleet.remediation.services.engine import _record_requested_disruption
    from fleet.telemetry.models import ChangeLogEntry

    node = healthy_node()

    class Run:
        kind, step_index, title = "reboot", 3, "Reboot"

    class Incident:
        dry_run, node_id, key = False, node.pk, "INC-7"

    Run.params = {}
    _record_requested_disruption(Incident, Run, T0)
    entry = ChangeLogEntry.objects.get(node=node, field="reboot_requested")
    assert entry.at == T0 and "INC-7" in entry.summary
    Incident.dry_run = True
    _record_requested_disruption(Incident, Run, T0)
    assert ChangeLogEntry.objects.filter(node=node, field="reboot_requested").count() == 1


def test_one_hot_gpu_on_most_nodes_of_a_site_is_the_site():
    from tests.factories import SiteFactory

    site = SiteFactory(name="fra-2")
    nodes = [healthy_node(site=site) for _ in range(4)]
    other = healthy_node()  # another site: a hot GPU there stays hardware
    Rule.objects.filter(slug__in=["room_thermal_throttling", "thermal_throttling"]).update(duration_s=0)
    hot = CLOCK_REASON_SW_THERMAL_SLOWDOWN
    for node in nodes[:2] + [other]:
        set_gpu(GPU.objects.get(node=node, index=5), clock_event_reasons_mask=hot, temperature_c=88)
    evaluate(now=T0 + timedelta(seconds=5))
    assert not Finding.objects.filter(rule__slug="room_thermal_throttling").exists(), "2 of 4 nodes: not yet"

    set_gpu(GPU.objects.get(node=nodes[2], index=1), clock_event_reasons_mask=hot, temperature_c=89)
    evaluate(now=T0 + timedelta(seconds=20))
    room = Finding.objects.filter(rule__slug="room_thermal_throttling", state="open")
    assert sorted(room.values_list("node_id", flat=True)) == sorted(n.pk for n in nodes[:3])
    finding = room.get(node=nodes[0])
    assert finding.layer == Layer.FACILITY
    assert finding.summary.startswith("3 of 4 nodes of fra-2 throttle for heat at once")
    triage = node_triage(node=nodes[0], now=T0 + timedelta(seconds=21))
    assert triage["headline_finding"].pk == finding.pk
    assert [c["rule"] for c in triage["consequences"]] == ["thermal_throttling"]
    assert open_findings("thermal_throttling", other).exists()
    assert not open_findings("room_thermal_throttling", other).exists()

    # An urgent cycle over one node cannot see the site: it keeps the state rather than clearing it.
    evaluate(node_ids=[nodes[0].pk], now=T0 + timedelta(seconds=30))
    assert open_findings("room_thermal_throttling", nodes[0]).exists()


def test_processes_wedged_in_the_driver_explain_the_leftover_memory_they_hold():
    """A process in uninterruptible sleep holding /dev/nvidia2 keeps GPU 2's memory at 0 % utilisation: the
    headline is the wedged driver (drain and reboot), not "stop the leftover processes" — they cannot be stopped."""
    node = healthy_node()
    gpu = GPU.objects.get(node=node, index=2)
    Rule.objects.filter(slug__in=["residual_gpu_processes", "gpu_d_state"]).update(duration_s=0)
    set_gpu(gpu, utilization_gpu_pct=0, process_count=1, process_memory_bytes=30 * 2**30,
            processes=[{"pid": 52002, "used_memory_bytes": 30 * 2**30, "name": "python"}])
    stuck = [{"pid": 52002, "name": "python", "devices": ["/dev/nvidia-uvm", "/dev/nvidia2", "/dev/nvidiactl"]}]
    from fleet.telemetry.models import NodeStatus

    system = dict(NodeStatus.objects.get(node=node).system or {})
    set_status(node, system={**system, "gpu_d_state": stuck})
    evaluate(now=T0 + timedelta(seconds=5))
    assert open_findings("residual_gpu_processes", node).exists() and open_findings("gpu_d_state", node).exists()
    triage = node_triage(node=node, now=T0 + timedelta(seconds=6))
    assert triage["headline_finding"].rule.slug == "gpu_d_state"
    assert [c["rule"] for c in triage["consequences"]] == ["residual_gpu_processes"]


@pytest.mark.parametrize(("provider_kind", "party", "ticket"), [("own", "us", False), ("idc", "provider", True)])
def test_a_hot_room_on_our_own_metal_goes_to_our_facilities_not_to_a_provider_ticket(provider_kind, party, ticket):
    """Our own servers in our own datacenter: the room's cooling is our facilities team's. The same servers in a
    colocation provider's hall: the provider runs the room."""
    from tests.factories import ProviderFactory

    provider = ProviderFactory(kind=provider_kind, cloud="")
    node = healthy_node(delivery_form="bare_metal_owned", provider=provider)
    Rule.objects.filter(slug__in=["room_thermal_throttling", "thermal_throttling"]).update(duration_s=0)
    GPUStatus.objects.filter(node=node, gpu__index__in=range(6)).update(
        clock_event_reasons_mask=CLOCK_REASON_SW_THERMAL_SLOWDOWN, temperature_c=91)
    evaluate(now=T0 + timedelta(seconds=5))
    room = open_findings("room_thermal_throttling", node).get()
    assert (room.layer, room.responsible_party) == ("facility", party)
    assert (room.action_kind == "provider_ticket") is ticket


def _stuck_on_gpu_2(node, wchan: str, **system):
    """GPU 2 holds 30 GiB for a process that has slept uninterruptibly across two scans, waiting in `wchan`."""
    from fleet.telemetry.models import NodeStatus

    gpu = GPU.objects.get(node=node, index=2)
    Rule.objects.filter(slug__in=["residual_gpu_processes", "gpu_d_state", "storage_d_state", "volume_hung"]
                        ).update(duration_s=0)
    set_gpu(gpu, utilization_gpu_pct=0, process_count=1, process_memory_bytes=30 * 2**30,
            processes=[{"pid": 52002, "used_memory_bytes": 30 * 2**30, "name": "python"}])
    stuck = [{"pid": 52002, "name": "python", "devices": ["/dev/nvidia-uvm", "/dev/nvidia2", "/dev/nvidiactl"],
              "wchan": wchan}]
    set_status(node, system={**dict(NodeStatus.objects.get(node=node).system or {}), "gpu_d_state": stuck,
                             **system})


@pytest.mark.parametrize("wchan", ["rpc_wait_bit_killable", "nfs4_wait_clnt_recover", "folio_wait_bit_common",
                                   "ptlrpc_set_wait"])
def test_a_gpu_job_stuck_on_nfs_is_the_data_path_not_a_wedged_driver(wchan):
    """A training job blocked reading its dataset from a hard-mounted NFS share (or a Lustre or block-device wait)
    sits in D state with /dev/nvidia2 open: the GPU and its driver are fine. What to fix is the storage path — a
    GPU reset or a reboot would not help and would kill the job."""
    node = healthy_node()
    _stuck_on_gpu_2(node, wchan)
    evaluate(now=T0 + timedelta(seconds=5))
    assert not open_findings("gpu_d_state", node).exists()
    finding = open_findings("storage_d_state", node).get()
    assert (finding.step, finding.layer) == ("capacity", "host_os")
    assert wchan in finding.summary and "/dev/nvidia2" in finding.summary
    triage = node_triage(node=node, now=T0 + timedelta(seconds=6))
    assert triage["headline_finding"].rule.slug == "storage_d_state"
    assert [c["rule"] for c in triage["consequences"]] == ["residual_gpu_processes"]


def test_a_job_stuck_in_the_driver_is_still_the_driver():
    """The same picture with the process waiting inside nvidia.ko: that is the wedged driver."""
    node = healthy_node()
    _stuck_on_gpu_2(node, "os_acquire_rwlock_write")
    evaluate(now=T0 + timedelta(seconds=5))
    assert open_findings("gpu_d_state", node).exists() and not open_findings("storage_d_state", node).exists()


def test_the_hung_nfs_volume_speaks_for_the_gpu_jobs_waiting_on_it():
    """The agent also sees the share itself hang (a statvfs that never returns): the volume, which names the mount
    and the server, heads the triage; the stuck GPU job is its consequence."""
    node = healthy_node()
    _stuck_on_gpu_2(node, "rpc_wait_bit_killable", volumes=[{
        "mount": "/mnt/datasets", "fs_type": "nfs4", "source": "10.0.0.20:/datasets", "network": True,
        "hung": True, "stalled_s": 45.0}])
    evaluate(now=T0 + timedelta(seconds=5))
    triage = node_triage(node=node, now=T0 + timedelta(seconds=6))
    assert triage["headline_finding"].rule.slug == "volume_hung"
    assert {"storage_d_state", "residual_gpu_processes"} <= {c["rule"] for c in triage["consequences"]}
