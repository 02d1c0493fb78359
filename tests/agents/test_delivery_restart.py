"""Delivery killed mid-batch, then restarted: nothing lost, nothing sent twice once acknowledged."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

from fleet_agent.client import ControlPlaneClient
from fleet_agent.credentials import credential_path
from fleet_agent.enroll import enroll
from fleet_agent.sender import Delivery
from fleet_agent.spool import Spool
from tests.agents.conftest import build_core
from tests.agents.test_sender import FACTS


class RecordingClient:
    """The real client, plus a log of which acknowledgements actually reached the agent."""

    def __init__(self, client: ControlPlaneClient):
        self.client = client
        self.received_acks: list[int] = []
        self.sent: list[tuple[list[int], int]] = []  # (sequences, highest ack the agent had seen by then)

    def post_reports(self, body: bytes, *, reports_url: str) -> dict:
        import json

        sequences = [r["sequence"] for r in json.loads(body)["reports"]]
        self.sent.append((sequences, max(self.received_acks, default=0)))
        answer = self.client.post_reports(body, reports_url=reports_url)
        self.received_acks.append(answer["acked_sequence"])
        return answer


def _assert_never_resent_after_ack(recording: RecordingClient) -> None:
    for sequences, acked_before in recording.sent:
        assert min(sequences) > acked_before, f"resent {sequences} after ack {acked_before}"


def test_aborted_batches_and_a_restart_lose_nothing_and_duplicate_nothing(control_plane, tmp_path):
    enrollment = enroll(
        ControlPlaneClient(control_plane.url), "fe_test", FACTS, credential_file=credential_path(tmp_path)
    )
    client = ControlPlaneClient(control_plane.url, credential=enrollment.credential)
    path = tmp_path / "spool.db"

    spool = Spool(path)
    core = build_core(spool)
    for _ in range(30):
        core.collect()
    first_run = RecordingClient(client)
    delivery = Delivery(
        spool, lambda: (first_run, "/api/v1/agent/reports"), max_batch=10, rng=random.Random(2)
    )
    assert delivery.deliver_pending() is True  # 1..10, 11..20, 21..30 acknowledged
    for _ in range(25):
        core.collect()  # 31..55
    control_plane.fail_next("abort_after_store")  # batch 31..40 is stored, but its ack never arrives
    assert delivery.deliver_pending() is False
    assert 40 in control_plane.sequences(spool.instance_id) and spool.last_acked_sequence() == 30
    spool.close()  # the agent dies here, in backoff, with 31..55 still spooled

    restarted = Spool(path)
    assert restarted.instance_id == spool.instance_id and restarted.depth() == 25
    second_run = RecordingClient(client)
    delivery = Delivery(
        restarted, lambda: (second_run, "/api/v1/agent/reports"), max_batch=10, rng=random.Random(3)
    )
    control_plane.fail_next("abort_before_store")  # and the first try after the restart dies mid-upload
    assert delivery.deliver_pending(force=True) is False
    assert delivery.deliver_pending(force=True) is True

    assert control_plane.sequences(restarted.instance_id) == list(range(1, 56))  # nothing lost
    assert control_plane.duplicates == 10  # only the batch whose ack was lost went twice
    assert restarted.depth() == 0 and restarted.last_acked_sequence() == 55
    _assert_never_resent_after_ack(first_run)
    _assert_never_resent_after_ack(second_run)
    restarted.close()


def _run_agent(state_dir, server_url, *extra):
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fleet_agent",
            "run",
            "--state-dir",
            str(state_dir),
            "--server",
            server_url,
            "--interval",
            "60",
            "--kernel-log",
            "off",
            "--cloud",
            "none",
            "--log-level",
            "warning",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(condition, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_daemon_killed_during_a_post_resumes_from_its_spool(control_plane, tmp_path):
    """The real ``fleet-agent run``: SIGKILL while the server holds a stored batch unanswered, restart."""
    enroll(ControlPlaneClient(control_plane.url), "fe_test", FACTS, credential_file=credential_path(tmp_path))
    spool = Spool(tmp_path / "spool.db")
    core = build_core(spool)
    for _ in range(12):
        core.collect()  # a backlog from an earlier outage
    instance = spool.instance_id
    spool.close()

    control_plane.fail_next("stall_after_store")
    agent = _run_agent(tmp_path, control_plane.url)
    try:
        assert _wait_for(lambda: control_plane.posts), "the agent never posted"
        os.kill(agent.pid, signal.SIGKILL)  # mid-batch: stored on the server, never acknowledged
        agent.wait(timeout=10)
    finally:
        control_plane.release.set()
    stored_before_restart = control_plane.sequences(instance)
    assert stored_before_restart and max(stored_before_restart) >= 12

    agent = _run_agent(tmp_path, control_plane.url)
    try:
        assert _wait_for(lambda: len(control_plane.sequences(instance)) >= 14)
        agent.send_signal(signal.SIGTERM)
        _, stderr = agent.communicate(timeout=20)
    finally:
        if agent.poll() is None:
            agent.kill()
    assert agent.returncode == 0, stderr
    stored = control_plane.sequences(instance)
    assert stored == list(range(1, max(stored) + 1))  # every sequence, each once
    assert control_plane.duplicates == len(control_plane.posts[0])  # only the unacknowledged batch again
    reopened = Spool(tmp_path / "spool.db")
    assert reopened.depth() == 0 and reopened.last_acked_sequence() == max(stored)
