"""The durable spool: ordering, acknowledgement, bounds, restarts."""

from __future__ import annotations

import json

from fleet_agent.spool import Spool, read_spool_state


def _report(spool: Spool, *, events: int = 0, inventory: str | None = None, padding: int = 0) -> dict:
    sequence = spool.next_sequence()
    report = {
        "sequence": sequence,
        "events": [{"kind": "xid", "n": i} for i in range(events)],
        "inventory": {"hash": inventory} if inventory else None,
        "padding": "x" * padding,
    }
    spool.put(report)
    return report


def test_sequences_and_instance_survive_a_restart(tmp_path):
    spool = Spool(tmp_path / "spool.db")
    instance = spool.instance_id
    for _ in range(3):
        _report(spool)
    spool.close()
    reopened = Spool(tmp_path / "spool.db")
    assert reopened.instance_id == instance
    assert reopened.next_sequence() == 4
    assert [r.sequence for r in reopened.pending()] == [1, 2, 3]


def test_ack_removes_everything_up_to_the_sequence(tmp_path):
    spool = Spool(tmp_path / "spool.db")
    for _ in range(5):
        _report(spool)
    assert spool.ack(3) == 3
    assert [r.sequence for r in spool.pending()] == [4, 5]
    assert spool.last_acked_sequence() == 3
    spool.ack(2)  # a stale ack never moves the mark back
    assert spool.last_acked_sequence() == 3
    assert json.loads(spool.pending()[0].body)["sequence"] == 4


def test_pending_respects_count_and_byte_limits(tmp_path):
    spool = Spool(tmp_path / "spool.db")
    for _ in range(10):
        _report(spool, padding=1000)
    assert len(spool.pending(limit=4)) == 4
    assert len(spool.pending(limit=100, max_bytes=3500)) == 3
    assert len(spool.pending(limit=100, max_bytes=10)) == 1  # never an empty batch while reports wait


def test_full_spool_drops_oldest_metrics_before_any_event_or_inventory(tmp_path):
    spool = Spool(tmp_path / "spool.db", max_bytes=12_000)
    precious = [
        _report(spool, events=1, padding=1000)["sequence"],
        _report(spool, inventory="a" * 64, padding=1000)["sequence"],
    ]
    metrics = [_report(spool, padding=1000)["sequence"] for _ in range(20)]
    kept = [r.sequence for r in spool.pending(limit=1000)]
    assert set(precious) <= set(kept)
    assert metrics[-1] in kept and metrics[0] not in kept
    assert spool.size_bytes() <= 12_000
    assert spool.size_bytes() == sum(len(r.body) for r in spool.pending(limit=1000))


def test_events_go_too_when_nothing_else_is_left(tmp_path):
    spool = Spool(tmp_path / "spool.db", max_bytes=5_000)
    sequences = [_report(spool, events=1, padding=1000)["sequence"] for _ in range(10)]
    kept = [r.sequence for r in spool.pending(limit=1000)]
    assert kept == sequences[-len(kept) :] and sequences[-1] in kept and len(kept) < 10


def test_ack_records_the_acknowledged_inventory_hash(tmp_path):
    spool = Spool(tmp_path / "spool.db")
    _report(spool, inventory="1" * 64)
    _report(spool)
    _report(spool, inventory="2" * 64)
    assert spool.acked_inventory_hash() is None
    spool.ack(2)
    assert spool.acked_inventory_hash() == "1" * 64
    spool.ack(3)
    assert spool.acked_inventory_hash() == "2" * 64


def test_rejected_reports_leave_the_queue_but_are_kept(tmp_path):
    spool = Spool(tmp_path / "spool.db")
    _report(spool)
    _report(spool)
    spool.reject(1, "HTTP 400: bad")
    assert [r.sequence for r in spool.pending()] == [2]
    assert spool.rejected_count() == 1


def test_urgent_flag_and_read_only_state(tmp_path):
    spool = Spool(tmp_path / "spool.db")
    spool.put({"sequence": spool.next_sequence(), "events": [], "inventory": None}, urgent=True)
    assert spool.has_urgent() and spool.pending()[0].urgent
    state = read_spool_state(tmp_path / "spool.db")
    assert state["instance_id"] == spool.instance_id and state["depth"] == 1 and state["last_sequence"] == 1
    assert read_spool_state(tmp_path / "absent.db") is None


def test_rejected_reports_are_bounded_loudly_never_silently(tmp_path, monkeypatch, caplog):
    from fleet_agent import spool as spool_module

    monkeypatch.setattr(spool_module, "MAX_REJECTED_KEPT", 3)
    spool = Spool(tmp_path / "spool.db")
    for _ in range(5):
        spool.reject(_report(spool)["sequence"], "HTTP 400: bad")
    assert [r.sequence for r in spool.rejected_reports()] == [3, 4, 5]
    state = read_spool_state(tmp_path / "spool.db")
    assert (state["rejected"], state["rejected_total"], state["rejected_dropped"]) == (3, 5, 2)
    assert any("dropped the 1 oldest (sequences 1)" in r.getMessage() for r in caplog.records)


def test_rejected_reports_have_a_byte_bound_of_their_own(tmp_path):
    spool = Spool(tmp_path / "spool.db", max_bytes=100_000, max_rejected_bytes=5_000)
    for _ in range(4):
        spool.reject(_report(spool, padding=2000)["sequence"], "HTTP 413")
    assert [r.sequence for r in spool.rejected_reports()] == [3, 4]
    assert read_spool_state(tmp_path / "spool.db")["rejected_dropped"] == 2


def test_requeued_reports_get_new_sequences_and_keep_their_content_but_a_stale_inventory(tmp_path):
    spool = Spool(tmp_path / "spool.db")
    first = _report(spool, events=1, inventory="a" * 64)
    _report(spool)
    spool.reject(1, "HTTP 500")
    spool.reject(2, "HTTP 500")
    _report(spool, inventory="b" * 64)  # 3
    spool.ack(3)
    assert spool.requeue_rejected([1]) == [(1, 4)]
    assert [r.sequence for r in spool.pending()] == [4] and not spool.pending()[0].urgent
    assert json.loads(spool.pending()[0].body) == {**first, "sequence": 4, "inventory": None}
    spool.ack(4)
    assert spool.acked_inventory_hash() == "b" * 64  # the node's inventory is not rolled back
    assert [r.sequence for r in spool.rejected_reports()] == [2]
    assert spool.next_sequence() == 5
    assert spool.drop_rejected() == [2] and spool.rejected_count() == 0


def test_a_sequence_handed_out_holds_back_later_ones_until_it_is_spooled(tmp_path):
    """Another process (``fleet-agent spool retry-rejected``) queues a report while the daemon builds one."""
    clock = [0.0]
    daemon = Spool(tmp_path / "spool.db", clock=lambda: clock[0])
    _report(daemon)  # 1
    daemon.reject(1, "HTTP 500")
    building = daemon.next_sequence()  # 2: the daemon is between numbering and spooling a report
    operator = Spool(tmp_path / "spool.db")
    assert operator.requeue_rejected() == [(1, 3)]
    assert daemon.pending() == []  # 3 must not reach the server (and be acknowledged) before 2
    daemon.put({"sequence": building, "events": [], "inventory": None})
    assert [r.sequence for r in daemon.pending()] == [2, 3]
    daemon.next_sequence()  # 4, whose build then fails: it holds nothing back for long
    clock[0] += 61
    assert [r.sequence for r in daemon.pending()] == [2, 3]


def test_size_counts_what_another_process_queued(tmp_path):
    daemon = Spool(tmp_path / "spool.db")
    _report(daemon, padding=1000)
    daemon.reject(1, "HTTP 500")
    assert daemon.size_bytes() == 0
    Spool(tmp_path / "spool.db").requeue_rejected()
    assert daemon.size_bytes() == sum(len(r.body) for r in daemon.pending())
    daemon.ack(2)
    assert daemon.size_bytes() == 0
