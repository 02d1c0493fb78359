"""Enrolment and delivery against a fake control plane on 127.0.0.1."""

from __future__ import annotations

import json
import random
import stat
import time

import pytest

from fleet_agent.client import ControlPlaneClient, DeliveryError
from fleet_agent.credentials import credential_path, load_enrollment
from fleet_agent.enroll import EnrollmentError, enroll
from fleet_agent.report import NodeIdentity
from fleet_agent.sender import Delivery, SenderThread
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


def test_retry_after_is_honoured(tmp_path):
    delivery = Delivery(Spool(tmp_path / "spool.db"), lambda: None, backoff_cap_s=300, rng=random.Random(3))
    delivery._failed(DeliveryError("HTTP 429", status=429, retry_after=42))
    assert 41 <= delivery.seconds_until_retry() <= 42


def test_invalid_report_is_isolated_and_set_aside(control_plane, enrolled, tmp_path):
    _, client = enrolled
    spool = Spool(tmp_path / "spool.db")
    core = build_core(spool)
    for _ in range(3):
        core.collect()
    bad = json.loads(spool.pending()[1].body)
    bad["system"]["cpu_busy_pct"] = 150.0  # what a buggy collector might send
    spool.put(bad)
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
