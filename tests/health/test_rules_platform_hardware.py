from datetime import timedelta

import pytest

from fleet.billing.models import CheckpointPolicy
from fleet.health.models import Rule, RuleOverride
from fleet.health.services.evaluation import evaluate
from fleet.inventory.models import GPU
from tests.factories import PoolFactory

from .factories import T0, EventFactory, healthy_node
from .harness import lifecycle, open_findings, set_gpu, set_status

pytestmark = pytest.mark.django_db


def test_cpu_steal_on_a_cloud_node_is_the_providers():
    node = healthy_node(delivery_form="cloud_dedicated")
    result = lifecycle("cpu_steal", node, fault=lambda at: set_status(node, cpu_steal_pct=18.0),
                       clear=lambda at: set_status(node, cpu_steal_pct=0.5))
    finding = result.opened
    assert (finding.step, finding.layer, finding.responsible_party) == ("platform_hardware", "virtualization",
                                                                         "provider")
    assert "CPU steal 18.0 %" in finding.summary
    assert "virtualization layer" in finding.recommended_action


def test_cpu_steal_is_not_judged_on_bare_metal():
    node = healthy_node(delivery_form="bare_metal_owned")
    set_status(node, cpu_steal_pct=30.0)
    evaluate(now=T0)
    evaluate(now=T0 + timedelta(minutes=10))
    assert not open_findings("cpu_steal", node).exists()


def test_volatile_uncorrectable_ecc():
    node = healthy_node()
    gpu = GPU.objects.get(node=node, index=1)
    result = lifecycle("ecc_uncorrectable", node, fault=lambda at: set_gpu(gpu, ecc_volatile_uncorrected=3),
                       clear=lambda at: set_gpu(gpu, ecc_volatile_uncorrected=0))
    finding = result.opened
    assert (finding.step, finding.layer, finding.responsible_party) == ("platform_hardware", "hardware", "provider")
    assert finding.summary == "GPU 1: 3 uncorrectable ECC error(s) since the last reset"
    assert finding.severity == "critical"


def test_pending_page_retirement_or_row_remap():
    node = healthy_node(delivery_form="bare_metal_owned")
    gpu = GPU.objects.get(node=node, index=4)
    result = lifecycle("pending_page_retirement", node, fault=lambda at: set_gpu(gpu, remapped_rows_pending=True),
                       clear=lambda at: set_gpu(gpu, remapped_rows_pending=False))
    finding = result.opened
    assert (finding.step, finding.layer, finding.responsible_party) == ("platform_hardware", "hardware",
                                                                         "hardware_vendor")
    assert finding.summary == "GPU 4: row remapping pending — takes effect after a GPU reset"


def test_row_remap_failure():
    node = healthy_node()
    gpu = GPU.objects.get(node=node, index=0)
    result = lifecycle("row_remap_failure", node, fault=lambda at: set_gpu(gpu, remapped_rows_failure=True),
                       clear=lambda at: set_gpu(gpu, remapped_rows_failure=False))
    finding = result.opened
    assert (finding.step, finding.layer, finding.responsible_party) == ("platform_hardware", "hardware", "provider")
    assert "ask for the instance to be replaced" in finding.recommended_action


def test_pcie_link_below_max_width():
    node = healthy_node()
    gpu = GPU.objects.get(node=node, index=7)
    result = lifecycle("pcie_link_degraded", node, fault=lambda at: set_gpu(gpu, pcie_width_current=8),
                       clear=lambda at: set_gpu(gpu, pcie_width_current=16))
    finding = result.opened
    assert (finding.step, finding.layer, finding.responsible_party) == ("platform_hardware", "hardware", "provider")
    assert finding.summary == "GPU 7: PCIe link degraded (width x8 of x16)"


def test_idle_gpu_link_generation_downshift_is_not_a_fault():
    node = healthy_node()
    gpu = GPU.objects.get(node=node, index=7)
    set_gpu(gpu, pcie_gen_current=1, utilization_gpu_pct=0)
    evaluate(now=T0)
    evaluate(now=T0 + timedelta(minutes=10))
    assert not open_findings("pcie_link_degraded", node).exists()
    set_gpu(gpu, utilization_gpu_pct=90)
    evaluate(now=T0 + timedelta(minutes=11))
    evaluate(now=T0 + timedelta(minutes=16))
    assert open_findings("pcie_link_degraded", node).get().summary == (
        "GPU 7: PCIe link degraded (Gen1 of Gen5 at 90 % utilisation)")


def test_sustained_thermal_throttling():
    node = healthy_node(delivery_form="bare_metal_owned")
    gpu = GPU.objects.get(node=node, index=3)
    result = lifecycle("thermal_throttling", node,
                       fault=lambda at: set_gpu(gpu, clock_event_reasons_mask=0x40 | 0x4, temperature_c=92),
                       clear=lambda at: set_gpu(gpu, clock_event_reasons_mask=0x4, temperature_c=70))
    finding = result.opened
    assert (finding.step, finding.layer, finding.responsible_party) == ("platform_hardware", "hardware",
                                                                         "hardware_vendor")
    assert finding.evidence["values"]["reasons"] == ["HwThermalSlowdown"]
    assert result.opened_at - finding.first_seen == timedelta(minutes=10)


def test_sustained_power_brake_throttling_but_not_the_normal_power_cap():
    node = healthy_node()
    gpu = GPU.objects.get(node=node, index=3)
    set_gpu(gpu, clock_event_reasons_mask=0x4)  # SwPowerCap: a GPU at its power limit, normal under load
    evaluate(now=T0)
    evaluate(now=T0 + timedelta(minutes=11))
    assert not open_findings("power_throttling", node).exists()
    result = lifecycle("power_throttling", node, fault=lambda at: set_gpu(gpu, clock_event_reasons_mask=0x80),
                       clear=lambda at: set_gpu(gpu, clock_event_reasons_mask=0),
                       start=T0 + timedelta(minutes=12))
    assert result.opened.evidence["values"]["reasons"] == ["HwPowerBrakeSlowdown"]
    assert result.opened.layer == "hardware"


def test_fatal_sxid_but_not_a_non_fatal_one():
    node = healthy_node(delivery_form="bare_metal_hosted")
    start = T0 + timedelta(minutes=1)
    EventFactory(node=node, kind="sxid", code=12028, severity="warning", at=start, message="Non-fatal, Link 32",
                 raw="nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV")
    evaluate(now=start)
    assert not open_findings("sxid_fatal", node).exists()
    EventFactory(node=node, kind="sxid", code=20034, severity="critical", at=start, message="Fatal, Link 48",
                 raw="nvidia-nvswitch0: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up")
    evaluate(now=start + timedelta(seconds=15))
    finding = open_findings("sxid_fatal", node).get()
    assert (finding.step, finding.layer, finding.responsible_party) == ("platform_hardware", "hardware", "provider")
    assert finding.subject == "sxid:20034"
    assert finding.evidence["log_lines"][0]["line"].endswith("20034, Fatal, Link 48 LTSSM Fault Up")
    assert "on-site inspection" in finding.recommended_action
    # The window is an hour; after it the clear-hold (10 min) runs.
    evaluate(now=start + timedelta(hours=1, seconds=1))
    assert open_findings("sxid_fatal", node).exists()
    evaluate(now=start + timedelta(hours=1, minutes=10, seconds=1))
    assert not open_findings("sxid_fatal", node).exists()


def test_preemption_notice_with_time_left():
    node = healthy_node(billing_mode="spot", delivery_form="cloud_dedicated")
    start = T0 + timedelta(minutes=1)

    def fault(at):
        set_status(node, notice_kind="terminate", notice_deadline=at + timedelta(seconds=120))
        EventFactory(node=node, kind="preemption_notice", code=None, severity="critical", at=at,
                     message="spot instance-action terminate", raw='{"action": "terminate"}',
                     detail={"notice": {"kind": "terminate", "source": "aws.spot.instance-action"}})

    fault(start)
    evaluate(now=start + timedelta(seconds=5))
    finding = open_findings("preemption_notice", node).get()
    assert (finding.step, finding.layer, finding.responsible_party) == ("platform_hardware", "virtualization",
                                                                         "provider")
    assert finding.evidence["values"]["time_left_s"] == 115
    assert "115 s left" in finding.summary
    assert finding.action_kind == "internal_fix", "a spot reclaim needs no provider ticket"
    assert "checkpoint now" in finding.recommended_action.lower()
    # The notice clears from the report and the event ages out of its window (15 min); clear-hold is 0.
    set_status(node, notice_kind="", notice_deadline=None)
    evaluate(now=start + timedelta(minutes=15))
    assert open_findings("preemption_notice", node).exists()
    evaluate(now=start + timedelta(minutes=15, seconds=1))
    assert not open_findings("preemption_notice", node).exists()


def test_a_reclaimed_instances_notice_ends_after_its_deadline():
    node = healthy_node(billing_mode="spot", delivery_form="cloud_dedicated")
    start = T0 + timedelta(minutes=1)
    set_status(node, notice_kind="preempt", notice_deadline=start + timedelta(seconds=30), collected_at=start)
    evaluate(now=start)
    assert open_findings("preemption_notice", node).get().evidence["values"]["time_left_s"] == 30
    # The instance is gone: no more reports, the node turns silent, the last report still carries the notice.
    set_status(node, silent=True, silent_since=start + timedelta(seconds=40))
    evaluate(now=start + timedelta(seconds=60))
    assert open_findings("preemption_notice", node).exists(), "the notice counts for window_s after its report"
    evaluate(now=start + timedelta(seconds=901))
    assert not open_findings("preemption_notice", node).exists()
    assert open_findings("silent_spot_node", node).get().evidence["values"]["confirmed"] is True


def test_a_report_without_the_notice_supersedes_older_notice_events():
    node = healthy_node(billing_mode="spot", delivery_form="cloud_dedicated")
    start = T0 + timedelta(minutes=1)
    EventFactory(node=node, kind="preemption_notice", code=None, at=start,
                 detail={"notice": {"kind": "terminate", "deadline": (start + timedelta(seconds=120)).isoformat()}})
    evaluate(now=start + timedelta(seconds=1))
    assert open_findings("preemption_notice", node).get().evidence["values"]["time_left_s"] == 119
    set_status(node, received_at=start + timedelta(seconds=15), collected_at=start + timedelta(seconds=15))
    evaluate(now=start + timedelta(seconds=16))
    assert not open_findings("preemption_notice", node).exists()


def test_silent_spot_node_is_likely_preempted_then_confirmed():
    node = healthy_node(billing_mode="spot")
    start = T0 + timedelta(minutes=1)
    set_status(node, silent=True, silent_since=start)
    evaluate(now=start)
    finding = open_findings("silent_spot_node", node).get()
    assert (finding.step, finding.layer, finding.responsible_party) == ("platform_hardware", "virtualization",
                                                                         "provider")
    assert finding.summary.endswith("likely preempted (not yet confirmed)")
    assert finding.evidence["values"]["confirmed"] is False
    assert not open_findings("node_silent", node).exists(), "spot nodes get the spot rule, not the outage rule"

    EventFactory(node=node, kind="preemption_notice", code=None, at=start - timedelta(seconds=60))
    evaluate(now=start + timedelta(seconds=15))
    finding.refresh_from_db()
    assert finding.evidence["values"]["confirmed"] is True
    assert "preempted (preemption notice at 12:00:00 UTC)" in finding.summary

    set_status(node, silent=False, silent_since=None)
    evaluate(now=start + timedelta(seconds=30))
    evaluate(now=start + timedelta(seconds=90))
    finding.refresh_from_db()
    assert finding.state == "resolved"


def test_checkpoint_older_than_the_pools_policy():
    pool = PoolFactory(billing_mode="spot")
    node = healthy_node(billing_mode="spot", pool=pool)
    CheckpointPolicy.objects.create(pool=pool, max_checkpoint_age_s=600)
    checkpoint = {"dirs": ["/ckpt"], "newest_path": "/ckpt/step-9.pt"}
    result = lifecycle(
        "checkpoint_stale", node,
        fault=lambda at: set_status(node, checkpoint_age_s=1500.0, checkpoint={**checkpoint, "newest_age_s": 1500}),
        clear=lambda at: set_status(node, checkpoint_age_s=60.0, checkpoint={**checkpoint, "newest_age_s": 60}))
    finding = result.opened
    assert (finding.step, finding.layer, finding.responsible_party) == ("platform_hardware", "application", "us")
    assert finding.summary == ("Newest checkpoint is 25 min old (pool policy 10 min) — a preemption now loses that "
                               "much work")
    assert finding.evidence["values"]["limit_source"] == "pool policy"


def test_a_policy_for_all_billing_modes_covers_owned_bare_metal():
    pool = PoolFactory(delivery_form="bare_metal_owned", billing_mode="reserved")
    node = healthy_node(pool=pool, delivery_form="bare_metal_owned", billing_mode="reserved")
    policy = CheckpointPolicy.objects.create(pool=pool, max_checkpoint_age_s=1800)
    set_status(node, checkpoint_age_s=7200.0, checkpoint={"dirs": ["/ckpt"], "newest_age_s": 7200})
    evaluate(now=T0)
    evaluate(now=T0 + timedelta(minutes=2))
    assert not open_findings("checkpoint_stale", node).exists(), "a spot-only policy leaves reserved nodes alone"
    policy.applies_to_all_billing_modes = True
    policy.save()
    evaluate(now=T0 + timedelta(minutes=3))
    evaluate(now=T0 + timedelta(minutes=4))
    finding = open_findings("checkpoint_stale", node).get()
    assert finding.summary.startswith("Newest checkpoint is 120 min old (pool policy 30 min)")
    assert finding.responsible_party == "us"


def test_spot_nodes_without_a_pool_policy_use_the_rule_default():
    pool = PoolFactory(billing_mode="spot")
    node = healthy_node(billing_mode="spot", pool=pool)
    RuleOverride.objects.create(rule=Rule.objects.get(slug="checkpoint_stale"), pool=pool, params={"max_age_s": 600})
    set_status(node, checkpoint_age_s=900.0, checkpoint={"dirs": ["/ckpt"], "newest_age_s": 900})
    evaluate(now=T0)
    evaluate(now=T0 + timedelta(minutes=1))
    finding = open_findings("checkpoint_stale", node).get()
    assert finding.summary.startswith("Newest checkpoint is 15 min old (spot default 10 min)")


def test_a_spot_node_without_any_checkpoint_is_a_finding():
    node = healthy_node(billing_mode="spot")
    set_status(node, checkpoint_age_s=None, checkpoint={"dirs": ["/ckpt"], "newest_age_s": None})
    evaluate(now=T0)
    evaluate(now=T0 + timedelta(minutes=1))
    assert open_findings("checkpoint_stale", node).get().summary.startswith("No checkpoint found in /ckpt")


def test_checkpoint_age_is_not_judged_on_on_demand_nodes():
    node = healthy_node(billing_mode="on_demand")
    set_status(node, checkpoint_age_s=99999.0, checkpoint={"dirs": ["/ckpt"]})
    evaluate(now=T0)
    evaluate(now=T0 + timedelta(minutes=5))
    assert not open_findings("checkpoint_stale", node).exists()
