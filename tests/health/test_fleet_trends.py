"""The fleet-wide chart endpoints: utilisation, findings by step and healthy-GPU share, Xid per day, cost per
month, and the provider scorecard — each from what the real engine and the inventory recorded."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from fleet.core.timeranges import time_range
from fleet.health.models import Finding
from fleet.inventory.models import GPU
from fleet.remediation.models import Incident
from fleet.telemetry.models import GPUSample, GPUSampleRollup
from fleet.telemetry.services.history import history_bucket
from tests.billing.factories import BillingPlanFactory
from tests.factories import ProviderFactory
from tests.health.factories import T0
from tests.remediation.helpers import fault_and_intake, node_in, pool_for

# The charts measure their windows back from "now": a day after the fixtures' T0, whatever the real date.
pytestmark = [pytest.mark.django_db, pytest.mark.now(T0 + timedelta(days=1), tick=True)]


def _series(body: dict) -> dict[str, list]:
    return {entry["key"]: entry["points"] for entry in body["series"]}


def _value_at(points: list, at: datetime):
    """The value of the bucket `at` falls in."""
    for (start, value), nxt in zip(points, [*points[1:], None], strict=True):
        begins = datetime.fromisoformat(start)
        ends = datetime.fromisoformat(nxt[0]) if nxt else begins + timedelta(days=1)
        if begins <= at < ends:
            return value
    raise AssertionError(f"{at} is outside the series")


def test_time_range_buckets_are_aligned_and_cover_now():
    now = datetime(2026, 12, 3, 10, 7, 31, tzinfo=UTC)
    rng = time_range("24h", now=now)
    assert rng.end == datetime(2026, 12, 3, 10, 15, tzinfo=UTC)
    assert rng.start == rng.end - timedelta(hours=24)
    assert len(rng.buckets()) == 96 and rng.slot(now) == datetime(2026, 12, 3, 10, 0, tzinfo=UTC)
    assert len(time_range("30d", now=now).buckets()) == 120


@pytest.fixture
def faulty_cloud_node():
    """A cloud node with 8 GPUs seen a day before T0 whose GPU 3 logged an Xid 79 at T0 (the engine opened the
    finding and remediation its incident)."""
    pool = pool_for("cloud_dedicated")
    node = node_in(pool)
    GPU.objects.filter(node=node).update(first_seen=T0 - timedelta(days=1))
    fault_and_intake([node])
    return node


def test_findings_trend_counts_open_findings_by_step_and_the_healthy_gpu_share(viewer_api, faulty_cloud_node):
    finding = Finding.objects.get(node=faulty_cloud_node, state="open")
    assert finding.gpu is not None and finding.step == "platform_hardware"
    response = viewer_api.get("/api/v1/fleet/findings-trend/", {"range": "7d"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["range"] == "7d" and body["step"] == 3600 and len(body["series"][0]["points"]) == 168
    series = _series(body)
    before, after = T0 - timedelta(hours=2), finding.opened_at + timedelta(hours=2)
    assert _value_at(series["open.platform_hardware"], before) == 0
    assert _value_at(series["open.platform_hardware"], after) == 1
    assert _value_at(series["open.visibility"], after) == 0
    # 8 GPUs, one of them faulty: 7/8 healthy; none seen two days before T0: no share at all.
    assert _value_at(series["healthy_gpu_share"], before) == 1.0
    assert _value_at(series["healthy_gpu_share"], after) == 0.875
    assert _value_at(series["healthy_gpu_share"], T0 - timedelta(days=2)) is None

    # Resolved 90 minutes after it opened: open at the end of its first hour's bucket only (each bucket is
    # sampled at its end).
    Finding.objects.filter(pk=finding.pk).update(state="resolved",
                                                 resolved_at=finding.opened_at + timedelta(minutes=90))
    series = _series(viewer_api.get("/api/v1/fleet/findings-trend/", {"range": "7d"}).json())
    assert _value_at(series["open.platform_hardware"], finding.opened_at + timedelta(minutes=30)) == 1
    assert _value_at(series["open.platform_hardware"], after) == 0
    assert _value_at(series["healthy_gpu_share"], after) == 1.0


def test_node_wide_findings_take_every_gpu_of_the_node(viewer_api, faulty_cloud_node):
    finding = Finding.objects.get(node=faulty_cloud_node, state="open")
    Finding.objects.filter(pk=finding.pk).update(gpu=None)
    series = _series(viewer_api.get("/api/v1/fleet/findings-trend/", {"range": "7d"}).json())
    assert _value_at(series["healthy_gpu_share"], finding.opened_at + timedelta(hours=2)) == 0.0


@pytest.mark.parametrize(("query", "field"), [({"range": "2h"}, "range"), ({"range": "24h", "window": "1"}, "window")])
def test_a_bad_or_unknown_parameter_is_a_400_naming_it(viewer_api, query, field):
    for url in ("/api/v1/fleet/findings-trend/", "/api/v1/fleet/utilisation/"):
        response = viewer_api.get(url, query)
        assert response.status_code == 400
        assert field in response.json()["error"]["fields"]


def test_xid_daily_counts_per_code_and_day(viewer_api, faulty_cloud_node):
    response = viewer_api.get("/api/v1/fleet/xid-daily/", {"days": 7})
    assert response.status_code == 200, response.content
    body = response.json()
    assert len(body["days"]) == 7 and body["days"][-1] == timezone.now().astimezone(UTC).date().isoformat()
    by_code = {row["code"]: row["counts"] for row in body["series"]}
    assert list(by_code) == [79]
    assert by_code[79][body["days"].index(T0.date().isoformat())] == 1
    assert sum(by_code[79]) == 1
    assert viewer_api.get("/api/v1/fleet/xid-daily/", {"days": 5}).status_code == 400


def test_fleet_utilisation_weights_rollups_by_samples_and_leaves_gaps_empty(viewer_api, faulty_cloud_node,
                                                                          history_days):
    gpu0, gpu1 = GPU.objects.filter(node=faulty_cloud_node).order_by("index")[:2]
    now = timezone.now()
    rng = time_range("24h", now=now)
    bucket = rng.slot(now - timedelta(hours=3))
    # Two GPUs in one 15-minute chart bucket: 90 % over 10 samples and 30 % over 5 → (900 + 150) / 15 = 70 %.
    GPUSampleRollup.objects.create(gpu=gpu0, bucket=bucket, samples=10, utilization_gpu_pct=90)
    GPUSampleRollup.objects.create(gpu=gpu1, bucket=bucket + timedelta(minutes=5), samples=5, utilization_gpu_pct=30)
    points = _series(viewer_api.get("/api/v1/fleet/utilisation/", {"range": "24h"}).json())["utilisation_pct"]
    assert len(points) == 96
    assert _value_at(points, bucket + timedelta(minutes=1)) == 70.0
    assert _value_at(points, bucket - timedelta(hours=1)) is None
    # The last hour reads the raw history (one row per GPU per minute bucket, weighted by its reports).
    at = history_bucket(now - timedelta(minutes=2))
    history_days(at)
    GPUSample.objects.create(gpu=gpu0, at=at, samples=3, utilization_gpu_pct=40)
    GPUSample.objects.create(gpu=gpu1, at=at, samples=1, utilization_gpu_pct=80)
    points = _series(viewer_api.get("/api/v1/fleet/utilisation/", {"range": "1h"}).json())["utilisation_pct"]
    assert len(points) == 60 and _value_at(points, at) == 50.0  # (3 × 40 + 80) / 4


def test_cost_history_per_month_and_per_utilised_gpu_hour(viewer_api, history_days):
    from fleet.inventory.models import Node

    pool = pool_for("cloud_dedicated")
    node = node_in(pool, billing_mode="on_demand", expected_gpu_count=8)
    BillingPlanFactory(pool=None, node=node, billing_mode="on_demand", rate=Decimal("10"), currency="USD")
    midnight = timezone.now().astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    Node.objects.filter(pk=node.pk).update(created_at=midnight)
    response = viewer_api.get("/api/v1/cost-history/", {"months": 3})
    assert response.status_code == 200, response.content
    rows = response.json()
    this_month = timezone.now().astimezone(UTC).strftime("%Y-%m")
    # The node came up at midnight: only the current month has it, costing 10 an hour so far today (today is at
    # today's prices, its own: not an estimate).
    assert [(r["month"], r["currency"], r["estimated"]) for r in rows] == [(this_month, "USD", False)]
    hours = Decimal(str((timezone.now() - midnight).total_seconds() / 3600))
    assert Decimal(rows[0]["total"]) == pytest.approx(10 * hours, abs=Decimal("0.05"))
    assert rows[0]["per_utilised_gpu_hour"] is None  # no utilisation measured
    gpu = GPU.objects.filter(node=node).first()
    at = history_bucket(timezone.now() - timedelta(minutes=1))
    history_days(at)
    GPUSample.objects.create(gpu=gpu, at=at, samples=1, utilization_gpu_pct=50)
    row = viewer_api.get("/api/v1/cost-history/", {"months": 3}).json()[0]
    # 50 % of the GPU-hours utilised: 10 an hour / (8 GPUs × 50 %) = 2.5 per utilised GPU-hour
    assert (row["utilisation_pct"], row["per_utilised_gpu_hour"]) == ("50.00", "2.5000")
    assert viewer_api.get("/api/v1/cost-history/", {"months": 0}).status_code == 400


def test_provider_scorecard_per_thousand_gpu_days(viewer_api, faulty_cloud_node):
    ProviderFactory(name="Idle provider")  # no GPUs, no findings: left out
    now = timezone.now()
    response = viewer_api.get("/api/v1/provider-scorecard/", {"days": 30})
    assert response.status_code == 200, response.content
    rows = {row["provider"]: row for row in response.json()}
    row = rows[faulty_cloud_node.provider.name]
    assert "Idle provider" not in rows
    gpu_days = 8 * (now - (T0 - timedelta(days=1))).total_seconds() / 86400
    assert abs(float(row["gpu_days"]) - gpu_days) < 0.05
    assert (row["findings"], row["provider_findings"]) == (1, 1)
    assert row["incidents"] == Incident.objects.filter(node=faulty_cloud_node).count() >= 1
    assert abs(float(row["findings_per_1k_gpu_days"]) - 1000 / gpu_days) < 0.1
    assert viewer_api.get("/api/v1/provider-scorecard/", {"days": 31}).status_code == 400


def test_provider_scorecard_gives_no_rate_below_one_gpu_day(viewer_api):
    """A fleet enrolled an hour ago: its one finding is counted, but no rate is made of an hour's exposure."""
    pool = pool_for("cloud_dedicated")
    node = node_in(pool, at=timezone.now())
    GPU.objects.filter(node=node).update(first_seen=timezone.now() - timedelta(hours=1))
    fault_and_intake([node], at=timezone.now())
    row = {r["provider"]: r for r in viewer_api.get("/api/v1/provider-scorecard/").json()}[node.provider.name]
    assert row["findings"] == 1 and float(row["gpu_days"]) < 1
    assert row["findings_per_1k_gpu_days"] is None and row["incidents_per_1k_gpu_days"] is None
