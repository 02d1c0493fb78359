"""Preemptions in the API: the operator's action, the history and the rates."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from fleet.billing.models import PreemptionRecord
from fleet.core.models import AuditEntry
from fleet.inventory.models import Node
from fleet.telemetry.models import NodeStatus
from tests.billing.factories import CheckpointPolicyFactory, PreemptionRecordFactory
from tests.factories import NodeFactory, PoolFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def node():
    pool = PoolFactory(billing_mode="spot", instance_type="a2-highgpu-8g")
    CheckpointPolicyFactory(pool=pool, max_checkpoint_age_s=1800)
    return NodeFactory(pool=pool, provider=pool.provider, billing_mode="spot", expected_gpu_count=8)


def test_operator_marks_a_node_preempted(operator_api, node):
    at = timezone.now().replace(microsecond=0) - timedelta(minutes=5)
    last_report = at - timedelta(seconds=30)
    NodeStatus.objects.create(node=node, received_at=last_report, collected_at=last_report, sequence=1,
                              agent_instance_id="a", checkpoint_age_s=870.0, gpu_count_seen=8)

    response = operator_api.post(f"/api/v1/nodes/{node.pk}/preempted/", {"at": at.isoformat(), "note": "GCP console"},
                                 format="json")

    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["source"], body["recorded_by"], body["note"]) == ("operator", "operator-user", "GCP console")
    # 870 s at the last report + 30 s until `at` = 900 s = 0.25 h × 8 GPUs = 2 GPU-hours, within 1800 s
    assert body["checkpoint_age_s"] == 900.0
    assert body["lost_gpu_hours"] == "2.0000"
    assert body["checkpoint_fresh"] is True
    assert body["notice_lead_time_s"] is None
    node.refresh_from_db()
    assert node.state == "preempted"
    audit = AuditEntry.objects.get(object_type="inventory.node", object_id=str(node.pk), action="action")
    assert (audit.action, audit.actor_label, audit.after) == ("action", "operator-user", {"state": "preempted"})

    again = operator_api.post(f"/api/v1/nodes/{node.pk}/preempted/", {}, format="json")
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "already_preempted"
    assert PreemptionRecord.objects.count() == 1


def test_viewer_cannot_mark_and_nothing_changes(viewer_api, node):
    response = viewer_api.post(f"/api/v1/nodes/{node.pk}/preempted/", {}, format="json")
    assert response.status_code == 403
    node.refresh_from_db()
    assert node.state == "active"
    assert not PreemptionRecord.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [({"at": "not a time"}, "at"), ({"note": "x" * 201}, "note")],
)
def test_bad_input_is_400_naming_the_field(operator_api, node, body, field):
    response = operator_api.post(f"/api/v1/nodes/{node.pk}/preempted/", body, format="json")
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]
    assert not PreemptionRecord.objects.exists()
    assert Node.objects.get(pk=node.pk).state == "active"


def test_future_time_is_refused(operator_api, node):
    at = (timezone.now() + timedelta(hours=1)).isoformat()
    entries = AuditEntry.objects.count()  # the fixtures' creation
    response = operator_api.post(f"/api/v1/nodes/{node.pk}/preempted/", {"at": at}, format="json")
    assert response.status_code == 400
    assert "at" in response.json()["error"]["fields"]
    assert not PreemptionRecord.objects.exists()
    assert AuditEntry.objects.count() == entries


def test_retired_node_and_unknown_node(operator_api, node):
    Node.objects.filter(pk=node.pk).update(state="retired")
    assert operator_api.post(f"/api/v1/nodes/{node.pk}/preempted/", {}, format="json").status_code == 409
    assert operator_api.post("/api/v1/nodes/999999/preempted/", {}, format="json").status_code == 404


def test_history_filters(viewer_api, node):
    now = timezone.now()
    recent = PreemptionRecordFactory(node=node, pool=node.pool, at=now - timedelta(days=1), checkpoint_fresh=True)
    PreemptionRecordFactory(node=node, pool=node.pool, at=now - timedelta(days=20), checkpoint_fresh=False,
                            source="cloud_reclaim", confirmed_at=now)
    other = NodeFactory(billing_mode="spot")
    PreemptionRecordFactory(node=other, at=now - timedelta(days=2))

    def ids(params):
        response = viewer_api.get("/api/v1/preemptions/", params)
        assert response.status_code == 200, response.content
        return [r["id"] for r in response.json()["results"]]

    assert len(ids({"node": node.pk})) == 2
    assert ids({"node": node.pk, "checkpoint_fresh": "true"}) == [recent.pk]
    assert len(ids({"at_after": (now - timedelta(days=3)).isoformat()})) == 2
    assert len(ids({"source": "cloud_reclaim"})) == 1
    assert len(ids({"confirmed": "true"})) == 1
    assert viewer_api.get("/api/v1/preemptions/", {"source": "rumour"}).status_code == 400
    assert viewer_api.post("/api/v1/preemptions/", {}, format="json").status_code in (403, 405)


def test_rates_endpoint(viewer_api, node):
    now = timezone.now()
    Node.objects.filter(pk=node.pk).update(created_at=now - timedelta(days=40))
    PreemptionRecordFactory(node=node, pool=node.pool, instance_type="a2-highgpu-8g", at=now - timedelta(days=3),
                            lost_gpu_hours=Decimal("1.5"))
    PreemptionRecordFactory(node=node, pool=node.pool, instance_type="a2-highgpu-8g", at=now - timedelta(days=12))

    (row,) = viewer_api.get("/api/v1/preemption-rates/").json()
    assert (row["group_by"], row["key"], row["name"]) == ("pool", str(node.pool_id), node.pool.name)
    assert row["last_7d"]["preemptions"] == 1
    assert row["last_30d"]["preemptions"] == 2
    assert Decimal(row["last_7d"]["node_days"]) == pytest.approx(Decimal(7), abs=Decimal("0.001"))
    assert Decimal(row["last_7d"]["rate_per_node_day"]) == pytest.approx(Decimal(1) / 7, abs=Decimal("0.0001"))
    assert Decimal(row["last_30d"]["rate_per_node_day"]) == pytest.approx(Decimal(2) / 30, abs=Decimal("0.0001"))
    assert row["last_30d"]["lost_gpu_hours"] == "1.5000"

    (by_type,) = viewer_api.get("/api/v1/preemption-rates/", {"group_by": "instance_type"}).json()
    assert by_type["key"] == "a2-highgpu-8g"
    assert viewer_api.get("/api/v1/preemption-rates/", {"billing_mode": "reserved"}).json() == []
    bad = viewer_api.get("/api/v1/preemption-rates/", {"group_by": "planet"})
    assert bad.status_code == 400
    assert "group_by" in bad.json()["error"]["fields"]


def test_daily_rates_per_spot_pool(viewer_api, node):
    """Per pool and UTC day: preemptions, node-hours on spot and the rate per node-day; days without nodes have no
    rate (null), days with nodes and no preemption a rate of 0."""
    from datetime import UTC, datetime

    from fleet.billing.selectors import pool_preemptions_daily

    now = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    Node.objects.filter(pk=node.pk).update(created_at=datetime(2026, 12, 1, 18, 0, tzinfo=UTC))
    # A second spot node of the pool, preempted on Dec 2 at 06:00 (its hours stop there), and one on demand.
    gone = NodeFactory(pool=node.pool, provider=node.pool.provider, billing_mode="spot", state="preempted")
    Node.objects.filter(pk=gone.pk).update(created_at=datetime(2026, 11, 30, 0, 0, tzinfo=UTC),
                                           updated_at=datetime(2026, 12, 2, 6, 0, tzinfo=UTC))
    NodeFactory(pool=node.pool, provider=node.pool.provider, billing_mode="on_demand")
    PreemptionRecordFactory(node=gone, pool=node.pool, at=datetime(2026, 12, 2, 6, 0, tzinfo=UTC))
    PreemptionRecordFactory(node=node, pool=node.pool, at=datetime(2026, 12, 3, 9, 0, tzinfo=UTC))
    PreemptionRecordFactory(node=node, pool=node.pool, at=datetime(2026, 10, 3, 9, 0, tzinfo=UTC))  # outside

    days, (pool,) = pool_preemptions_daily(now=now, days=5)
    assert [d.isoformat() for d in days] == ["2026-11-29", "2026-11-30", "2026-12-01", "2026-12-02", "2026-12-03"]
    assert (pool.pool_id, pool.name) == (node.pool_id, node.pool.name)
    assert pool.preemptions == [0, 0, 0, 1, 1]
    # Nov 30: `gone` all day; Dec 1: `gone` 24 h + `node` from 18:00 (6 h); Dec 2: `gone` until 06:00 + `node`
    # 24 h; Dec 3: `node` until now (12 h).
    assert pool.node_hours == [Decimal("0.00"), Decimal("24.00"), Decimal("30.00"), Decimal("30.00"),
                               Decimal("12.00")]
    assert pool.rate_per_node_day == [None, Decimal("0.000000"), Decimal("0.000000"), Decimal("0.800000"),
                                      Decimal("2.000000")]

    body = viewer_api.get("/api/v1/preemption-rates/daily/", {"days": 7}).json()
    assert len(body["days"]) == 7 and body["days"][-1] == timezone.now().astimezone(UTC).date().isoformat()
    (row,) = body["pools"]
    assert row["pool_id"] == node.pool_id and len(row["preemptions"]) == len(row["node_hours"]) == 7
    assert len(row["rate_per_node_day"]) == 7
    assert viewer_api.get("/api/v1/preemption-rates/daily/").json()["days"].__len__() == 30
    assert "days" in viewer_api.get("/api/v1/preemption-rates/daily/", {"days": 400}).json()["error"]["fields"]
