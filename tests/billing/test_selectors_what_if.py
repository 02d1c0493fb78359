"""A pool's monthly cost in each form, worked out by hand.

The pool: 2 spot nodes of 8 GPUs (p5.48xlarge), both 10 days old, priced by the pool's plan at 40.00/h.
Running costs a node a month: storage 100.00 + egress 1000 GB × 0.09 = 90.00 + backup 50.00 + ops 2 h × 80.00
= 160.00 → 400.00. One preemption in 30 days lost 4 GPU-hours: 1 / 20 node-days = 0.05 per node-day.
"""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from fleet.billing.selectors import pool_what_if
from fleet.inventory.models import Node
from tests.billing.factories import (
    BillingPlanFactory,
    CheckpointPolicyFactory,
    CostProfileFactory,
    PreemptionRecordFactory,
    PriceListEntryFactory,
)
from tests.factories import NodeFactory, PoolFactory, ProviderFactory

pytestmark = pytest.mark.django_db

NOW = timezone.now().replace(microsecond=0)


@pytest.fixture
def pool():
    provider = ProviderFactory()
    CostProfileFactory(provider=provider, storage_monthly_per_node=Decimal("100"),
                       egress_gb_per_node_month=Decimal("1000"), egress_price_per_gb=Decimal("0.09"),
                       backup_monthly_per_node=Decimal("50"), ops_hours_per_node_month=Decimal("2"),
                       ops_hourly_rate=Decimal("80"), bare_metal_monthly_per_gpu=Decimal("2000"))
    pool = PoolFactory(provider=provider, billing_mode="spot", instance_type="p5.48xlarge", gpus_per_node=8)
    BillingPlanFactory(pool=pool, billing_mode="spot", rate=Decimal("40.00"))
    for mode, term, rate, upfront in [("on_demand", 0, "98.32", "0"), ("reserved", 12, "0", "500000"),
                                      ("reserved", 36, "0", "900000"), ("spot", 0, "45.00", "0")]:
        PriceListEntryFactory(provider=provider, instance_type="p5.48xlarge", billing_mode=mode, term_months=term,
                              rate=Decimal(rate), upfront_cost=Decimal(upfront))
    nodes = [NodeFactory(provider=provider, pool=pool, billing_mode="spot", expected_gpu_count=8) for _ in range(2)]
    Node.objects.filter(pool=pool).update(created_at=NOW - timedelta(days=10))
    PreemptionRecordFactory(node=nodes[0], pool=pool, at=NOW - timedelta(days=1), lost_gpu_hours=Decimal("4"))
    return pool


def _by_kind(result):
    found = {}
    for scenario in result.scenarios:
        found.setdefault(scenario.scenario, []).append(scenario)
    return found


def test_what_if_compares_every_form(pool):
    result = pool_what_if(pool=pool, now=NOW)
    s = _by_kind(result)

    assert (result.node_count, result.gpus_per_node) == (2, 8)
    assert result.preemptions_per_node_day == Decimal("0.050000")
    assert result.lost_gpu_hours_per_preemption == Decimal("4")

    (current,) = s["current"]
    # 40.00 × 730 = 29200.00 + 400.00 = 29600.00 a node; 59200.00 for two; 29600 / 5840 = 5.06849… → 5.0685
    assert (current.total_per_node, current.total_monthly) == (Decimal("29600.00"), Decimal("59200.00"))
    assert current.tco_per_gpu_hour == Decimal("5.0685")

    (on_demand,) = s["on_demand"]
    # 98.32 × 730 = 71773.60 + 400.00 = 72173.60; × 2 = 144347.20; 85147.20 more than today
    assert (on_demand.compute_per_node, on_demand.total_per_node) == (Decimal("71773.60"), Decimal("72173.60"))
    assert on_demand.total_monthly == Decimal("144347.20")
    assert on_demand.difference_vs_current == Decimal("85147.20")
    assert on_demand.tco_per_gpu_hour == Decimal("12.3585")  # 72173.60 / 5840 = 12.35849…

    one_year, three_years = s["reserved"]
    # 500000 / 12 = 41666.67 + 400.00 = 42066.67; × 2 = 84133.34
    assert (one_year.term_months, one_year.compute_per_node) == (Decimal(12), Decimal("41666.67"))
    assert one_year.total_monthly == Decimal("84133.34")
    assert one_year.difference_vs_current == Decimal("24933.34")
    # 900000 / 36 = 25000.00 + 400.00 = 25400.00; × 2 = 50800.00, 8400.00 less than today
    assert three_years.total_monthly == Decimal("50800.00")
    assert three_years.difference_vs_current == Decimal("-8400.00")

    (spot,) = s["spot"]
    # The pool's plan (40.00/h) wins over the list price (45.00/h). A spot GPU-hour costs 29200 / 5840 = 5.00.
    # Expected losses: 0.05 × 30.4166… days × 4 GPU-h × 5.00 = 30.42 a node a month.
    # 29200.00 + 400.00 + 30.42 = 29630.42; × 2 = 59260.84
    assert spot.source == "pool billing plan"
    assert spot.preemption_loss_per_node == Decimal("30.42")
    assert spot.total_per_node == Decimal("29630.42")
    assert spot.total_monthly == Decimal("59260.84")
    assert spot.difference_vs_current == Decimal("60.84")

    (bare_metal,) = s["bare_metal"]
    # 2000.00 per GPU × 8 = 16000.00 + 400.00 = 16400.00; × 2 = 32800.00
    assert bare_metal.total_monthly == Decimal("32800.00")
    assert bare_metal.difference_vs_current == Decimal("-26400.00")


def test_given_preemption_rate_and_bare_metal_price(pool):
    idc = ProviderFactory(kind="idc", cloud="")
    server = PriceListEntryFactory(provider=idc, instance_type="8x H100 SXM server", rate=Decimal("18000"),
                                   rate_unit="month")
    result = pool_what_if(pool=pool, now=NOW, spot_preemption_rate=Decimal("0.2"), bare_metal_entry=server)
    s = _by_kind(result)
    # 0.2 × 30.4166… × 4 × 5.00 = 121.666… → 121.67
    assert s["spot"][0].preemption_loss_per_node == Decimal("121.67")
    assert result.preemption_rate_basis == "given with the request"
    # The IDC has no cost profile: 18000.00 a node, 36000.00 for two
    (bare_metal,) = s["bare_metal"]
    assert (bare_metal.overhead_per_node, bare_metal.total_monthly) == (None, Decimal("36000.00"))


def test_lost_work_falls_back_to_half_the_checkpoint_policy():
    pool = PoolFactory(billing_mode="spot", instance_type="g5.xlarge", gpus_per_node=1)
    BillingPlanFactory(pool=pool, billing_mode="spot", rate=Decimal("0.50"))
    CheckpointPolicyFactory(pool=pool, max_checkpoint_age_s=1800)
    NodeFactory(provider=pool.provider, pool=pool, billing_mode="spot", expected_gpu_count=1)
    result = pool_what_if(pool=pool, now=NOW, spot_preemption_rate=Decimal("0.1"))
    # 1800 s / 2 = 900 s = 0.25 h × 1 GPU; 0.1 × 30.4166… × 0.25 × 0.50 = 0.38020… → 0.38
    assert result.lost_gpu_hours_per_preemption == Decimal("0.25")
    assert _by_kind(result)["spot"][0].preemption_loss_per_node == Decimal("0.38")


def test_missing_prices_make_scenarios_unavailable_not_zero():
    pool = PoolFactory(billing_mode="on_demand", instance_type="odd.type")
    result = pool_what_if(pool=pool, now=NOW)
    s = _by_kind(result)
    assert not s["current"][0].available
    for kind in ("on_demand", "reserved", "spot", "bare_metal"):
        assert not s[kind][0].available, kind
        assert s[kind][0].total_monthly is None
