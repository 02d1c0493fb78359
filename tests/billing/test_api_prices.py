"""Billing plans, the price list and cost profiles through the API: validation, roles and the audit log."""

from decimal import Decimal

import pytest

from fleet.billing.models import BillingPlan, CostProfile, PriceListEntry
from fleet.core.models import AuditEntry
from tests.billing.factories import BillingPlanFactory, PriceListEntryFactory
from tests.factories import NodeFactory, PoolFactory, ProviderFactory, SiteFactory

pytestmark = pytest.mark.django_db


def test_operator_creates_a_reserved_pool_plan_and_it_is_audited(operator_api):
    pool = PoolFactory(billing_mode="reserved")
    response = operator_api.post("/api/v1/billing-plans/", {
        "pool": pool.pk, "billing_mode": "reserved", "upfront_cost": "150000.00", "currency": "usd",
        "term_start": "2025-01-01", "term_end": "2028-01-01", "auto_renew": True}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["currency"] == "USD"
    assert body["scope"] == "pool"
    assert body["term_months"] == "36.0000"
    assert body["monthly_compute"] == "4166.67"  # 150000 / 36
    entry = AuditEntry.objects.get(object_type="billing.billingplan", object_id=str(body["id"]))
    assert (entry.action, entry.actor_label) == ("create", "operator-user")

    response = operator_api.patch(f"/api/v1/billing-plans/{body['id']}/", {"term_end": "2026-01-01"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["monthly_compute"] == "12500.00"  # 150000 / 12


def test_viewer_reads_but_cannot_write(viewer_api):
    plan = BillingPlanFactory()
    pool = PoolFactory()
    entries = AuditEntry.objects.count()  # the factories' creation
    assert viewer_api.get("/api/v1/billing-plans/").json()["count"] == 1
    assert viewer_api.get(f"/api/v1/billing-plans/{plan.pk}/").status_code == 200
    response = viewer_api.post("/api/v1/billing-plans/", {"pool": pool.pk, "billing_mode": "on_demand",
                                                          "rate": "1", "currency": "USD"}, format="json")
    assert response.status_code == 403
    assert viewer_api.patch(f"/api/v1/billing-plans/{plan.pk}/", {"rate": "2"}, format="json").status_code == 403
    assert viewer_api.delete(f"/api/v1/billing-plans/{plan.pk}/").status_code == 403
    assert viewer_api.post("/api/v1/price-list/", {}, format="json").status_code == 403
    assert viewer_api.post("/api/v1/cost-profiles/", {}, format="json").status_code == 403
    assert BillingPlan.objects.count() == 1
    assert AuditEntry.objects.count() == entries


def _plan_body(kind: str) -> dict:
    pool = PoolFactory(billing_mode=kind)
    body = {"pool": pool.pk, "billing_mode": kind, "rate": "10.00", "currency": "USD"}
    if kind == "reserved":
        body.update(term_start="2025-01-01", term_end="2026-01-01")
    return body


@pytest.mark.parametrize(
    ("kind", "change", "field"),
    [
        ("on_demand", {"rate": "-1.00"}, "rate"),
        ("on_demand", {"currency": "XYZ"}, "currency"),
        ("on_demand", {"currency": "dollars"}, "currency"),
        ("on_demand", {"rate": None}, "rate"),
        ("on_demand", {"term_start": "2025-01-01"}, "term_start"),
        ("on_demand", {"auto_renew": True}, "auto_renew"),
        ("on_demand", {"upfront_cost": "100"}, "upfront_cost"),
        ("on_demand", {"billing_mode": "spot"}, "billing_mode"),  # a spot rate for an on-demand pool
        ("spot", {"rate_unit": "month"}, "rate_unit"),
        ("reserved", {"term_end": "2024-06-01"}, "term_end"),
        ("reserved", {"term_end": "2025-01-01"}, "term_end"),
        ("reserved", {"term_start": None}, "term_start"),
        ("reserved", {"upfront_cost": "-5"}, "upfront_cost"),
        ("reserved", {"rate": None}, "rate"),
        ("reserved", {"rate_unit": "week"}, "rate_unit"),
    ],
)
def test_bad_plan_is_400_naming_the_field_and_writes_nothing(operator_api, kind, change, field):
    body = {**_plan_body(kind), **change}
    entries = AuditEntry.objects.count()  # the pool's creation
    response = operator_api.post("/api/v1/billing-plans/", body, format="json")
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert field in error["fields"], error
    assert not BillingPlan.objects.exists()
    assert AuditEntry.objects.count() == entries


def test_spot_rate_on_a_reserved_node_is_refused(operator_api):
    node = NodeFactory(billing_mode="reserved")
    response = operator_api.post("/api/v1/billing-plans/", {
        "node": node.pk, "billing_mode": "spot", "rate": "3.10", "currency": "USD"}, format="json")
    assert response.status_code == 400
    assert "billed as reserved" in response.json()["error"]["fields"]["billing_mode"][0]
    assert not BillingPlan.objects.exists()


def test_plan_needs_exactly_one_scope(operator_api):
    node = NodeFactory()
    both = {"pool": PoolFactory().pk, "node": node.pk, "billing_mode": "on_demand", "rate": "1", "currency": "USD"}
    response = operator_api.post("/api/v1/billing-plans/", both, format="json")
    assert response.status_code == 400
    assert "pool" in response.json()["error"]["fields"]
    neither = {"billing_mode": "on_demand", "rate": "1", "currency": "USD"}
    assert operator_api.post("/api/v1/billing-plans/", neither, format="json").status_code == 400


def test_partial_update_is_checked_against_the_stored_plan(operator_api):
    plan = BillingPlanFactory(pool=PoolFactory(billing_mode="reserved"), billing_mode="reserved", rate=None,
                              upfront_cost=Decimal("1000"), term_start="2025-01-01", term_end="2026-01-01")
    response = operator_api.patch(f"/api/v1/billing-plans/{plan.pk}/", {"term_start": "2026-06-01"}, format="json")
    assert response.status_code == 400
    assert "term_end" in response.json()["error"]["fields"]
    plan.refresh_from_db()
    assert str(plan.term_start) == "2025-01-01"


def test_one_plan_per_pool(operator_api):
    plan = BillingPlanFactory()
    body = {"pool": plan.pool_id, "billing_mode": "on_demand", "rate": "1", "currency": "USD"}
    response = operator_api.post("/api/v1/billing-plans/", body, format="json")
    assert response.status_code == 400
    assert "pool" in response.json()["error"]["fields"]


def test_plan_filters(viewer_api):
    pool_plan = BillingPlanFactory()
    node_plan = BillingPlanFactory(pool=None, node=NodeFactory(billing_mode="spot"), billing_mode="spot",
                                   currency="EUR")
    ids = lambda params: [p["id"] for p in viewer_api.get("/api/v1/billing-plans/", params).json()["results"]]  # noqa: E731
    assert ids({"scope": "pool"}) == [pool_plan.pk]
    assert ids({"scope": "node"}) == [node_plan.pk]
    assert ids({"currency": "EUR"}) == [node_plan.pk]
    assert ids({"billing_mode": "spot"}) == [node_plan.pk]
    assert viewer_api.get("/api/v1/billing-plans/", {"billing_mode": "free"}).status_code == 400


def test_price_list_crud_and_validation(operator_api, viewer_api):
    provider = ProviderFactory()
    body = {"provider": provider.pk, "instance_type": "p5.48xlarge", "billing_mode": "reserved", "term_months": 12,
            "rate": "0", "upfront_cost": "500000", "currency": "USD", "gpu_count": 8}
    response = operator_api.post("/api/v1/price-list/", body, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["provider_name"] == provider.name

    duplicate = operator_api.post("/api/v1/price-list/", body, format="json")
    assert duplicate.status_code == 400
    assert "instance_type" in duplicate.json()["error"]["fields"]

    for change, field in [({"term_months": 0}, "term_months"), ({"rate": "-3"}, "rate"),
                          ({"currency": "ABC"}, "currency"), ({"billing_mode": "spot", "term_months": 0,
                                                               "upfront_cost": "0", "rate_unit": "month"},
                                                              "rate_unit"),
                          ({"billing_mode": "on_demand", "term_months": 12}, "term_months")]:
        response = operator_api.post("/api/v1/price-list/", {**body, "instance_type": "other", **change},
                                     format="json")
        assert response.status_code == 400, change
        assert field in response.json()["error"]["fields"], (change, response.json())
    assert PriceListEntry.objects.count() == 1

    PriceListEntryFactory(provider=provider, instance_type="g5.xlarge", billing_mode="spot", rate=Decimal("0.4"))
    listed = viewer_api.get("/api/v1/price-list/", {"provider": provider.pk, "billing_mode": "spot"}).json()
    assert [e["instance_type"] for e in listed["results"]] == ["g5.xlarge"]


def test_cost_profile_scope_and_currency(operator_api):
    provider, site = ProviderFactory(), SiteFactory()
    ok = operator_api.post("/api/v1/cost-profiles/", {"provider": provider.pk, "currency": "EUR",
                                                      "ops_hours_per_node_month": "1.5", "ops_hourly_rate": "70"},
                           format="json")
    assert ok.status_code == 201, ok.content
    for body, field in [({"provider": provider.pk, "site": site.pk, "currency": "EUR"}, "provider"),
                        ({"site": site.pk, "currency": "EURO"}, "currency"),
                        ({"site": site.pk, "currency": "EUR", "storage_monthly_per_node": "-1"},
                         "storage_monthly_per_node"),
                        ({"provider": provider.pk, "currency": "EUR"}, "provider")]:
        response = operator_api.post("/api/v1/cost-profiles/", body, format="json")
        assert response.status_code == 400, body
        assert field in response.json()["error"]["fields"], (body, response.json())
    assert CostProfile.objects.count() == 1
