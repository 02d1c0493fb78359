"""Silence the server caused is not the nodes' fault: a fleet that goes quiet because the control plane stopped
receiving raises no silent flags, "likely preempted" findings or preemption records; one node going quiet while
the others report still does.

The fleet is simulated on a clock: each node reports every 15 s at its own phase (its status row is what ingest
would write), the silence sweep runs every 15 s and the health evaluation after it, as beat schedules them.
"""

from datetime import timedelta

import pytest

from fleet.billing.models import PreemptionRecord
from fleet.health.models import Finding
from fleet.health.services.evaluation import evaluate
from fleet.telemetry.models import Event, NodeStatus, ReceivingState
from fleet.telemetry.services.silence import mark_silent_nodes
from tests.health.factories import T0, healthy_node

pytestmark = pytest.mark.django_db
INTERVAL = 15


class Fleet:
    def __init__(self, count: int, *, billing_mode: str = "spot"):
        self.nodes = [healthy_node(billing_mode=billing_mode, gpus=1, at=T0) for _ in range(count)]
        # Phases spread over one interval, as agents started at different times are.
        self.phase = {node.pk: timedelta(seconds=(INTERVAL * i) / count) for i, node in enumerate(self.nodes)}
        self.marked: list[int] = []

    def run(self, start, end, *, reports=lambda node, at: True, sweeps=lambda at: True):
        """Play [start, end): every node's reports that `reports` lets through, a sweep and an evaluation every
        15 s that `sweeps` lets run."""
        events = []
        for node in self.nodes:
            at = start + self.phase[node.pk]
            while at < end:
                events.append((at, 0, node))
                at += timedelta(seconds=INTERVAL)
        at = start + timedelta(seconds=7)
        while at < end:
            events.append((at, 1, None))
            at += timedelta(seconds=INTERVAL)
        for at, kind, node in sorted(events, key=lambda e: (e[0], e[1])):
            if kind == 0 and reports(node, at):
                NodeStatus.objects.filter(node=node).update(received_at=at, collected_at=at, silent=False,
                                                            silent_since=None)
            elif kind == 1 and sweeps(at):
                self.marked += mark_silent_nodes(now=at)["node_ids"]
                evaluate(now=at)


def _likely_preempted():
    return Finding.objects.filter(rule__slug="silent_spot_node")


@pytest.mark.parametrize("offset_s", [0, 5, 11], ids=lambda s: f"gap-starts-{s}s-into-a-sweep-period")
def test_fleet_silent_during_a_control_plane_gap_raises_no_silence_findings_or_records(offset_s):
    fleet = Fleet(6)
    gap_start = T0 + timedelta(minutes=2, seconds=offset_s)
    gap_end = gap_start + timedelta(seconds=30)
    back = {node.pk: gap_end + timedelta(seconds=4 * i) for i, node in enumerate(fleet.nodes)}  # agents' back-off

    fleet.run(T0, T0 + timedelta(minutes=5), reports=lambda node, at: not gap_start <= at < back[node.pk])

    assert fleet.marked == []
    assert not NodeStatus.objects.filter(silent=True).exists()
    assert not _likely_preempted().exists()
    assert not Finding.objects.filter(rule__slug="node_silent").exists()
    assert not PreemptionRecord.objects.exists()
    state = ReceivingState.objects.get()
    assert gap_start - timedelta(seconds=INTERVAL) < state.gap_started_at <= gap_start
    assert gap_end <= state.gap_ended_at < gap_end + timedelta(seconds=INTERVAL)


def test_metrics_show_the_gap_while_it_lasts():
    from fleet.telemetry.metrics import render

    fleet = Fleet(4)
    stop = T0 + timedelta(minutes=1)
    fleet.run(T0, stop + timedelta(seconds=40), reports=lambda node, at: at < stop)
    assert fleet.marked == []
    assert b"fleet_ingest_receiving 0.0" in render()
    fleet.run(stop + timedelta(seconds=40), stop + timedelta(seconds=70))
    assert b"fleet_ingest_receiving 1.0" in render()
    assert b"fleet_ingest_newest_report_age_seconds" in render()


def test_one_node_silent_while_the_others_report_is_still_flagged_and_its_preemption_recorded():
    fleet = Fleet(6)
    quiet, reclaimed = fleet.nodes[2], fleet.nodes[4]
    stop = T0 + timedelta(minutes=2)
    # The cloud announced the reclaim of one of them in its last report.
    NodeStatus.objects.filter(node=reclaimed).update(notice_kind="terminate", cloud={"provider": "aws", "spot": True},
                                                     notice_deadline=stop)
    Event.objects.create(node=reclaimed, kind="preemption_notice", severity="critical", at=stop - timedelta(minutes=1),
                         message="terminate notice", detail={"notice": {"kind": "terminate",
                                                                        "deadline": stop.isoformat()}})

    fleet.run(T0, T0 + timedelta(minutes=3), reports=lambda node, at: node not in (quiet, reclaimed) or at < stop)

    assert sorted(fleet.marked) == sorted([quiet.pk, reclaimed.pk])
    status = NodeStatus.objects.get(node=quiet)
    # Flagged at the first sweep more than 2 intervals after its last report: no later than one sweep after.
    assert status.silent_since - status.received_at <= timedelta(seconds=2 * INTERVAL + INTERVAL)
    assert set(_likely_preempted().filter(state="open").values_list("node_id", flat=True)) == {quiet.pk,
                                                                                             reclaimed.pk}
    assert PreemptionRecord.objects.get().node_id == reclaimed.pk
    assert ReceivingState.objects.get().gap_started_at is None


def test_gap_found_after_the_fact_when_the_sweep_was_down_too():
    """The whole control plane was down for 2 minutes (no reports, no sweeps). Agents come back within their
    back-off; one never does and is flagged once the grace after the outage has passed."""
    fleet = Fleet(6, billing_mode="on_demand")
    down, up = T0 + timedelta(minutes=2), T0 + timedelta(minutes=4)
    gone = fleet.nodes[0]
    back = {node.pk: up + timedelta(seconds=20 * i) for i, node in enumerate(fleet.nodes)}

    fleet.run(T0, T0 + timedelta(minutes=10),
              reports=lambda node, at: node != gone or at < down if not down <= at < back[node.pk] else False,
              sweeps=lambda at: not down <= at < up + timedelta(seconds=10))

    assert fleet.marked == [gone.pk]
    silent_since = NodeStatus.objects.get(node=gone).silent_since
    # Grace: the outage's length (the agents' back-off) and two intervals after the first report came back.
    assert silent_since > up + timedelta(minutes=2, seconds=2 * INTERVAL)
    assert set(Finding.objects.filter(rule__slug="node_silent").values_list("node_id", flat=True)) == {gone.pk}


def test_a_whole_spot_pool_reclaimed_with_notices_is_still_flagged():
    fleet = Fleet(4)
    stop = T0 + timedelta(minutes=1)
    NodeStatus.objects.update(notice_kind="terminate", notice_deadline=stop)

    fleet.run(T0, T0 + timedelta(minutes=2), reports=lambda node, at: at < stop)

    assert sorted(fleet.marked) == sorted(node.pk for node in fleet.nodes)


def test_small_fleet_is_judged_node_by_node():
    """With fewer than three reporting nodes the server's silence cannot be told from the nodes'."""
    fleet = Fleet(2, billing_mode="on_demand")
    stop = T0 + timedelta(minutes=1)
    fleet.run(T0, T0 + timedelta(minutes=2), reports=lambda node, at: at < stop)
    assert sorted(fleet.marked) == sorted(node.pk for node in fleet.nodes)
