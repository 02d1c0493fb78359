"""Monthly cost per node for each billing mode, running costs, and TCO per (utilised) GPU-hour."""

from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from fleet.billing.selectors import cost_report, node_costs, node_utilisation
from fleet.inventory.models import Node
from fleet.telemetry.models import GPUSample, GPUSampleRollup
from tests.billing.factories import BillingPlanFactory, CostProfileFactory, PriceListEntryFactory
from tests.factories import BaselineFactory, GPUFactory, NodeFactory, PoolFactory, ProviderFactory, SiteFactory

pytestmark = pytest.mark.django_db


def _costs(*nodes, now=None):
    fresh = Node.objects.filter(pk__in=[n.pk for n in nodes]).select_related("provider", "site", "pool", "pool__site")
    return node_costs(nodes=list(fresh), now=now or timezone.now())


@pytest.fixture
def provider():
    provider = ProviderFactory()
    # Running costs a node a month: storage 120.00, egress 500 GB × 0.08 = 40.00, backup 25.00,
    # ops 1.5 h × 60.00 = 90.00 → 275.00.
    CostProfileFactory(provider=provider, storage_monthly_per_node=Decimal("120"),
                       egress_gb_per_node_month=Decimal("500"), egress_price_per_gb=Decimal("0.08"),
                       backup_monthly_per_node=Decimal("25"), ops_hours_per_node_month=Decimal("1.5"),
                       ops_hourly_rate=Decimal("60"))
    return provider


def test_on_demand_node_with_its_own_plan(provider):
    node = NodeFactory(provider=provider, billing_mode="on_demand", expected_gpu_count=8)
    BillingPlanFactory(pool=None, node=node, billing_mode="on_demand", rate=Decimal("32.77"))
    cost = _costs(node)[node.pk]
    # compute 32.77 × 730 = 23922.10; total 23922.10 + 275.00 = 24197.10; per GPU-hour 24197.10 / 5840 = 4.1433
    assert cost.rate_source == "node_plan"
    assert (cost.compute, cost.storage, cost.egress, cost.backup, cost.ops) == (
        Decimal("23922.10"), Decimal("120.00"), Decimal("40.00"), Decimal("25.00"), Decimal("90.00"))
    assert cost.total == Decimal("24197.10")
    assert cost.gpu_hours == Decimal(5840)
    assert cost.tco_per_gpu_hour == Decimal("4.1433")
    assert cost.utilisation_pct is None and cost.tco_per_utilised_gpu_hour is None


def test_gpus_are_counted_as_health_counts_them_declared_then_baseline_then_pool(provider):
    """One expected GPU count per node (inventory's): a baseline that pins a count comes before the pool's."""
    pool = PoolFactory(provider=provider, billing_mode="spot", gpus_per_node=8)
    BillingPlanFactory(pool=pool, billing_mode="spot", rate=Decimal("9.83"))
    BaselineFactory(pool=pool, gpu_count=4)
    pinned = NodeFactory(provider=provider, pool=pool, billing_mode="spot", expected_gpu_count=0)
    declared = NodeFactory(provider=provider, pool=pool, billing_mode="spot", expected_gpu_count=2)
    costs = _costs(pinned, declared)
    assert (costs[pinned.pk].gpu_count, costs[declared.pk].gpu_count) == (4, 2)
    assert costs[pinned.pk].gpu_hours == Decimal(730 * 4)


def test_spot_node_inherits_its_pools_plan(provider):
    pool = PoolFactory(provider=provider, billing_mode="spot", gpus_per_node=8)
    BillingPlanFactory(pool=pool, billing_mode="spot", rate=Decimal("9.83"))
    node = NodeFactory(provider=provider, pool=pool, billing_mode="spot", expected_gpu_count=0)
    cost = _costs(node)[node.pk]
    # 9.83 × 730 = 7175.90; + 275.00 = 7450.90; GPUs from the pool (8): 7450.90 / 5840 = 1.27584… → 1.2758
    assert cost.rate_source == "pool_plan"
    assert cost.compute == Decimal("7175.90")
    assert cost.total == Decimal("7450.90")
    assert cost.gpu_count == 8
    assert cost.tco_per_gpu_hour == Decimal("1.2758")


def test_reserved_node_is_amortised_over_its_term(provider):
    pool = PoolFactory(provider=provider, billing_mode="reserved")
    BillingPlanFactory(pool=pool, billing_mode="reserved", rate=None, upfront_cost=Decimal("150000"),
                       term_start=date(2025, 1, 1), term_end=date(2028, 1, 1))
    node = NodeFactory(provider=provider, pool=pool, billing_mode="reserved", expected_gpu_count=8)
    cost = _costs(node)[node.pk]
    # 150000 over 36 months = 4166.67 a month; + 275.00 = 4441.67; 4441.67 / 5840 = 0.76056… → 0.7606
    assert cost.compute == Decimal("4166.67")
    assert cost.total == Decimal("4441.67")
    assert cost.tco_per_gpu_hour == Decimal("0.7606")


def test_reserved_partial_upfront_from_the_price_list(provider):
    PriceListEntryFactory(provider=provider, instance_type="gn7i", billing_mode="reserved", term_months=12,
                          rate=Decimal("2.50"), upfront_cost=Decimal("60000"))
    PriceListEntryFactory(provider=provider, instance_type="gn7i", billing_mode="reserved", term_months=36,
                          rate=Decimal("1.00"), upfront_cost=Decimal("90000"))
    node = NodeFactory(provider=provider, billing_mode="reserved", instance_type="gn7i")
    cost = _costs(node)[node.pk]
    # Without a plan the shortest term is used: 60000 / 12 + 2.50 × 730 = 5000.00 + 1825.00 = 6825.00
    assert cost.rate_source == "price_list"
    assert cost.compute == Decimal("6825.00")
    assert cost.total == Decimal("7100.00")


def test_plan_for_another_mode_is_skipped_with_a_warning(provider):
    pool = PoolFactory(provider=provider, instance_type="p5.48xlarge")
    BillingPlanFactory(pool=pool, billing_mode="on_demand", rate=Decimal("98.32"))
    PriceListEntryFactory(provider=provider, instance_type="p5.48xlarge", billing_mode="spot", rate=Decimal("40"))
    node = NodeFactory(provider=provider, pool=pool, billing_mode="spot")
    cost = _costs(node)[node.pk]
    assert cost.rate_source == "price_list"
    assert cost.compute == Decimal("29200.00")  # 40 × 730
    assert any("billed as spot" in w for w in cost.warnings)


def test_unpriced_node_has_no_total(provider):
    node = NodeFactory(provider=provider, instance_type="unknown")
    cost = _costs(node)[node.pk]
    assert cost.rate_source == "none"
    assert cost.compute is None and cost.total is None and cost.tco_per_gpu_hour is None
    assert cost.currency == "USD"  # from the cost profile
    assert cost.warnings


def test_site_profile_overrides_provider_profile_field_by_field(provider):
    site = SiteFactory(provider=provider)
    CostProfileFactory(provider=None, site=site, storage_monthly_per_node=Decimal("200"))
    node = NodeFactory(provider=provider, site=site)
    BillingPlanFactory(pool=None, node=node, rate=Decimal("1"))
    cost = _costs(node)[node.pk]
    # storage from the site (200.00), the rest from the provider: 40.00 + 25.00 + 90.00; compute 730.00
    assert (cost.storage, cost.egress, cost.backup, cost.ops) == (
        Decimal("200.00"), Decimal("40.00"), Decimal("25.00"), Decimal("90.00"))
    assert cost.total == Decimal("1085.00")


def test_running_costs_in_another_currency_are_left_out(provider):
    node = NodeFactory(provider=provider)
    BillingPlanFactory(pool=None, node=node, rate=Decimal("2"), currency="EUR")
    cost = _costs(node)[node.pk]
    assert cost.currency == "EUR"
    assert cost.total == Decimal("1460.00")  # compute only: 2 × 730
    assert cost.storage is None
    assert any("exchange" in w for w in cost.warnings)


def test_utilisation_combines_rollups_and_newer_raw_samples_without_double_counting(history_days):
    now = timezone.now().replace(microsecond=0)
    node = NodeFactory()
    gpu0, gpu1 = GPUFactory(node=node, index=0), GPUFactory(node=node, index=1)
    bucket = now - timedelta(hours=2)
    GPUSampleRollup.objects.create(gpu=gpu0, bucket=bucket, samples=20, utilization_gpu_pct=60)
    GPUSampleRollup.objects.create(gpu=gpu1, bucket=bucket, samples=20, utilization_gpu_pct=40)
    history_days(bucket, now)
    # Already inside the rolled-up bucket: must not be counted again.
    GPUSample.objects.create(gpu=gpu0, at=bucket + timedelta(minutes=1), utilization_gpu_pct=0)
    # Raw rows are minute buckets, weighted by the reports they hold.
    GPUSample.objects.create(gpu=gpu0, at=bucket + timedelta(minutes=6), utilization_gpu_pct=50, samples=4)
    GPUSample.objects.create(gpu=gpu1, at=bucket + timedelta(minutes=6), utilization_gpu_pct=20, samples=1)
    GPUSample.objects.create(gpu=gpu1, at=bucket + timedelta(minutes=7), utilization_gpu_pct=None, samples=4)
    # Outside the period.
    GPUSampleRollup.objects.create(gpu=gpu0, bucket=now - timedelta(days=40), samples=20, utilization_gpu_pct=0)
    # (60 × 20 + 40 × 20 + 50 × 4 + 20 × 1) / 45 = 2220 / 45 = 49.33
    assert node_utilisation(node_ids=[node.pk], start=now - timedelta(days=30), end=now) == {node.pk: Decimal("49.33")}


def test_tco_per_utilised_gpu_hour_uses_measured_utilisation(provider):
    now = timezone.now()
    node = NodeFactory(provider=provider, expected_gpu_count=8)
    BillingPlanFactory(pool=None, node=node, rate=Decimal("32.77"))
    gpu = GPUFactory(node=node)
    GPUSampleRollup.objects.create(gpu=gpu, bucket=now - timedelta(days=3), samples=10, utilization_gpu_pct=70)
    GPUSampleRollup.objects.create(gpu=gpu, bucket=now - timedelta(days=2), samples=30, utilization_gpu_pct=40)
    unmeasured = NodeFactory(provider=provider, expected_gpu_count=8)
    BillingPlanFactory(pool=None, node=unmeasured, rate=Decimal("32.77"))
    costs = _costs(node, unmeasured, now=now)
    # utilisation (70 × 10 + 40 × 30) / 40 = 47.50 %; 24197.10 / (5840 × 0.475 = 2774) = 8.72281… → 8.7228
    assert costs[node.pk].utilisation_pct == Decimal("47.50")
    assert costs[node.pk].tco_per_utilised_gpu_hour == Decimal("8.7228")
    assert costs[unmeasured.pk].utilisation_pct is None
    assert costs[unmeasured.pk].tco_per_utilised_gpu_hour is None


def test_cost_report_totals_per_currency_in_a_fixed_number_of_queries(provider, django_assert_max_num_queries):
    pool = PoolFactory(provider=provider, billing_mode="spot")
    BillingPlanFactory(pool=pool, billing_mode="spot", rate=Decimal("9.83"))
    for _ in range(5):
        NodeFactory(provider=provider, pool=pool, billing_mode="spot")
    eur = NodeFactory(provider=provider)
    BillingPlanFactory(pool=None, node=eur, rate=Decimal("2"), currency="EUR")
    NodeFactory(provider=provider, instance_type="nothing")
    nodes = Node.objects.select_related("provider", "site", "pool", "pool__site")
    with django_assert_max_num_queries(8):
        report = cost_report(nodes=nodes, now=timezone.now())
    euro, usd = report.totals
    assert (euro.currency, euro.nodes, euro.total) == ("EUR", 1, Decimal("1460.00"))
    # 5 × 7450.90 = 37254.50
    assert (usd.currency, usd.nodes, usd.total, usd.compute) == ("USD", 5, Decimal("37254.50"), Decimal("35879.50"))
    assert report.unpriced_nodes == 1
    assert len(report.rows) == 7
