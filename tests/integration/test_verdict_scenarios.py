"""Sharper verdicts, end to end: the real agent code (simulated NVML, /proc, kernel log, cloud metadata, stack
commands) enrols and reports through the live HTTP API; a real Celery worker evaluates; the node's triage, read
through the live REST API with an API token, names the right cause on the right step, layer and party — and the
symptoms it explains are listed as its consequences, not as the headline.

Each case is written as an operator meets the fault (NVIDIA's Xid catalog and ECC documentation, the clouds'
interruption notices), not from the rule that judges it. Rule durations are 0 so nothing waits minutes.
"""

import time
import uuid
from datetime import timedelta

import pytest
import requests

from fleet.health.models import Finding, Rule
from fleet.health.tasks import evaluate_fleet, evaluate_nodes
from fleet.inventory.models import Baseline, Pool, Provider, Site
from fleet.inventory.models import Node as NodeModel
from fleet.telemetry.models import ChangeLogEntry
from fleet.telemetry.services.enrollment import enrollment_token_create
from fleet_agent.simulator import SimulatedAgent, parse_scenario
from fleet_agent.timeutil import utc_now
from tests.factories import UserFactory
from tests.processes import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CLOUDS = {"aws", "gcp", "azure", "alibaba", "tencent"}


@pytest.fixture
def fast_rules(seeded_catalog):
    Rule.objects.update(duration_s=0, clear_hold_s=0)


@pytest.fixture
def api(live_server, token_for):
    _, key = token_for("viewer", write_enabled=False)
    session = requests.Session()
    session.headers["Authorization"] = f"Token {key}"

    def get(path: str):
        response = session.get(f"{live_server.url}/api/v1/{path}", timeout=10)
        assert response.status_code == 200, response.text
        return response.json()

    return get


def _node(provider="own", *, form=None, billing=None, model="H100-SXM-80GB", faults=(), stack=None, name="node"):
    node = {"name": name, "provider": provider, "gpu": {"model": model, "count": 8}, "faults": list(faults)}
    if form:
        node["delivery_form"] = form
    if billing:
        node["billing_mode"] = billing
    if stack:
        node["stack"] = stack
    return parse_scenario({"name": name, "interval_s": 15, "seed": 7, "nodes": [node]}, name)


def _enrol_target(spec):
    kind = "cloud" if spec.provider in CLOUDS else ("own" if spec.provider == "own" else "idc")
    provider, _ = Provider.objects.get_or_create(slug=spec.provider, defaults={
        "name": spec.provider, "kind": kind, "cloud": spec.provider if kind == "cloud" else ""})
    billing = {"owned": "reserved", "subscription": "reserved"}.get(spec.billing_mode, spec.billing_mode)
    pool = Pool.objects.create(name=f"{spec.provider}-{spec.name}", provider=provider, delivery_form=spec.delivery_form,
                               billing_mode=billing, gpu_model=spec.gpu_model, gpus_per_node=spec.gpu_count)
    Baseline.objects.create(name="pinned", pool=pool, driver_version=spec.stack["driver_version"],
                            cuda_driver_version=spec.stack["cuda_driver_version"])
    _, token = enrollment_token_create(actor=UserFactory(role="operator"), name="verdicts", provider=provider,
                                       pool=pool, delivery_form=spec.delivery_form, billing_mode=billing)
    return token


class Node:
    """One simulated node reporting to the live server; `report(t)` moves it to t s and delivers."""

    def __init__(self, loaded, live_server, tmp_path, *, span_s: float):
        self.agent = SimulatedAgent.from_scenario(loaded, 0, work_dir=tmp_path,
                                                  start=utc_now() - timedelta(seconds=span_s))
        self.node_id = self.agent.enroll(live_server.url, _enrol_target(loaded.nodes[0])).node_id
        self.report(0)

    def report(self, t: float) -> None:
        if self.agent.step(t) is not None:
            assert self.agent.deliver(force=True)

    def reboot(self) -> None:
        """What a reboot looks like to the agent: a new boot id (its inventory, and so the server, learns it)."""
        (self.agent.dir / "proc/sys/kernel/random/boot_id").write_text(f"{uuid.uuid4().hex}\n")

    def evaluate(self) -> None:
        evaluate_nodes.delay(node_ids=[self.node_id]).get(timeout=30)

    def close(self) -> None:
        self.agent.close()


@pytest.fixture
def node_for(live_server, celery_worker, fast_rules, tmp_path):
    made = []

    def make(loaded, *, span_s: float = 60):
        node = Node(loaded, live_server, tmp_path / f"n{len(made)}", span_s=span_s)
        made.append(node)
        return node

    yield make
    for node in made:
        node.close()


def _open(node_id: int, rule: str):
    return wait_for(lambda: Finding.objects.filter(node_id=node_id, rule__slug=rule, state="open").first(),
                    what=f"an open {rule} finding")


def _headline(api, node, rule):
    """The triage of the node through the live API, once the finding that should be its headline is open."""
    _open(node.node_id, rule)
    triage = api(f"nodes/{node.node_id}/triage/")
    assert triage["headline_finding"] is not None, triage["headline"]
    assert triage["headline_finding"]["rule"] == rule, triage["headline"]
    return triage, triage["headline_finding"]


def _consequence_rules(triage) -> set[str]:
    return {c["rule"] for c in triage["consequences"]}


# -- 1. contained vs uncontained memory errors ---------------------------------------------------------------------

def test_contained_ecc_error_never_headlines_as_critical_reset(api, node_for):
    # An H100 logs an uncorrectable ECC error the driver contained (Xid 94), records the row to remap (Xid 63) and
    # counts it in the volatile ECC counters: NVIDIA says restart the application, the GPU stays usable.
    node = node_for(_node(faults=[{"at_s": 30, "fault": "ecc_uncorrectable", "gpu": 2,
                                   "containment": "contained"}]))
    node.report(31)
    node.evaluate()
    _open(node.node_id, "ecc_uncorrectable")
    triage, headline = _headline(api, node, "xid")
    assert headline["summary"].startswith("Xid 94 on GPU 2: contained ECC error")
    assert (headline["step"], headline["layer"], headline["responsible_party"], headline["severity"]) == (
        "platform_hardware", "hardware", "hardware_vendor", "warning")
    assert triage["headline"].startswith("Step 4 — Xid 94 on GPU 2: contained ECC error")
    assert "restart the application" in triage["headline"]
    assert "reset" not in triage["headline"].lower()
    # The counter rules agree with the Xid policy, and are the headline's consequences.
    ecc = Finding.objects.get(node_id=node.node_id, rule__slug="ecc_uncorrectable", state="open")
    assert ecc.severity == "warning" and ecc.evidence["values"]["containment"] == "contained"
    assert "restart the application" in ecc.summary
    assert not Finding.objects.filter(node_id=node.node_id, state="open", severity="critical").exists()
    assert {"ecc_uncorrectable", "pending_page_retirement"} <= _consequence_rules(triage)
    # The remap's own Xid 63 is benign until the next reset (NVIDIA's catalog: IGNORE / IGNORE): no finding of its
    # own; the pending remap is what pending_page_retirement reports.
    assert not Finding.objects.filter(node_id=node.node_id, rule__slug="xid", subject__endswith=":xid:63").exists()


def test_uncontained_ecc_error_headlines_as_reset(api, node_for):
    node = node_for(_node(faults=[{"at_s": 30, "fault": "ecc_uncorrectable", "gpu": 2,
                                   "containment": "uncontained"}]))
    node.report(31)
    node.evaluate()
    triage, headline = _headline(api, node, "xid")
    assert headline["summary"].startswith("Xid 95 on GPU 2: uncontained ECC error")
    assert headline["severity"] == "critical"
    assert "reset the GPU" in triage["headline"]
    assert Finding.objects.get(node_id=node.node_id, rule__slug="ecc_uncorrectable", state="open").severity \
        == "critical"


# -- 2. every CUDA runtime against the driver's ceiling ------------------------------------------------------------

CONTAINER = {"image": "nvcr.io/nvidia/pytorch:25.01-py3", "cuda": "12.8"}


def test_a_running_containers_cuda_above_the_driver_ceiling(api, node_for):
    node = node_for(_node(stack={"containers": [CONTAINER]}))
    node.evaluate()
    triage, headline = _headline(api, node, "cuda_driver_too_old")
    assert (headline["step"], headline["layer"], headline["responsible_party"]) == (
        "software_chain", "cuda_runtime", "us")
    assert "driver 550.54.15 supports CUDA ≤ 12.4" in headline["summary"]
    assert "container nvcr.io/nvidia/pytorch:25.01-py3 runs CUDA 12.8" in headline["summary"]
    assert triage["headline"].startswith("Step 2 — driver 550.54.15 supports CUDA ≤ 12.4")


def test_toolkit_and_shipped_runtime_library_are_checked_too(api, node_for):
    frameworks = [{"name": "torch", "version": "2.4.0+cu124", "cuda": "12.4", "arch_list": ["sm_90"]},
                  {"name": "nvidia-cuda-runtime-cu12", "version": "12.6.77", "cuda": "12.6", "arch_list": None,
                   "kind": "runtime_library"}]
    node = node_for(_node(stack={"cuda_toolkits": ["12.4", "12.8"], "frameworks": frameworks}))
    node.evaluate()
    _, headline = _headline(api, node, "cuda_driver_too_old")
    assert headline["layer"] == "framework"
    assert "CUDA toolkit 12.8 is installed (/usr/local/cuda-12.8)" in headline["summary"]
    assert "nvidia-cuda-runtime-cu12 12.6.77 (shipped with the frameworks) is CUDA 12.6" in headline["summary"]
    assert "torch" not in headline["summary"].split(";")[0].split(",")[1:]  # torch 12.4 is fine


def test_cuda_compat_is_honoured_on_data_center_gpus_only(api, node_for):
    stack = {"containers": [CONTAINER], "cuda_compat": [{"cuda": "12.8", "libcuda": "570.86.10"}]}
    datacenter = node_for(_node(stack=stack, name="h100"))
    datacenter.evaluate()
    triage = api(f"nodes/{datacenter.node_id}/triage/")
    assert triage["steps"][1]["status"] == "passed", triage["steps"][1]["reason"]
    assert not Finding.objects.filter(node_id=datacenter.node_id, rule__slug="cuda_driver_too_old").exists()

    consumer = node_for(_node(stack=stack, model="RTX-4090", name="rtx"))
    consumer.evaluate()
    _, headline = _headline(api, consumer, "cuda_driver_too_old")
    assert "cuda-compat 12.8 (libcuda 570.86.10) is installed but ignored: forward compatibility needs " \
           "data-center GPUs" in headline["summary"]


# -- 4. a hung process on a GPU with a critical hardware fault ----------------------------------------------------

def test_hung_process_on_a_broken_gpu_is_a_consequence(api, node_for):
    # GPU 2 runs out of spare rows (Xid 64, row remap failure) and the job on it hangs, holding 20 GiB at 0 %.
    node = node_for(_node(faults=[{"at_s": 30, "fault": "row_remap_failure", "gpu": 2},
                                  {"at_s": 30, "fault": "residual_process", "gpu": 2, "memory_gb": 20}]))
    node.report(31)
    node.evaluate()
    _open(node.node_id, "residual_gpu_processes")
    triage, headline = _headline(api, node, "xid")
    assert headline["summary"].startswith("Xid 64 on GPU 2")
    assert (headline["step"], headline["layer"], headline["responsible_party"]) == (
        "platform_hardware", "hardware", "hardware_vendor")
    assert triage["headline"].startswith("Step 4 — Xid 64 on GPU 2")
    assert "owner: us + hardware vendor" in triage["headline"]
    step3 = triage["steps"][2]
    assert step3["status"] == "failed" and "a consequence of: Xid 64 on GPU 2" in step3["reason"]
    assert {"residual_gpu_processes", "row_remap_failure"} <= _consequence_rules(triage)


def test_hung_process_on_a_healthy_gpu_stays_the_headline(api, node_for):
    node = node_for(_node(faults=[{"at_s": 30, "fault": "residual_process", "gpu": 2, "memory_gb": 20}]))
    node.report(31)
    node.evaluate()
    triage, headline = _headline(api, node, "residual_gpu_processes")
    assert headline["step"] == "capacity" and triage["consequences"] == []


# -- 5. escalation said when reached -------------------------------------------------------------------------------

def test_application_xid_repeating_on_one_gpu_says_run_diagnostics(api, node_for):
    # Xid 13 (graphics engine exception) every 5 s on GPU 1: NVIDIA says check the application, and if it repeats
    # on one GPU, run diagnostics.
    node = node_for(_node(faults=[{"at_s": 30, "fault": "xid", "gpu": 1, "code": 13, "repeat_s": 5}]))
    node.report(46)
    node.evaluate()
    triage, headline = _headline(api, node, "xid")
    assert headline["summary"].startswith("Xid 13 on GPU 1: graphics engine exception (4×")
    assert "escalated: run diagnostics" in headline["summary"]
    assert (headline["layer"], headline["responsible_party"], headline["severity"]) == (
        "hardware", "hardware_vendor", "critical")
    assert "escalated: run diagnostics" in triage["headline"]
    assert "run diagnostics" in headline["recommended_action"]
    assert "if it repeats" not in headline["recommended_action"].lower()


def test_xid_surviving_two_reboots_says_rma(api, node_for):
    # Xid 119 (GSP RPC timeout; reset or reboot) on GPU 4 comes back after each of two reboots. The server dates a
    # reboot when the report with the new boot id arrives, so this node's clock runs in real time.
    node = node_for(_node(faults=[{"at_s": 30, "fault": "xid", "gpu": 4, "code": 119, "repeat_s": 3}]), span_s=30)
    start = node.agent.start

    def report_at(t: float) -> None:
        while (utc_now() - start).total_seconds() < t:
            time.sleep(0.05)
        node.report((utc_now() - start).total_seconds())

    report_at(30.2)  # the Xid at 30 s, first boot
    for boot_ends in (31, 34):
        node.reboot()
        report_at(boot_ends)  # reboot recorded at about 31 s, then 34 s
        report_at(boot_ends + 2.5)  # the Xid at 33 s, then 36 s: back after the reboot
    node.evaluate()
    triage, headline = _headline(api, node, "xid_escalation")
    assert "Xid 119 came back after 2 reboots" in headline["summary"]
    assert "escalated: hardware, RMA / replace the GPU" in triage["headline"]
    assert headline["action_kind"] == "vendor_rma"
    assert "open an RMA with the hardware vendor now" in headline["recommended_action"]
    assert "if it repeats" not in headline["recommended_action"].lower()
    assert "xid" in _consequence_rules(triage)


# -- 6. a cause explains its symptoms ------------------------------------------------------------------------------

def test_gpus_lost_inside_a_spot_interruption_window_are_the_reclaim(api, node_for):
    node = node_for(_node("aws", billing="spot", faults=[{"at_s": 30, "fault": "spot_notice"},
                                                         {"at_s": 40, "fault": "gpu_lost", "gpu": 5}]))
    node.report(31)
    node.report(41)
    node.evaluate()
    _open(node.node_id, "gpu_lost")
    triage, headline = _headline(api, node, "preemption_notice")
    assert (headline["step"], headline["layer"], headline["responsible_party"], headline["action_kind"]) == (
        "platform_hardware", "virtualization", "provider", "internal_fix")
    assert triage["headline"].startswith("Step 4 — The cloud announced terminate of this instance")
    assert "owner: aws" in triage["headline"]
    assert "no ticket is needed" in headline["recommended_action"]
    assert triage["steps"][0]["status"] == "failed"
    assert "a consequence of: The cloud announced terminate" in triage["steps"][0]["reason"]
    assert {"gpu_lost", "xid"} <= _consequence_rules(triage)


def test_gpus_lost_during_planned_maintenance_are_the_maintenance(api, node_for):
    node = node_for(_node("gcp", billing="on_demand", faults=[
        {"at_s": 30, "fault": "spot_notice", "kind": "maintenance"},
        {"at_s": 40, "fault": "gpu_lost", "gpu": 3}]))
    node.report(31)
    node.report(41)
    node.evaluate()
    _open(node.node_id, "gpu_lost")
    triage, headline = _headline(api, node, "planned_maintenance")
    assert (headline["layer"], headline["responsible_party"], headline["action_kind"]) == (
        "virtualization", "provider", "internal_fix")
    assert "no hardware ticket" in headline["recommended_action"]
    assert "gpu_lost" in _consequence_rules(triage)


def test_gpus_lost_during_a_reboot_we_requested_are_the_reboot(api, node_for):
    # Remediation's reboot step started (it records `reboot_requested` in the node's change log); while the node
    # shuts down, a GPU drops off the bus (Xid 79) before the report stops.
    node = node_for(_node("own", faults=[{"at_s": 40, "fault": "gpu_lost", "gpu": 6}]))
    node.report(31)
    ChangeLogEntry.objects.create(node_id=node.node_id, at=utc_now() - timedelta(seconds=25),
                                  field="reboot_requested", new="INC-1",
                                  summary="step 4 (Reboot) started by remediation INC-1")
    node.report(41)
    node.evaluate()
    _open(node.node_id, "gpu_lost")
    triage, headline = _headline(api, node, "requested_disruption")
    assert (headline["responsible_party"], headline["action_kind"]) == ("us", "internal_fix")
    assert triage["headline"].startswith("Step 4 — A reboot was started on purpose")
    assert {"gpu_lost", "xid"} <= _consequence_rules(triage)


def test_a_lost_gpu_without_an_announcement_stays_hardware(api, node_for):
    node = node_for(_node("aws", billing="on_demand", faults=[{"at_s": 30, "fault": "gpu_lost", "gpu": 5}]))
    node.report(31)
    node.evaluate()
    triage, headline = _headline(api, node, "gpu_lost")
    assert (headline["layer"], headline["responsible_party"], headline["action_kind"]) == (
        "hardware", "provider", "provider_ticket")
    assert triage["headline"].startswith("Step 1 — GPU 5 is lost")


# -- 7. many GPUs throttling together is the room ------------------------------------------------------------------

# Who runs the room follows the provider record: our own datacenter (kind 'own') is our facilities team's, a
# colocation hall (our servers, an IDC's room: kind 'idc') and a cloud are the provider's.
@pytest.mark.parametrize(("provider", "form", "party"),
                         [("own", None, "us"), ("idc", "bare_metal_owned", "provider"), ("aws", None, "provider")],
                         ids=["own-datacenter", "own-hardware-in-colo", "cloud"])
def test_all_gpus_throttling_for_heat_is_the_facility(provider, form, party, api, node_for):
    node = node_for(_node(provider, form=form, faults=[{"at_s": 30, "fault": "thermal_throttle", "gpu": "all"}]))
    node.report(31)
    node.evaluate()
    _open(node.node_id, "thermal_throttling")
    triage, headline = _headline(api, node, "room_thermal_throttling")
    assert (headline["step"], headline["layer"], headline["responsible_party"]) == (
        "platform_hardware", "facility", party)
    assert headline["summary"].startswith("8 of 8 GPUs throttle for heat at once")
    assert triage["headline"].startswith("Step 4 — 8 of 8 GPUs throttle for heat at once")
    assert _consequence_rules(triage) == {"thermal_throttling"}


def test_one_hot_gpu_on_most_nodes_of_a_site_is_the_site(api, node_for):
    # Three of our servers in one colocation hall, each with one GPU throttling for heat at the same time.
    nodes = [node_for(_node("idc", form="bare_metal_owned", faults=[{"at_s": 30, "fault": "thermal_throttle",
                                                                     "gpu": index}], name=f"hall-{index}"))
             for index in range(3)]
    site = Site.objects.create(name="hall-b", provider=Provider.objects.get(slug="idc"))
    NodeModel.objects.filter(pk__in=[n.node_id for n in nodes]).update(site=site)
    for node in nodes:
        node.report(31)
    evaluate_fleet.delay().get(timeout=60)  # the site view needs the fleet-wide cycle
    triage, headline = _headline(api, nodes[0], "room_thermal_throttling")
    assert (headline["layer"], headline["responsible_party"]) == ("facility", "provider")
    assert headline["summary"].startswith("3 of 3 nodes of hall-b throttle for heat at once")
    assert _consequence_rules(triage) == {"thermal_throttling"}


def test_one_hot_gpu_among_cool_ones_stays_hardware(api, node_for):
    node = node_for(_node(faults=[{"at_s": 30, "fault": "thermal_throttle", "gpu": 7}]))
    node.report(31)
    node.evaluate()
    triage, headline = _headline(api, node, "thermal_throttling")
    assert (headline["layer"], headline["responsible_party"]) == ("hardware", "hardware_vendor")
    assert not Finding.objects.filter(node_id=node.node_id, rule__slug="room_thermal_throttling").exists()
