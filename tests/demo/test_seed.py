import pytest
from django.utils import timezone

from fleet.billing.models import BillingPlan, CheckpointPolicy
from fleet.billing.selectors import expiring_reserved_terms
from fleet.demo.seed import demo_seed
from fleet.inventory.models import BoundaryOverride, Pool, Site
from fleet.inventory.selectors import node_boundary
from fleet.telemetry.models import EnrollmentToken
from fleet.telemetry.services.enrollment import node_enroll
from fleet_agent.simulator import load_scenario
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def test_demo_seed_matches_scenario_and_is_idempotent():
    scenario = load_scenario("demo-fleet")
    admin = UserFactory(role="admin", is_superuser=True)
    groups = demo_seed(scenario=scenario, actor=admin)
    assert sum(len(g.scenario.nodes) for g in groups) == len(scenario.nodes) == 24
    assert {g.key[2] for g in groups} <= {"on_demand", "reserved", "spot"}
    assert Pool.objects.count() == len(groups)
    assert Site.objects.get(name="cn-hangzhou").icp_filing_required is True
    assert BoundaryOverride.objects.filter(provider__slug="own", layer="facility", owner="us").exists()
    assert BillingPlan.objects.count() == len(groups)
    assert CheckpointPolicy.objects.filter(pool__billing_mode="spot").exists()
    expiring = [t.pool_name for t in expiring_reserved_terms(now=timezone.now())]
    assert expiring == ["azure-Standard_ND96isr_H100_v5-reserved"]
    demo_seed(scenario=scenario, actor=admin)
    assert Pool.objects.count() == len(groups)
    assert BillingPlan.objects.count() == len(groups)
    assert EnrollmentToken.objects.count() == 2 * len(groups)

    owned = next(g for g in groups if g.key[0] == "own")
    enrollment = node_enroll(token_key=owned.token, facts={"machine_id": "0123456789abcdef", "hostname": "own-1"})
    cells = {c.layer: c for c in node_boundary(node=enrollment.node)}
    assert (cells["facility"].owner, cells["facility"].source) == ("us", "provider")
    assert cells["hardware"].owner == "hardware_vendor"


def test_demo_pools_hold_conditions_briefly_and_production_rules_stay_as_they_are():
    from fleet.demo.seed import DEMO_HOLD_S
    from fleet.health.models import Rule, RuleOverride

    scenario = load_scenario("demo-fleet")
    demo_seed(scenario=scenario, actor=UserFactory(role="admin", is_superuser=True))
    slow = Rule.objects.get(slug="data_pipeline_bottleneck")
    assert slow.duration_s > DEMO_HOLD_S  # the fleet-wide rule keeps its production hold
    pool = Pool.objects.get(name="gcp-a3-highgpu-8g-on_demand")
    assert RuleOverride.objects.get(rule=slow, pool=pool).duration_s == DEMO_HOLD_S
    # Every fault of the demo starts within the first minute, so with the short holds each shows within two.
    assert max(f.at_s for n in scenario.nodes for f in n.faults) <= 60
