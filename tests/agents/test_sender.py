"""Enrolment and delivery against a fake control plane on 127.0.0.1."""

from __future__ import annotations

import json
import random
import socket
import stat
import time
from email.utils import formatdate

import pytest

from fleet_agent.client import ControlPlaneClient, DeliveryError, parse_retry_after
from fleet_agent.credentials import credential_path, load_enrollment
from fleet_agent.enroll import EnrollmentError, enroll
from fleet_agent.report import NodeIdentity
from fleet_agent.sender import INVALID, SERVER_ERROR, TRANSIENT, Delivery, SenderThread, classify
from fleet_agent.spool import Spool
from tests.agents.conftest import build_core

FACTS = {
    "machine_id": "machine-1",
    "hostname": "gpu-01",
    "agent_version": "0.1.0",
    "agent_instance_id": "0b7cd3a2-4bd6-4a57-9f07-5f4b50b2d4c2",
    "gpu_count": 2,
    "gpu_model": "NVIDIA H100 80GB HBM3",
    "cloud": None,
}


@pytest.fixture
def enrolled(control_plane, tmp_path):
    enrollment = enroll(
        ControlPlaneClient(control_plane.url), "fe_test", FACTS, credential_file=credential_path(tmp_path)
    )
    client = ControlPlaneClient(control_plane.url, credential=enrollment.credential)
    return enrollment, client


def _delivery(spool, client, **kwargs):
    kwargs.setdefault("rng", random.Random(1))
    return Delivery(spool, lambda: (client, "/api/v1/agent/reports"), **kwargs)


def test_enroll_writes_a_private_credential_file(control_plane, tmp_path):
    path = credential_path(tmp_path)
    enrollment = enroll(ControlPlaneClient(control_plane.url), "fe_test", FACTS, credential_file=path)
    assert enrollment.node_id == 1 and enrollment.credential.startswith("fn_")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_enrollment(path) == enrollment
    assert control_plane.enrollments[0]["facts"]["machine_id"] == "machine-1"
    again = enroll(control_plane.url, "fe_test", FACTS, credential_file=path)  # a URL works as well
    assert again.node_id == 1 and again.credential != enrollment.credential  # same node, fresh credential


def test_enroll_with_a_bad_token_fails_clearly(control_plane, tmp_path):
    with pytest.raises(EnrollmentError, match="403"):
        enroll(
            ControlPlaneClient(control_plane.url),
            "fe_wrong",
            FACTS,
            credential_file=credential_path(tmp_path),
        )
    assert not credential_path(tmp_path).exists()


def test_reports_are_batched_gzipped_and_acknowledged(control_plane, enrolled, tmp_path):
    _, client = enrolled
    spool = Spool(tmp_path / "spool.db")
    core = build_core(spool, node_id=1)
    for _ in range(250):
        core.collect()
    delivery = _delivery(spool, client)
    assert delivery.deliver_pending() is True
    assert [len(p) for p in control_plane.posts] == [100, 100, 50]
    assert control_plane.gzip_posts == 3
    assert control_plane.sequences(spool.instance_id) == list(range(1, 251))
    assert spool.depth() == 0 and spool.last_acked_sequence() == 250
    assert delivery.stats.reports_acked == 250


def test_revoked_credential_keeps_reports_and_backs_off(control_plane, tmp_path, caplog):
    spool = Spool(tmp_path / "spool.db")
    build_core(spool).collect()
    delivery = _delivery(spool, ControlPlaneClient(control_plane.url, credential="fn_revoked"))
    assert delivery.deliver_pending() is False
    assert spool.depth() == 1 and delivery.backing_off()
    assert any("re-enrol" in r.getMessage() for r in caplog.records)
    assert delivery.deliver_pending() is False and control_plane.posts == []  # waits out the backoff


def test_backoff_grows_exponentially_with_jitter_and_a_cap(control_plane, enrolled, tmp_path):
    _, client = enrolled
    spool = Spool(tmp_path / "spool.db")
    build_core(spool).collect()
    clock = [1000.0]
    delivery = _delivery(spool, client, backoff_base_s=1.0, backoff_cap_s=8.0, clock=lambda: clock[0])
    waits = []
    for _ in range(6):
        control_plane.fail_next("503")
        assert delivery.deliver_pending(force=True) is False
        waits.append(delivery.seconds_until_retry())
    assert all(0.5 <= w <= 1.0 for w in waits)  # out-of-turn (forced) attempts do not lengthen the backoff
    for expected_max in (1, 2, 4, 8, 8, 8):
        control_plane.fail_next("503")
        clock[0] += 1000
        assert delivery.deliver_pending() is False
        assert expected_max / 2 <= delivery.seconds_until_retry() <= expected_max
    clock[0] += 1000
    assert delivery.deliver_pending() is True and spool.depth() == 0
    assert delivery.seconds_until_retry() == 0


def _spooled(tmp_path, reports: int):
    """A spool holding ``reports`` real reports (sequences 1..reports), and the engine that made them."""
    spool = Spool(tmp_path / "spool.db")
    core = build_core(spool)
    for _ in range(reports):
        core.collect()
    return spool, core


def _spool_with_invalid_report(tmp_path, *, reports: int, invalid_at: int):
    """``reports`` reports, the one with sequence ``invalid_at`` out of the schema (the server answers 400)."""
    spool, core = _spooled(tmp_path, reports)
    bad = json.loads(spool.pending(limit=reports)[invalid_at - 1].body)
    bad["system"]["cpu_busy_pct"] = 150.0  # what a buggy collector might send: the schema says ≤ 100
    spool.put(bad)
    return spool, core


def test_invalid_report_is_isolated_and_set_aside(control_plane, enrolled, tmp_path):
    _, client = enrolled
    spool, _ = _spool_with_invalid_report(tmp_path, reports=3, invalid_at=2)
    delivery = _delivery(spool, client)
    assert delivery.deliver_pending() is True
    assert control_plane.sequences(spool.instance_id) == [1, 3]
    assert spool.depth() == 0 and spool.rejected_count() == 1 and delivery.stats.rejected == 1


class StubClient:
    def __init__(self, answer):
        self.answer = answer
        self.bodies = []

    def post_reports(self, body, reports_url):
        self.bodies.append(json.loads(body))
        return self.answer(self.bodies[-1])


def test_partial_ack_keeps_the_rest_and_backs_off(tmp_path):
    spool = Spool(tmp_path / "spool.db")
    core = build_core(spool)
    for _ in range(5):
        core.collect()
    client = StubClient(lambda body: {"acked_sequence": 3, "agent_instance_id": spool.instance_id})
    delivery = Delivery(spool, lambda: (client, "/r"), rng=random.Random(1))
    assert delivery.deliver_pending() is False
    assert [r.sequence for r in spool.pending()] == [4, 5] and delivery.backing_off()


@pytest.mark.parametrize(
    "answer", [{"acked_sequence": "5"}, {"acked_sequence": 5, "agent_instance_id": "other"}, {}]
)
def test_malformed_or_foreign_acks_remove_nothing(tmp_path, answer):
    spool = Spool(tmp_path / "spool.db")
    build_core(spool).collect()
    delivery = Delivery(spool, lambda: (StubClient(lambda body: answer), "/r"), rng=random.Random(1))
    assert delivery.deliver_pending() is False and spool.depth() == 1


def test_not_enrolled_keeps_everything(tmp_path):
    spool = Spool(tmp_path / "spool.db")
    build_core(spool).collect()
    delivery = Delivery(spool, lambda: None)
    assert delivery.deliver_pending() is False and spool.depth() == 1
    assert "not enrolled" in delivery.stats.last_error


def test_sender_thread_delivers_on_wake_and_flushes_on_stop(control_plane, enrolled, tmp_path):
    _, client = enrolled
    spool = Spool(tmp_path / "spool.db")
    core = build_core(spool)
    sender = SenderThread(_delivery(spool, client), poll_s=60)
    sender.start()
    core.collect()
    sender.wake()
    deadline = time.monotonic() + 5
    while spool.depth() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert control_plane.sequences(spool.instance_id) == [1]
    core.collect()
    core.collect()  # not woken: the stop-time flush must send these
    assert sender.stop(flush_timeout_s=5) is True
    assert not sender.is_alive()
    assert control_plane.sequences(spool.instance_id) == [1, 2, 3] and spool.depth() == 0


def test_urgent_wake_cuts_through_the_backoff(control_plane, enrolled, tmp_path):
    _, client = enrolled
    spool = Spool(tmp_path / "spool.db")
    core = build_core(spool)
    delivery = _delivery(spool, client, backoff_base_s=120)
    core.collect()
    control_plane.fail_next("503")
    delivery.deliver_pending()
    assert delivery.seconds_until_retry() > 50
    sender = SenderThread(delivery, poll_s=60)
    sender.start()
    try:
        core.collect()
        sender.wake(urgent=True)
        deadline = time.monotonic() + 5
        while spool.depth() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert spool.depth() == 0 and control_plane.sequences(spool.instance_id) == [1, 2]
    finally:
        sender.stop(flush_timeout_s=1)


def test_identity_gets_node_id_from_enrolment(control_plane, tmp_path):
    from fleet_agent.assembly import delivery_target
    from fleet_agent.config import load_config

    config = load_config(config_file=None, environ={}, flags={"state_dir": str(tmp_path)})
    identity = NodeIdentity("machine-1", "gpu-01")
    target = delivery_target(config, identity)
    assert target() is None
    enroll(ControlPlaneClient(control_plane.url), "fe_test", FACTS, credential_file=credential_path(tmp_path))
    client, url = target()
    assert identity.node_id == 1 and url == "/api/v1/agent/reports" and client.server == control_plane.url


# --- reports the server refuses --------------------------------------------------------------------

XID_79 = {
    "kind": "xid", "at": "2026-12-02T18:45:00Z", "gpu_uuid": None, "pci_bus_id": "00000000:01:00.0", "code": 79,
    "severity": "critical", "message": "GPU has fallen off the bus", "raw": "NVRM: Xid (PCI:0000:01:00): 79",
}


def _poison(report: dict) -> bool:
    """A NUL in an event message: what made the real server answer 500 (PostgreSQL refuses it in JSON)."""
    return any("\x00" in event["message"] for event in report["events"])


def _spool_with_poison(tmp_path, *, reports: int, poison_at: int) -> tuple[Spool, object]:
    spool, core = _spooled(tmp_path, reports)
    bad = json.loads(spool.pending(limit=reports)[poison_at - 1].body)
    bad["events"] = [{**XID_79, "kind": "agent_error", "code": None, "message": "bad\x00byte"}]
    spool.put(bad)
    return spool, core


def _settle(delivery, clock, rounds=40):
    """Deliver, then let the backoff run out (on the injected clock), until the spool is empty."""
    for _ in range(rounds):
        if delivery.deliver_pending():
            return True
        clock[0] += 1000
    return False


@pytest.mark.parametrize(
    ("status", "code", "kind"),
    [(400, "invalid", INVALID), (413, "too_large", INVALID), (422, None, INVALID), (500, None, SERVER_ERROR),
     (501, None, SERVER_ERROR), (400, "unsupported_version", TRANSIENT), (502, None, TRANSIENT),
     (503, None, TRANSIENT), (504, None, TRANSIENT), (429, None, TRANSIENT), (401, None, TRANSIENT),
     (403, None, TRANSIENT), (404, None, TRANSIENT), (None, None, TRANSIENT)],
)
def test_what_an_error_answer_says_about_the_data(status, code, kind):
    assert classify(DeliveryError("x", status=status, code=code)) == kind


def test_poison_report_in_the_middle_is_set_aside_and_the_rest_including_urgent_flows(
    control_plane, enrolled, tmp_path
):
    _, client = enrolled
    spool, core = _spool_with_poison(tmp_path, reports=40, poison_at=17)
    core.add_events([XID_79])
    assert core.collect()["sequence"] == 41 and spool.has_urgent()  # an urgent report queued behind it
    control_plane.refuse(_poison, 500)
    clock = [1000.0]
    delivery = _delivery(spool, client, max_server_errors=3, clock=lambda: clock[0])

    assert _settle(delivery, clock) is True
    assert control_plane.sequences(spool.instance_id) == [s for s in range(1, 42) if s != 17]
    assert spool.depth() == 0 and delivery.stats.rejected == 1
    (rejected,) = spool.rejected_reports()
    assert rejected.sequence == 17 and json.loads(rejected.body)["events"][0]["message"] == "bad\x00byte"
    assert "3 server errors, the last: HTTP 500" in rejected.reason and "HTTP 500" in rejected.reason
    # Found by halving, not one by one: 41 → 21 → 11 ✓ → 10 → 5 ✓ → 5 → 3 → 2 → 1 (×3) → the rest.
    assert control_plane.report_requests <= 16


def test_invalid_report_in_a_full_batch_is_found_by_halving_and_set_aside_at_once(
    control_plane, enrolled, tmp_path
):
    _, client = enrolled
    spool, core = _spool_with_invalid_report(tmp_path, reports=100, invalid_at=64)
    delivery = _delivery(spool, client)
    assert delivery.deliver_pending() is True  # one pass: no backoff for a report that is simply bad
    assert control_plane.sequences(spool.instance_id) == [s for s in range(1, 101) if s != 64]
    assert [r.sequence for r in spool.rejected_reports()] == [64]
    assert "refused as invalid" in spool.rejected_reports()[0].reason
    assert control_plane.report_requests <= 2 * 7 + 2
    core.collect()
    assert delivery.deliver_pending() is True and control_plane.posts[-1] == [101]  # full batches again


def test_422_sets_a_report_aside_like_a_400(control_plane, enrolled, tmp_path):
    _, client = enrolled
    spool, _ = _spool_with_poison(tmp_path, reports=5, poison_at=1)
    control_plane.refuse(_poison, 422)
    assert _delivery(spool, client).deliver_pending() is True
    assert control_plane.sequences(spool.instance_id) == [2, 3, 4, 5] and spool.rejected_count() == 1


def _closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize("failure", ["503", "502", "504", "429", "400:unsupported_version", "abort_before_store",
                                     "refused"])
def test_a_server_that_is_down_or_shedding_load_never_gets_reports_set_aside(
    failure, control_plane, enrolled, tmp_path
):
    _, client = enrolled
    if failure == "refused":
        client = ControlPlaneClient(_closed_port(), credential=client.credential)
    spool, _ = _spooled(tmp_path, 3)
    clock = [1000.0]
    delivery = _delivery(spool, client, max_server_errors=2, clock=lambda: clock[0])
    for _ in range(10):
        control_plane.fail_next(failure)
        assert delivery.deliver_pending(force=True) is False
        clock[0] += 1000
    assert spool.depth() == 3 and spool.rejected_count() == 0 and spool.server_errors(1) == 0
    assert delivery.stats.rejected == 0 and delivery.stats.splits == 0


def test_server_errors_and_set_aside_reports_survive_a_restart(control_plane, enrolled, tmp_path):
    _, client = enrolled
    spool, _ = _spool_with_poison(tmp_path, reports=1, poison_at=1)
    control_plane.refuse(_poison, 500)
    clock = [1000.0]
    for _ in range(2):
        assert _delivery(spool, client, max_server_errors=3, clock=lambda: clock[0]).deliver_pending() is False
    assert spool.server_errors(1) == 2
    spool.close()

    spool = Spool(tmp_path / "spool.db")  # the agent restarted: the count goes on
    assert spool.server_errors(1) == 2 and spool.depth() == 1
    assert _delivery(spool, client, max_server_errors=3, clock=lambda: clock[0]).deliver_pending() is True
    original = spool.rejected_reports()[0].body
    spool.close()

    spool = Spool(tmp_path / "spool.db")
    assert spool.depth() == 0 and [r.sequence for r in spool.rejected_reports()] == [1]
    assert spool.rejected_reports()[0].body == original and spool.server_errors(1) == 0

    # The server got fixed: re-queued under a new sequence (it acknowledged past the old one meanwhile).
    build_core(spool).collect()  # 2
    control_plane.stop_refusing()
    assert _delivery(spool, client).deliver_pending() is True
    assert spool.requeue_rejected() == [(1, 3)]
    assert _delivery(spool, client).deliver_pending() is True
    assert control_plane.sequences(spool.instance_id) == [2, 3] and spool.rejected_count() == 0
    resent = control_plane.reports()[-1]
    assert resent["sequence"] == 3 and resent["events"] == json.loads(original)["events"]


def test_a_server_error_that_goes_away_sets_nothing_aside(control_plane, enrolled, tmp_path):
    _, client = enrolled
    spool, _ = _spooled(tmp_path, 8)
    clock = [1000.0]
    delivery = _delivery(spool, client, max_server_errors=3, clock=lambda: clock[0])
    control_plane.fail_next("500", "500", "500", "500")  # the batch (8), its halves (4, 2), then report 1 alone
    assert delivery.deliver_pending() is False and spool.server_errors(1) == 1
    clock[0] += 1000
    assert delivery.deliver_pending() is True
    assert control_plane.sequences(spool.instance_id) == list(range(1, 9)) and spool.rejected_count() == 0
    assert control_plane.posts[-1] == list(range(2, 9))  # back to whole batches once it went through


def test_urgent_report_reaches_the_server_behind_a_report_the_server_keeps_failing(
    control_plane, enrolled, tmp_path
):
    """The daemon's sender thread, in real time: a poison report at the head, then an Xid 79."""
    _, client = enrolled
    spool, core = _spool_with_poison(tmp_path, reports=3, poison_at=1)
    control_plane.refuse(_poison, 500)
    delivery = _delivery(spool, client, backoff_base_s=0.05, max_server_errors=3)
    sender = SenderThread(delivery, poll_s=60)
    sender.start()
    try:
        core.add_events([XID_79])
        core.collect()
        sender.wake(urgent=True)
        deadline = time.monotonic() + 10
        while 4 not in control_plane.sequences(spool.instance_id) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert control_plane.sequences(spool.instance_id) == [2, 3, 4]
        assert [r.sequence for r in spool.rejected_reports()] == [1]
    finally:
        sender.stop(flush_timeout_s=1)


def test_rejected_reports_and_the_latest_reason_show_in_the_spool_state(control_plane, enrolled, tmp_path):
    from fleet_agent.spool import read_spool_state

    _, client = enrolled
    spool, _ = _spool_with_poison(tmp_path, reports=3, poison_at=2)
    control_plane.refuse(_poison, 400)
    assert _delivery(spool, client).deliver_pending() is True
    state = read_spool_state(tmp_path / "spool.db")
    assert (state["rejected"], state["rejected_total"], state["rejected_dropped"]) == (1, 1, 0)
    assert state["last_rejection"]["sequence"] == 2 and "HTTP 400" in state["last_rejection"]["reason"]


# --- Retry-After -----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("header", "expected"),
    [("120", 120.0), (" 3 ", 3.0), ("0", 0.0), ("1.5", 1.5), ("Wed, 02 Dec 2026 18:45:30 GMT", 30.0),
     ("Wed, 02 Dec 2026 18:44:00 GMT", 0.0), ("Wednesday, 02-Dec-26 18:45:10 GMT", 10.0), (None, None), ("", None),
     ("soon", None), ("-5", None), ("nan", None), ("inf", None)],
)
def test_retry_after_is_read_as_seconds_or_an_http_date(header, expected):
    now = 1796237100.0  # 2026-12-02T18:45:00Z
    assert parse_retry_after(header, now=now) == expected


@pytest.mark.parametrize("status", ["429", "503"])
def test_retry_after_is_waited_out_with_jitter_even_by_urgent_attempts(status, control_plane, enrolled, tmp_path):
    _, client = enrolled
    spool = Spool(tmp_path / "spool.db")
    build_core(spool).collect()
    clock = [1000.0]
    delivery = _delivery(spool, client, backoff_base_s=1.0, clock=lambda: clock[0])
    control_plane.fail_next(status, retry_after="20")
    assert delivery.deliver_pending() is False
    wait = delivery.seconds_until_retry()
    assert 20 <= wait <= 25  # at least what the server asked, plus up to a quarter of it
    requests = control_plane.report_requests
    assert delivery.deliver_pending(force=True) is False  # an urgent report does not jump the server's queue
    assert control_plane.report_requests == requests
    clock[0] += wait
    assert delivery.deliver_pending() is True and spool.depth() == 0


def test_retry_after_as_an_http_date(control_plane, enrolled, tmp_path):
    _, client = enrolled
    spool = Spool(tmp_path / "spool.db")
    build_core(spool).collect()
    control_plane.fail_next("503", retry_after=formatdate(time.time() + 60, usegmt=True))
    delivery = _delivery(spool, client)
    assert delivery.deliver_pending() is False
    assert 58 <= delivery.seconds_until_retry() <= 60 + 15 + 1


def test_retry_after_jitter_spreads_a_fleet_and_is_capped(tmp_path):
    spool = Spool(tmp_path / "spool.db")
    waits = []
    for seed in range(50):
        delivery = Delivery(spool, lambda: None, backoff_cap_s=300, rng=random.Random(seed), clock=lambda: 0.0)
        delivery._failed(DeliveryError("HTTP 503", status=503, retry_after=2))
        waits.append(delivery.seconds_until_retry())
    assert min(waits) >= 2 and max(waits) <= 3 and len({round(w, 3) for w in waits}) > 40
    delivery = Delivery(spool, lambda: None, backoff_cap_s=300, rng=random.Random(1), clock=lambda: 0.0)
    delivery._failed(DeliveryError("HTTP 503", status=503, retry_after=86400))  # "come back tomorrow"
    assert 300 <= delivery.seconds_until_retry() <= 330


def test_retry_after_on_a_server_error_is_honoured_too(control_plane, enrolled, tmp_path):
    _, client = enrolled
    spool, _ = _spooled(tmp_path, 1)
    control_plane.fail_next("500", retry_after="40")
    delivery = _delivery(spool, client, clock=lambda: 1000.0)
    assert delivery.deliver_pending() is False and spool.server_errors(1) == 1
    assert 40 <= delivery.seconds_until_retry() <= 50


def test_without_retry_after_the_exponential_backoff_applies(control_plane, enrolled, tmp_path):
    _, client = enrolled
    spool = Spool(tmp_path / "spool.db")
    build_core(spool).collect()
    clock = [1000.0]
    delivery = _delivery(spool, client, backoff_base_s=4.0, clock=lambda: clock[0])
    control_plane.fail_next("503")
    delivery.deliver_pending()
    assert 2 <= delivery.seconds_until_retry() <= 4
    assert delivery.deliver_pending(force=True) is True  # the agent's own backoff yields to urgency
