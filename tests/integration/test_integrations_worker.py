"""A real Celery worker killed (SIGKILL) between sending a notification and recording it: after recovery the
receiver has the message exactly once (counted by its dedup key), the copy sent again absorbed by its dedup."""

import os
import signal
import sys

import pytest

from fleet.integrations.choices import MessageState
from fleet.integrations.models import OutboxMessage
from fleet.integrations.services.delivery import outbox_deliver_due
from fleet.integrations.services.integrations import integration_create
from fleet.integrations.services.outbox import integration_test_message_write
from fleet.integrations.tasks import deliver
from tests.factories import UserFactory
from tests.integrations.fakes import FakeServer, WebhookReceiver
from tests.processes import running, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

QUEUE = "integrations-kill-test"
LEASE_S = 3


def _worker(tmp_path, name: str, monkeypatch):
    monkeypatch.setenv("INTEGRATIONS_LEASE_S", str(LEASE_S))
    log = tmp_path / f"{name}.log"
    command = [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo", "--loglevel", "INFO",
               "--without-gossip", "--without-mingle", "--without-heartbeat", "-Q", f"{QUEUE},celery",
               "-n", f"{name}@%h"]
    return running(command, log=log, ready=lambda: log.exists() and b"ready." in log.read_bytes(),
                   what=f"celery worker {name}")


def test_a_worker_killed_mid_delivery_leaves_exactly_one_copy_at_the_receiver(tmp_path, monkeypatch, settings):
    settings.INTEGRATIONS_LEASE_S = LEASE_S
    secret = "kill-test-secret-" + "k" * 16
    receiver = FakeServer(WebhookReceiver(secret))
    try:
        admin = UserFactory(username="kill-test-admin", role="admin")
        integration, _ = integration_create(
            data={"name": "kill-test", "kind": "webhook", "config": {"url": receiver.url + "/events"}},
            secrets={"signing_secret": secret}, actor=admin)
        message = integration_test_message_write(integration=integration, actor=admin)
        receiver.hold_next()  # the receiver takes the request and keeps the worker waiting for its answer

        with _worker(tmp_path, "doomed", monkeypatch) as doomed:
            deliver.apply_async((message.pk,), queue=QUEUE)
            assert receiver.held.wait(60), f"the worker never sent (log: {doomed.log_path})"
            os.kill(doomed.pid, signal.SIGKILL)
            doomed.wait(timeout=30)
        receiver.release()
        message.refresh_from_db()
        assert message.state == MessageState.SENDING and message.attempts == 1
        # It did get through before the worker died: the receiver counts it once released (its own thread).
        wait_for(lambda: receiver.app.accepted[message.dedup_key] == 1, timeout=10, what="the receiver to count it")

        with _worker(tmp_path, "survivor", monkeypatch) as survivor:
            # Beat's sweep, run here once the lease ran out: it finds the orphan and a worker sends it again.
            wait_for(lambda: outbox_deliver_due()["reclaimed"], timeout=LEASE_S + 10, what="the lease to run out")
            wait_for(lambda: OutboxMessage.objects.get(pk=message.pk).state == MessageState.DELIVERED,
                     timeout=60, what=f"the re-send (worker log: {survivor.log_path})")
        message.refresh_from_db()
        assert [a.outcome for a in message.attempt_log.order_by("id")] == ["interrupted", "delivered"]
        assert receiver.app.accepted[message.dedup_key] == 1
        assert receiver.app.duplicates[message.dedup_key] == 1
        assert len(receiver.app.events) == 1
    finally:
        receiver.close()
