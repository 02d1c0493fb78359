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
