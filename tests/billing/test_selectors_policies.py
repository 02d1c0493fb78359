import pytest

from fleet.billing.selectors import checkpoint_policy_for_nodes
from tests.billing.factories import CheckpointPolicyFactory
from tests.factories import NodeFactory, PoolFactory

pytestmark = pytest.mark.django_db


def test_policy_covers_spot_nodes_unless_it_applies_to_all(django_assert_num_queries):
    spot_only = PoolFactory()
    CheckpointPolicyFactory(pool=spot_only, max_checkpoint_age_s=1800)
    every_mode = PoolFactory()
    CheckpointPolicyFactory(pool=every_mode, max_checkpoint_age_s=900, applies_to_all_billing_modes=True)
    spot = NodeFactory(pool=spot_only, billing_mode="spot")
    on_demand = NodeFactory(pool=spot_only, billing_mode="on_demand")
    reserved = NodeFactory(pool=every_mode, billing_mode="reserved")
    no_policy = NodeFactory(pool=PoolFactory(), billing_mode="spot")
    no_pool = NodeFactory(billing_mode="spot")

    with django_assert_num_queries(1):
        policies = checkpoint_policy_for_nodes([spot.pk, on_demand.pk, reserved.pk, no_policy.pk, no_pool.pk, 999999])

    assert policies == {spot.pk: 1800, on_demand.pk: None, reserved.pk: 900, no_policy.pk: None, no_pool.pk: None}


def test_policy_api_validates_and_needs_operator(viewer_api, operator_api):
    pool = PoolFactory()
    body = {"pool": pool.pk, "max_checkpoint_age_s": 1800}
    assert viewer_api.post("/api/v1/checkpoint-policies/", body, format="json").status_code == 403
    response = operator_api.post("/api/v1/checkpoint-policies/", {**body, "max_checkpoint_age_s": 0}, format="json")
    assert response.status_code == 400
    assert "max_checkpoint_age_s" in response.json()["error"]["fields"]
    assert operator_api.post("/api/v1/checkpoint-policies/", body, format="json").status_code == 201
    again = operator_api.post("/api/v1/checkpoint-policies/", body, format="json")
    assert again.status_code == 400
    assert "pool" in again.json()["error"]["fields"]


def test_pool_policies_give_the_same_answer_as_the_per_node_selector(django_assert_num_queries):
    """The health cycle reads a fleet's policies per pool (a handful of rows) and applies them per node."""
    from fleet.billing.selectors import checkpoint_max_age, checkpoint_policies_by_pool

    spot_only, every_mode, bare = PoolFactory(), PoolFactory(), PoolFactory()
    CheckpointPolicyFactory(pool=spot_only, max_checkpoint_age_s=1800)
    CheckpointPolicyFactory(pool=every_mode, max_checkpoint_age_s=900, applies_to_all_billing_modes=True)
    nodes = [NodeFactory(pool=pool, billing_mode=mode) for pool in (spot_only, every_mode, bare)
             for mode in ("spot", "on_demand", "reserved")] + [NodeFactory(billing_mode="spot")]

    with django_assert_num_queries(1):
        policies = checkpoint_policies_by_pool([n.pool_id for n in nodes])
    assert policies == {spot_only.pk: (1800, False), every_mode.pk: (900, True)}
    by_pool = {n.pk: checkpoint_max_age(policies.get(n.pool_id), n.billing_mode) for n in nodes}
    assert by_pool == checkpoint_policy_for_nodes([n.pk for n in nodes])
    assert [by_pool[n.pk] for n in nodes[:3]] == [1800, None, None]
    assert [by_pool[n.pk] for n in nodes[3:6]] == [900, 900, 900]
