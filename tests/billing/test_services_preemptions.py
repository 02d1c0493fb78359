"""Preemptions recorded from cloud notices, silent spot nodes and operators."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from fleet.billing.models import PreemptionRecord
from fleet.billing.selectors import preemption_rates, preemption_rates_for_metrics
from fleet.billing.services import (
    preemption_confirm_silent,
    preemption_on_node_silent,
    preemption_record_by_operator,
    preemption_record_from_notice,
)
from fleet.core.models import AuditEntry
from fleet.inventory.models import Node
from fleet.telemetry.models import Event, NodeStatus
from tests.billing.factories import CheckpointPolicyFactory
from tests.factories import NodeFactory, PoolFactory, SiteFactory, UserFactory

pytestmark = pytest.mark.django_db

NOW = timezone.now().replace(microsecond=0)
NOTICE_AT = NOW - timedelta(minutes=10)
DEADLINE = NOTICE_AT + timedelta(seconds=120)


def _rfc3339(value) -> str:
    return value.isoformat().replace("+00:00", "Z")


@pytest.fixture
def spot_node():
    site = SiteFactory(region_code="us-east-1")
    pool = PoolFactory(billing_mode="spot", instance_type="p5.48xlarge", site=site)
    CheckpointPolicyFactory(pool=pool, max_checkpoint_age_s=3600)
    node = NodeFactory(pool=pool, provider=pool.provider, billing_mode="spot", expected_gpu_count=8,
                       instance_type="p5.48xlarge")
    Node.objects.filter(pk=node.pk).update(created_at=NOW - timedelta(days=10))
    return node


def _notice_event(node, *, at=NOTICE_AT, deadline=DEADLINE) -> Event:
    """The event as ingestion stores it: the report's cloud notice goes into detail["notice"]."""
    notice = {"kind": "terminate", "deadline": _rfc3339(deadline), "received_at": _rfc3339(at),
              "source": "aws.spot.instance-action", "detail": {"action": "terminate", "time": _rfc3339(deadline)}}
    return Event.objects.create(node=node, kind="preemption_notice", severity="critical", at=at,
                                message="aws.spot.instance-action: terminate notice", detail={"notice": notice})


def _status(node, *, silent=True, checkpoint_age_s=1740.0, notice=True, **extra) -> NodeStatus:
    last_report = NOTICE_AT + timedelta(seconds=60)
    return NodeStatus.objects.create(
        node=node, received_at=last_report, collected_at=last_report, sequence=42, agent_instance_id="a1",
        silent=silent, silent_since=NOTICE_AT + timedelta(seconds=90) if silent else None,
        checkpoint_age_s=checkpoint_age_s, gpu_count_seen=8, cloud={"provider": "aws", "spot": True},
        notice_kind="terminate" if notice else "", notice_deadline=DEADLINE if notice else None, **extra)


def test_notice_then_silence_records_one_preemption_with_lead_time_and_lost_work(spot_node):
    event = _notice_event(spot_node)
    _status(spot_node)

    records = preemption_on_node_silent(node_ids=[spot_node.pk], now=NOW)

    assert len(records) == 1
    record = records[0]
    assert record.source == "cloud_reclaim"
    assert record.notice_event_id == event.pk
    assert record.notice_kind == "terminate"
    assert record.notice_lead_time_s == 120.0
    assert record.at == DEADLINE
    assert record.confirmed_at == NOW
    # Checkpoint 1740 s old when the last report was collected, 60 s before the deadline: 1800 s at the
    # reclaim. 1800 s × 8 GPUs = 0.5 h × 8 = 4.0000 GPU-hours lost; 1800 ≤ the policy's 3600 → fresh.
    assert record.checkpoint_age_s == 1800.0
    assert record.lost_gpu_hours == Decimal("4.0000")
    assert record.checkpoint_fresh is True
    assert record.checkpoint_max_age_s == 3600
    assert (record.pool_id, record.site_id, record.instance_type) == (
        spot_node.pool_id, spot_node.pool.site_id, "p5.48xlarge")
    spot_node.refresh_from_db()
    assert spot_node.state == "preempted"
    audit = AuditEntry.objects.get(object_type="inventory.node", object_id=str(spot_node.pk), action="action")
    assert (audit.actor_label, audit.before, audit.after) == ("system", {"state": "active"},
                                                              {"state": "preempted"})

    # The silent task runs every cycle: nothing new, nothing duplicated.
    assert preemption_on_node_silent(node_ids=[spot_node.pk], now=NOW + timedelta(seconds=15)) == []
    Node.objects.filter(pk=spot_node.pk).update(state="active")  # even if someone resets the state
    assert preemption_on_node_silent(node_ids=[spot_node.pk], now=NOW + timedelta(seconds=30)) == []
    assert PreemptionRecord.objects.count() == 1

    # The pool's rate reflects it: created 10 days ago → 7 node-days in 7 days, 10 in 30.
    (pool_rate,) = preemption_rates(now=NOW, scope="pool")
    assert pool_rate.key == str(spot_node.pool_id)
    assert (pool_rate.last_7d.preemptions, pool_rate.last_7d.node_days) == (1, Decimal(7))
    assert pool_rate.last_7d.rate_per_node_day == Decimal("0.142857")
    assert pool_rate.last_30d.rate_per_node_day == Decimal("0.100000")
    assert pool_rate.last_30d.lost_gpu_hours == Decimal("4.0000")
    (site_rate,) = preemption_rates(now=NOW, scope="site")
    assert site_rate.last_30d.preemptions == 1
    (type_rate,) = preemption_rates(now=NOW, scope="instance_type")
    assert type_rate.key == "p5.48xlarge"


def test_a_notice_record_is_confirmed_not_duplicated(spot_node):
    event = _notice_event(spot_node)
    _status(spot_node, silent=False, checkpoint_age_s=3000.0)
    pending = preemption_record_from_notice(node=spot_node, notice_event=event)
    assert (pending.source, pending.confirmed_at) == ("agent_notice", None)
    # At the deadline the checkpoint would be 3000 + 60 = 3060 s old: 3060 / 3600 × 8 = 6.8000 GPU-h.
    assert pending.lost_gpu_hours == Decimal("6.8000")
    assert preemption_record_from_notice(node=spot_node, notice_event=event).pk == pending.pk

    # The job checkpointed on the notice; its last report says so. Then the node goes silent.
    NodeStatus.objects.filter(node=spot_node).update(silent=True, silent_since=NOW, checkpoint_age_s=10.0)
    record = preemption_confirm_silent(node=spot_node, now=NOW)

    assert record.pk == pending.pk
    assert record.source == "cloud_reclaim"
    assert record.confirmed_at == NOW
    # 10 + 60 = 70 s × 8 GPUs = 0.1556 GPU-hours
    assert record.lost_gpu_hours == Decimal("0.1556")
    assert PreemptionRecord.objects.count() == 1


def test_notice_only_in_the_latest_status_still_confirms(spot_node):
    _status(spot_node, checkpoint_age_s=None)
    (record,) = preemption_on_node_silent(node_ids=[spot_node.pk], now=NOW)
    assert record.notice_event_id is None
    assert record.notice_lead_time_s is None
    assert record.at == DEADLINE
    assert record.lost_gpu_hours is None and record.checkpoint_fresh is None
    assert preemption_on_node_silent(node_ids=[spot_node.pk], now=NOW) == []


def test_stale_checkpoint_is_not_fresh(spot_node):
    _notice_event(spot_node)
    _status(spot_node, checkpoint_age_s=7140.0)
    (record,) = preemption_on_node_silent(node_ids=[spot_node.pk], now=NOW)
    # 7140 + 60 = 7200 s > 3600 → not fresh; 2 h × 8 GPUs = 16 GPU-hours
    assert record.checkpoint_fresh is False
    assert record.lost_gpu_hours == Decimal("16.0000")


@pytest.mark.parametrize(
    "setup",
    ["on_demand", "not_silent", "no_notice", "old_notice", "retired"],
)
def test_nodes_that_were_not_reclaimed_are_left_alone(spot_node, setup):
    if setup == "on_demand":
        Node.objects.filter(pk=spot_node.pk).update(billing_mode="on_demand")
        _notice_event(spot_node)
        _status(spot_node)
        NodeStatus.objects.filter(node=spot_node).update(cloud={"provider": "aws", "spot": False})
    elif setup == "not_silent":
        _notice_event(spot_node)
        _status(spot_node, silent=False)
    elif setup == "no_notice":
        _status(spot_node, notice=False)
    elif setup == "old_notice":
        _notice_event(spot_node, at=NOTICE_AT - timedelta(hours=3), deadline=NOTICE_AT - timedelta(hours=3))
        _status(spot_node, notice=False)
    else:
        Node.objects.filter(pk=spot_node.pk).update(state="retired")
        _notice_event(spot_node)
        _status(spot_node)
    assert preemption_on_node_silent(node_ids=[spot_node.pk], now=NOW) == []
    assert not PreemptionRecord.objects.exists()


def test_cloud_spot_flag_counts_even_if_inventory_says_on_demand(spot_node):
    Node.objects.filter(pk=spot_node.pk).update(billing_mode="on_demand")
    _notice_event(spot_node)
    _status(spot_node)
    assert len(preemption_on_node_silent(node_ids=[spot_node.pk], now=NOW)) == 1


def test_many_silent_nodes_in_one_call(spot_node, django_assert_max_num_queries):
    nodes = [spot_node] + [NodeFactory(pool=spot_node.pool, provider=spot_node.provider, billing_mode="spot")
                           for _ in range(4)]
    for node in nodes:
        _notice_event(node)
        _status(node)
    # Set-based: a fixed number of queries, plus one audit insert per node moved.
    with django_assert_max_num_queries(12 + len(nodes)):
        records = preemption_on_node_silent(node_ids=[n.pk for n in nodes], now=NOW)
    assert len(records) == 5
    assert set(Node.objects.values_list("state", flat=True)) == {"preempted"}


def test_operator_confirms_a_pending_notice(spot_node):
    operator = UserFactory(username="op", role="operator")
    event = _notice_event(spot_node)
    _status(spot_node, silent=False)
    pending = preemption_record_from_notice(node=spot_node, notice_event=event)
    record = preemption_record_by_operator(node=spot_node, actor=operator, note="console shows reclaimed", now=NOW)
    assert record.pk == pending.pk
    assert (record.source, record.recorded_by, record.at) == ("operator", operator, DEADLINE)
    assert record.notice_lead_time_s == 120.0


def test_metrics_gauges(spot_node):
    _notice_event(spot_node)
    _status(spot_node)
    preemption_on_node_silent(node_ids=[spot_node.pk], now=NOW)
    families = {f.name: f for f in preemption_rates_for_metrics(now=NOW)}
    assert set(families) == {"fleet_preemptions", "fleet_preemption_rate_per_node_day",
                             "fleet_preemption_node_days", "fleet_preemption_lost_gpu_hours"}
    rate = families["fleet_preemption_rate_per_node_day"]
    assert rate.labels == ("scope", "key", "name", "window")
    samples = dict(rate.samples)
    assert samples[("pool", str(spot_node.pool_id), spot_node.pool.name, "30d")] == pytest.approx(0.1)
    assert samples[("instance_type", "p5.48xlarge", "p5.48xlarge", "7d")] == pytest.approx(1 / 7, abs=1e-6)
    counts = dict(families["fleet_preemptions"].samples)
    assert counts[("site", str(spot_node.pool.site_id), spot_node.pool.site.name, "7d")] == 1.0


def test_notice_task_records_from_a_flat_detail(spot_node):
    from fleet.billing.tasks import record_preemption_notice

    event = Event.objects.create(node=spot_node, kind="preemption_notice", at=NOTICE_AT,
                                 detail={"kind": "preempt", "deadline": _rfc3339(NOTICE_AT + timedelta(seconds=30))})
    record_id = record_preemption_notice(event.pk)
    record = PreemptionRecord.objects.get(pk=record_id)
    assert (record.source, record.notice_kind, record.notice_lead_time_s) == ("agent_notice", "preempt", 30.0)
    assert record.lost_gpu_hours is None  # no status yet: the checkpoint age is unknown
    assert record_preemption_notice(event.pk) == record_id
    assert record_preemption_notice(999999) is None


def test_from_notice_refuses_other_events(spot_node):
    xid = Event.objects.create(node=spot_node, kind="xid", code=79, at=NOTICE_AT)
    with pytest.raises(ValueError):
        preemption_record_from_notice(node=spot_node, notice_event=xid)


def test_pruning_the_notice_event_keeps_the_record(spot_node, viewer_api):
    event = _notice_event(spot_node)
    _status(spot_node)
    (record,) = preemption_on_node_silent(node_ids=[spot_node.pk], now=NOW)
    Event.objects.filter(at__lt=NOW).delete()  # as telemetry's retention prune does
    record.refresh_from_db()
    assert record.notice_event_id == event.pk  # a soft link; the notice's facts live on the record
    assert record.notice_lead_time_s == 120.0
    body = viewer_api.get(f"/api/v1/preemptions/{record.pk}/").json()
    assert body["notice_deadline"] is not None
