"""One scenario per rule, end to end: the real agent code (simulated NVML, /proc, kernel log, metadata)
enrols with a token and reports through the real HTTP API of a live server; a real Celery worker
evaluates; the finding appears on the right triage step and layer with the right responsible party, and
resolves when the fault clears.

Rule durations and hold periods are set to 0 (operators can edit them) so the test need not wait minutes;
event windows are shortened the same way before the resolution check.
"""

import json
import time
from datetime import timedelta
from importlib import resources

import pytest

from fleet.billing.models import CheckpointPolicy, PreemptionRecord
from fleet.health.models import Finding, Rule
from fleet.health.tasks import evaluate_nodes
from fleet.inventory.models import Baseline, Pool, Provider
from fleet.telemetry.services.enrollment import enrollment_token_create
from fleet.telemetry.tasks import mark_silent_nodes
from fleet_agent.simulator import SimulatedAgent, parse_scenario
from fleet_agent.timeutil import utc_now
from tests.factories import UserFactory
from tests.processes import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

CASES = [
    # scenario, rule, triage step, layer, responsible party on that node
    ("no_driver", "nvml_unavailable", "visibility", "gpu_driver", "us"),
    ("gpu_missing", "gpu_count_low", "visibility", "hardware", "hardware_vendor"),
    ("gpu_lost", "gpu_lost", "visibility", "hardware", "hardware_vendor"),
    ("silent", "node_silent", "visibility", "host_os", "us"),
    ("driver_upgraded", "stack_drift", "software_chain", "gpu_driver", "us"),
    ("framework_cuda_too_new", "cuda_driver_too_old", "software_chain", "framework", "us"),
    ("arch_missing", "arch_not_supported", "software_chain", "framework", "us"),
    ("memory_pressure", "gpu_memory_pressure", "capacity", "application", "us"),
    ("residual_process", "residual_gpu_processes", "capacity", "application", "us"),
    ("cpu_bound_pipeline", "data_pipeline_bottleneck", "capacity", "application", "us"),
    ("cpu_steal", "cpu_steal", "platform_hardware", "virtualization", "provider"),
    ("xid", "xid", "platform_hardware", "hardware", "hardware_vendor"),
    ("ecc_uncorrectable", "ecc_uncorrectable", "platform_hardware", "hardware", "hardware_vendor"),
    ("row_remap_pending", "pending_page_retirement", "platform_hardware", "hardware", "hardware_vendor"),
    ("row_remap_failure", "row_remap_failure", "platform_hardware", "hardware", "hardware_vendor"),
    ("pcie_downgrade", "pcie_link_degraded", "platform_hardware", "hardware", "hardware_vendor"),
    ("thermal_throttle", "thermal_throttling", "platform_hardware", "hardware", "hardware_vendor"),
    ("power_throttle", "power_throttling", "platform_hardware", "hardware", "hardware_vendor"),
    ("checkpoint_stale", "checkpoint_stale", "platform_hardware", "application", "us"),
    ("spot_notice_aws", "preemption_notice", "platform_hardware", "virtualization", "provider"),
    ("spot_notice_gcp", "preemption_notice", "platform_hardware", "virtualization", "provider"),
    ("spot_notice_azure", "preemption_notice", "platform_hardware", "virtualization", "provider"),
    ("spot_notice_alibaba", "preemption_notice", "platform_hardware", "virtualization", "provider"),
    ("spot_notice_tencent", "preemption_notice", "platform_hardware", "virtualization", "provider"),
]
WINDOW_S = 60  # the smallest event window every event rule accepts
AFTER_CLEAR_S = 15
NOTICE_LEAD_S = 330  # longest spot notice lead in the scenarios (Alibaba: about 5 minutes)
CLOUDS = {"aws", "gcp", "azure", "alibaba", "tencent"}
BILLING = {"owned": "reserved", "subscription": "reserved"}


def _scenario(name: str):
    """The bundled scenario with every fault given an end 30 s after it starts (if it has none)."""
    data = json.loads(resources.files("fleet_agent.scenarios").joinpath(f"{name}.json").read_text())
    for fault in data["nodes"][0].get("faults", []):
        fault.setdefault("clear_at_s", fault["at_s"] + 30)
    return parse_scenario(data, name)


def _evaluate(node_id: int) -> None:
    evaluate_nodes.delay(node_ids=[node_id]).get(timeout=30)


@pytest.fixture
def fast_rules(seeded_catalog):
    for rule in Rule.objects.all():
        params = dict(rule.params)
        Rule.objects.filter(pk=rule.pk).update(duration_s=0, clear_hold_s=0, params=params)


def _enrol_target(spec):
    kind = "cloud" if spec.provider in CLOUDS else ("own" if spec.provider == "own" else "idc")
    provider = Provider.objects.create(name=spec.provider, slug=spec.provider, kind=kind,
                                       cloud=spec.provider if kind == "cloud" else "")
    billing = BILLING.get(spec.billing_mode, spec.billing_mode)
    pool = Pool.objects.create(name=f"{spec.provider}-pool", provider=provider, delivery_form=spec.delivery_form,
                               billing_mode=billing, gpu_model=spec.gpu_model, gpus_per_node=spec.gpu_count)
    Baseline.objects.create(name="pinned", pool=pool, driver_version=spec.stack["driver_version"],
                            cuda_driver_version=spec.stack["cuda_driver_version"])
    CheckpointPolicy.objects.create(pool=pool, max_checkpoint_age_s=1800, applies_to_all_billing_modes=True)
    _, token = enrollment_token_create(actor=UserFactory(role="operator"), name="scenario", provider=provider,
                                       pool=pool, delivery_form=spec.delivery_form, billing_mode=billing)
    return token


@pytest.mark.parametrize(("scenario", "rule", "step", "layer", "party"), CASES, ids=[c[0] for c in CASES])
def test_fault_scenario_opens_and_resolves_finding(scenario, rule, step, layer, party, live_server, celery_worker,
                                                   fast_rules, tmp_path):
    loaded = _scenario(scenario)
    spec = loaded.nodes[0]
    token = _enrol_target(spec)
    fault_at = min((f.at_s for f in spec.faults), default=0.0)
    clear_at = max((f.clear_at_s for f in spec.faults), default=0.0)
    # The node's clock reads "now" when the fault starts, so event timestamps are current.
    last_step = clear_at + 1
    # The node's clock runs in the past: the last report is stamped WINDOW_S + NOTICE_LEAD_S ago, so at the
    # resolution check every event is older than the shortest event window and every cloud notice's
    # deadline has passed.
    start = utc_now() - timedelta(seconds=last_step + AFTER_CLEAR_S + WINDOW_S + NOTICE_LEAD_S)
    # The silent scenario reports every second so that "2 intervals without a report" takes 2 s.
    agent = SimulatedAgent.from_scenario(loaded, 0, work_dir=tmp_path, start=start,
                                         interval_s=1 if rule == "node_silent" else None)
    try:
        node_id = agent.enroll(live_server.url, token).node_id
        agent.step(0)
        assert agent.deliver(force=True)
        if spec.faults and agent.step(fault_at + 1) is not None:  # a silent node sends nothing
            assert agent.deliver(force=True)
        if rule == "node_silent":
            time.sleep(2.5)  # 2 report intervals of 1 s without a report
            mark_silent_nodes.delay().get(timeout=30)
        _evaluate(node_id)
        finding = wait_for(lambda: Finding.objects.filter(node_id=node_id, rule__slug=rule, state="open").first(),
                            what=f"an open {rule} finding")
        assert (finding.step, finding.layer, finding.responsible_party) == (step, layer, party)
        assert finding.recommended_action
        assert finding.evidence
        if rule == "preemption_notice":
            # Ingestion handed the notice to billing too: the announced preemption is on record with its lead time.
            record = wait_for(lambda: PreemptionRecord.objects.filter(node_id=node_id).first(),
                               what="a preemption record")
            assert record.notice_lead_time_s is not None and record.notice_lead_time_s > 0

        if not spec.faults:
            return  # a node without NVML stays that way; there is no fault to clear
        # Two reports after the fault ends: rates over the first interval still include the fault.
        for t in (last_step, last_step + AFTER_CLEAR_S):
            if agent.step(t) is not None:  # a reclaimed spot instance sends nothing more
                assert agent.deliver(force=True)
        # Event-driven rules keep a finding open for a window after the last event; the shortest window an
        # operator may set lets this test see the end of it now.
        shrink = Rule.objects.get(slug=rule)
        if "window_s" in shrink.params:
            Rule.objects.filter(pk=shrink.pk).update(params={**shrink.params, "window_s": WINDOW_S})
        _evaluate(node_id)
        finding.refresh_from_db()
        assert finding.state == "resolved", f"{rule} still open after the fault cleared: {finding.summary}"
    finally:
        agent.close()


def test_same_fault_routes_to_provider_on_cloud_and_to_hardware_vendor_on_owned_metal(
        live_server, celery_worker, fast_rules, tmp_path):
    parties = {}
    for form, provider in (("cloud_dedicated", "aws"), ("bare_metal_owned", "own")):
        data = json.loads(resources.files("fleet_agent.scenarios").joinpath("xid.json").read_text())
        data["nodes"][0].update(provider=provider, delivery_form=form, billing_mode="on_demand",
                                name=f"xid-{provider}")
        loaded = parse_scenario(data, f"xid-{provider}")
        token = _enrol_target(loaded.nodes[0])
        agent = SimulatedAgent.from_scenario(loaded, 0, work_dir=tmp_path / provider,
                                             start=utc_now() - timedelta(seconds=31))
        try:
            node_id = agent.enroll(live_server.url, token).node_id
            agent.step(0)
            agent.step(31)
            assert agent.deliver(force=True)
            _evaluate(node_id)
            finding = wait_for(lambda nid=node_id: Finding.objects.filter(node_id=nid, rule__slug="xid").first(),
                                what="an xid finding")
            parties[provider] = (finding.responsible_party, finding.recommended_action)
        finally:
            agent.close()
    assert parties["aws"][0] == "provider"
    assert parties["own"][0] == "hardware_vendor"
    assert parties["aws"][1] != parties["own"][1]
