"""Node billing, the fleet billing list, the cost report (JSON and CSV), expiring terms and the what-if."""

import csv
import io
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from tests.billing.factories import (
    BillingPlanFactory,
    CostProfileFactory,
    PreemptionRecordFactory,
    PriceListEntryFactory,
    ReservedPlanFactory,
)
from tests.factories import NodeFactory, PoolFactory, ProviderFactory, SiteFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet():
    """Two spot nodes in Hangzhou (one public) and an on-demand node in Virginia."""
    provider = ProviderFactory(name="Cloud A")
    CostProfileFactory(provider=provider, storage_monthly_per_node=Decimal("100"))
    hangzhou = SiteFactory(provider=provider, name="cn-hangzhou", country="CN")
    virginia = SiteFactory(provider=provider, name="us-east-1", country="US")
    spot_pool = PoolFactory(name="spot-a100", provider=provider, site=hangzhou, billing_mode="spot",
                            instance_type="ecs.gn7e", gpus_per_node=8)
    BillingPlanFactory(pool=spot_pool, billing_mode="spot", rate=Decimal("12.50"))
    public = NodeFactory(hostname="hz-1", provider=provider, pool=spot_pool, billing_mode="spot",
                         public_endpoint=True)
    private = NodeFactory(hostname="hz-2", provider=provider, pool=spot_pool, billing_mode="spot")
    PriceListEntryFactory(provider=provider, instance_type="p4d.24xlarge", rate=Decimal("32.77"))
    on_demand = NodeFactory(hostname="va-1", provider=provider, site=virginia, instance_type="p4d.24xlarge")
    NodeFactory(hostname="old", provider=provider, site=virginia, instance_type="p4d.24xlarge", state="retired")
    return {"public": public, "private": private, "on_demand": on_demand, "pool": spot_pool}


def test_node_billing_detail(viewer_api, fleet):
    node = fleet["public"]
    PreemptionRecordFactory(node=node, pool=fleet["pool"], at=timezone.now() - timedelta(days=2),
                            lost_gpu_hours=Decimal("3"))
    response = viewer_api.get(f"/api/v1/nodes/{node.pk}/billing/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["billing"]["rate_source"] == "pool_plan"
    assert body["billing"]["plan"]["rate"] == "12.500000"
    # 12.50 × 730 = 9125.00 + storage 100.00 = 9225.00; 9225 / 5840 = 1.57962… → 1.5796
    assert (body["cost"]["compute"], body["cost"]["total"]) == ("9125.00", "9225.00")
    assert body["cost"]["tco_per_gpu_hour"] == "1.5796"
    assert body["cost"]["utilisation_pct"] is None
    assert [p["lost_gpu_hours"] for p in body["preemptions"]] == ["3.0000"]
    assert [f["flag"] for f in body["compliance_flags"]] == ["icp_filing_required", "ddos_protection_recommended"]
    assert viewer_api.get("/api/v1/nodes/999999/billing/").status_code == 404
    assert viewer_api.get(f"/api/v1/nodes/{node.pk}/billing/", {"period_days": 0}).status_code == 400


def test_fleet_billing_list_and_filters(viewer_api, fleet):
    def hostnames(params=None):
        response = viewer_api.get("/api/v1/node-billing/", params or {})
        assert response.status_code == 200, response.content
        return [row["hostname"] for row in response.json()["results"]]

    assert hostnames() == ["hz-1", "hz-2", "va-1"]  # retired nodes are left out
    assert hostnames({"state": "retired"}) == ["old"]
    assert hostnames({"compliance": "icp_filing_required"}) == ["hz-1"]
    assert hostnames({"compliance": "ddos_protection_recommended"}) == ["hz-1"]
    assert hostnames({"billing_mode": "on_demand"}) == ["va-1"]
    assert hostnames({"site": fleet["pool"].site_id}) == ["hz-1", "hz-2"]  # via the pool
    assert hostnames({"instance_type": "ecs.gn7e"}) == ["hz-1", "hz-2"]
    assert hostnames({"has_plan": "false"}) == ["va-1"]
    row = viewer_api.get("/api/v1/node-billing/", {"hostname": "va-1"}).json()["results"][0]
    assert row["cost"]["rate_source"] == "price_list"
    assert row["cost"]["total"] == "24022.10"  # 32.77 × 730 = 23922.10 + 100.00
    bad = viewer_api.get("/api/v1/node-billing/", {"compliance": "gdpr"})
    assert bad.status_code == 400
    assert "compliance" in bad.json()["error"]["fields"]


def test_cost_report_json(viewer_api, fleet):
    body = viewer_api.get("/api/v1/cost-report/").json()
    assert [r["hostname"] for r in body["rows"]] == ["hz-1", "hz-2", "va-1"]
    (usd,) = body["totals"]
    # 2 × 9225.00 + 24022.10 = 42472.10
    assert (usd["currency"], usd["nodes"], usd["total"], usd["gpu_count"]) == ("USD", 3, "42472.10", 24)
    assert body["hours_per_month"] == "730"


@pytest.mark.parametrize("url", ["/api/v1/cost-report/?format=csv", "/api/v1/cost-report.csv"])
def test_cost_report_csv(viewer_api, fleet, url):
    response = viewer_api.get(url)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].startswith('attachment; filename="cost-report-')
    assert response["Content-Disposition"].endswith('.csv"')
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    header, data = rows[0], rows[1:]
    assert header[:3] == ["node_id", "hostname", "provider"]
    by_host = {row[header.index("hostname")]: dict(zip(header, row, strict=True)) for row in data}
    assert sorted(by_host) == ["hz-1", "hz-2", "va-1"]
    assert by_host["va-1"]["total"] == "24022.10"
    assert by_host["hz-1"]["billing_mode"] == "spot"
    assert by_host["hz-1"]["site"] == "cn-hangzhou"
    assert by_host["hz-1"]["utilisation_pct"] == ""  # unmeasured, not zero


def test_cost_report_csv_filters_and_errors(viewer_api, fleet):
    response = viewer_api.get("/api/v1/cost-report/", {"format": "csv", "billing_mode": "on_demand"})
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert [row[1] for row in rows[1:]] == ["va-1"]
    bad = viewer_api.get("/api/v1/cost-report/", {"format": "csv", "period_days": "0"})
    assert bad.status_code == 400
    assert bad["Content-Type"].startswith("application/json")
    assert "period_days" in bad.json()["error"]["fields"]


def test_expiring_terms_endpoint(viewer_api):
    today = timezone.localdate()
    plan = ReservedPlanFactory(term_start=today - timedelta(days=300), term_end=today + timedelta(days=12))
    member = NodeFactory(pool=plan.pool, billing_mode="reserved")
    (term,) = viewer_api.get("/api/v1/expiring-reserved-terms/").json()
    assert (term["plan_id"], term["days_left"], term["node_ids"]) == (plan.pk, 12, [member.pk])
    assert viewer_api.get("/api/v1/expiring-reserved-terms/", {"within_days": 7}).json() == []
    assert viewer_api.get("/api/v1/expiring-reserved-terms/", {"within_days": "soon"}).status_code == 400


def test_what_if_endpoint(viewer_api, fleet):
    pool = fleet["pool"]
    PriceListEntryFactory(provider=pool.provider, instance_type="ecs.gn7e", rate=Decimal("30.00"))
    response = viewer_api.get(f"/api/v1/pools/{pool.pk}/what-if/", {"spot_preemption_rate": "0"})
    assert response.status_code == 200, response.content
    body = response.json()
    scenarios = {s["scenario"]: s for s in body["scenarios"]}
    assert scenarios["current"]["total_monthly"] == "18450.00"  # 2 × 9225.00
    # 30.00 × 730 = 21900.00 + 100.00 = 22000.00; × 2 = 44000.00; 25550.00 more than now
    assert scenarios["on_demand"]["total_monthly"] == "44000.00"
    assert scenarios["on_demand"]["difference_vs_current"] == "25550.00"
    assert scenarios["spot"]["preemption_loss_per_node"] == "0.00"
    assert scenarios["reserved"]["available"] is False
    assert viewer_api.get("/api/v1/pools/999999/what-if/").status_code == 404
    bad = viewer_api.get(f"/api/v1/pools/{pool.pk}/what-if/", {"spot_preemption_rate": "-1"})
    assert bad.status_code == 400
    assert "spot_preemption_rate" in bad.json()["error"]["fields"]
    missing = viewer_api.get(f"/api/v1/pools/{pool.pk}/what-if/", {"bare_metal_price": 999999})
    assert "bare_metal_price" in missing.json()["error"]["fields"]
