"""The delivery worker: back-off with jitter, Retry-After, dead letters, ordering per ticket, leases, and exactly
once at the receiver through an outage and a worker that dies mid-delivery."""

from datetime import timedelta

import pytest
from django.utils import timezone

from fleet.integrations.choices import AttemptOutcome, MessageState, TicketAction
from fleet.integrations.models import DeliveryCounter, OutboxMessage
from fleet.integrations.services import delivery
from fleet.integrations.services.delivery import (
    backoff_delay,
    due_message_ids,
    message_claim,
    message_deliver,
    message_retry,
    outbox_deliver_due,
)
from fleet.integrations.services.outbox import integration_test_message_write

from .conftest import raise_xid_79
from .fakes import Scripted, WebhookReceiver

pytestmark = pytest.mark.django_db

SECRET = "whsec-" + "x" * 26


@pytest.fixture
def receiver(server):
    return server(WebhookReceiver(SECRET))


@pytest.fixture
def hook(make_integration, receiver):
    return make_integration("webhook", {"url": receiver.url + "/events"}, {"signing_secret": SECRET},
                            name="hook", rules=[{}])


def _counter(integration):
    return DeliveryCounter.objects.values("sent", "failed", "dead_lettered").get(integration=integration)


def test_a_message_is_delivered_signed_and_counted(hook, receiver, admin_user):
    message = integration_test_message_write(integration=hook, actor=admin_user)
    assert message_deliver(message_id=message.pk) == AttemptOutcome.DELIVERED
    message.refresh_from_db()
    assert message.state == MessageState.DELIVERED and message.attempts == 1
    assert message.last_status_code == 202
    event = receiver.app.events[0]
    assert event["id"] == message.dedup_key and event["type"] == "io.gpufleet.test"
    attempt = message.attempt_log.get()
    assert attempt.outcome == AttemptOutcome.DELIVERED and attempt.exchanges[0]["status"] == 202
    assert attempt.exchanges[0]["headers"]["X-Fleet-Signature"].startswith("t=")
    assert _counter(hook) == {"sent": 1, "failed": 0, "dead_lettered": 0}


def test_5xx_backs_off_exponentially_with_jitter(hook, receiver, admin_user, settings):
    settings.INTEGRATIONS_BACKOFF_BASE_S = 10
    message = integration_test_message_write(integration=hook, actor=admin_user)
    now = timezone.now()
    delays = []
    for attempt in range(1, 5):
        receiver.script.append(Scripted(502, body=b"bad gateway"))
        assert message_deliver(message_id=message.pk, now=now) == AttemptOutcome.RETRY
        message.refresh_from_db()
        delay = (message.next_attempt_at - now).total_seconds()
        ceiling = 10 * 2 ** (attempt - 1)
        assert ceiling / 2 <= delay <= ceiling
        delays.append(delay)
        assert message_deliver(message_id=message.pk, now=now) == "skipped"  # not due yet
        now = message.next_attempt_at
    assert message.state == MessageState.RETRYING and message.attempts == 4
    assert "answered 502: bad gateway" in message.last_error
    assert _counter(hook) == {"sent": 0, "failed": 4, "dead_lettered": 0}
    assert message_deliver(message_id=message.pk, now=now) == AttemptOutcome.DELIVERED


def test_backoff_is_capped():
    assert backoff_delay(30) <= 3600
    assert backoff_delay(1, retry_after=120) >= 120


def test_429_waits_as_long_as_retry_after_says(hook, receiver, admin_user):
    message = integration_test_message_write(integration=hook, actor=admin_user)
    now = timezone.now()
    receiver.script.append(Scripted(429, {"Retry-After": "120"}, b'{"error": "rate limited"}'))
    assert message_deliver(message_id=message.pk, now=now) == AttemptOutcome.RETRY
    message.refresh_from_db()
    assert 120 <= (message.next_attempt_at - now).total_seconds() <= 121
    assert message.attempt_log.get().retry_after_s == 120
    assert message_deliver(message_id=message.pk, now=now + timedelta(seconds=119)) == "skipped"


def test_a_request_the_receiver_refuses_is_dead_lettered_at_once(hook, receiver, admin_user):
    message = integration_test_message_write(integration=hook, actor=admin_user)
    receiver.script.append(Scripted(400, body=b'{"error": "missing field"}'))
    assert message_deliver(message_id=message.pk) == AttemptOutcome.DEAD
    message.refresh_from_db()
    assert message.state == MessageState.DEAD and message.dead_at is not None
    assert _counter(hook) == {"sent": 0, "failed": 1, "dead_lettered": 1}


def test_after_max_attempts_the_message_is_dead_lettered_and_an_operator_can_retry_it(hook, receiver, admin_user):
    hook.max_attempts = 3
    hook.save()
    message = integration_test_message_write(integration=hook, actor=admin_user)
    now = timezone.now()
    receiver.down = True
    for _ in range(3):
        message_deliver(message_id=message.pk, now=now)
        now += timedelta(hours=2)
    message.refresh_from_db()
    assert message.state == MessageState.DEAD and "gave up after 3 tries" in message.last_error
    assert _counter(hook)["dead_lettered"] == 1

    receiver.down = False
    message_retry(message=message, actor=admin_user, now=now)
    assert message_deliver(message_id=message.pk, now=now) == AttemptOutcome.DELIVERED
    message.refresh_from_db()
    assert message.attempts == 4 and message.state == MessageState.DELIVERED
    assert [a.outcome for a in message.attempt_log.all()] == ["retry", "retry", "dead", "delivered"]


def test_a_receiver_that_does_not_answer_in_time_is_retried(hook, receiver, admin_user, settings):
    settings.INTEGRATIONS_HTTP_TIMEOUT_S = 0.5
    message = integration_test_message_write(integration=hook, actor=admin_user)
    receiver.script.append(Scripted(0, delay=1.5))
    assert message_deliver(message_id=message.pk) == AttemptOutcome.RETRY
    message.refresh_from_db()
    assert "timed out" in message.last_error and message.last_status_code is None


def test_an_unreachable_receiver_is_retried(make_integration, admin_user):
    dead = make_integration("webhook", {"url": "http://127.0.0.1:9/nothing"}, {"signing_secret": SECRET})
    message = integration_test_message_write(integration=dead, actor=admin_user)
    assert message_deliver(message_id=message.pk) == AttemptOutcome.RETRY
    message.refresh_from_db()
    assert "could not connect (refused, unreachable or timed out)" in message.last_error


def test_messages_of_one_ticket_go_out_in_order(hook, receiver, hosted_node):
    now = timezone.now()
    finding = raise_xid_79(hosted_node, now=now)
    opening = OutboxMessage.objects.get(action=TicketAction.OPEN)
    from fleet.integrations.services.outbox import message_write

    closing = message_write(integration=hook, ticket=opening.ticket, event_kind="finding.resolved",
                            action=TicketAction.RESOLVE, dedup_key="x:resolve", now=now,
                            event={"finding_id": finding.pk})
    receiver.script.append(Scripted(503))
    assert due_message_ids(now=now) == [opening.pk]
    assert message_deliver(message_id=closing.pk, now=now) == "skipped"
    message_deliver(message_id=opening.pk, now=now)  # 503: retrying, still holds the resolve back
    later = now + timedelta(hours=1)
    assert due_message_ids(now=later) == [opening.pk]
    outbox_deliver_due(now=later, inline=True)
    outbox_deliver_due(now=later, inline=True)
    assert [e["fleetaction"] for e in receiver.app.events] == ["open", "resolve"]
    opening.ticket.refresh_from_db()
    assert opening.ticket.state == "resolved" and opening.ticket.external_id == f"T-{opening.ticket.key}"


def test_the_sweep_hands_due_messages_to_workers_once(hook, admin_user, monkeypatch):
    kicked = []
    monkeypatch.setattr("fleet.integrations.services.outbox._kick", kicked.extend)
    message = integration_test_message_write(integration=hook, actor=admin_user)
    now = timezone.now()
    assert outbox_deliver_due(now=now) == {"reclaimed": 0, "due": 1, "queued": 1}
    assert kicked == [message.pk]
    assert outbox_deliver_due(now=now)["queued"] == 0  # queued already: not handed out twice
    # A queued task that never ran (lost with a broker) is handed out again after the lease.
    assert outbox_deliver_due(now=now + timedelta(seconds=121))["queued"] == 1


class _Killed(BaseException):
    """Stands in for SIGKILL between sending and recording (the real process kill is in tests/integration)."""


def test_a_worker_that_dies_after_sending_is_covered_by_the_lease_and_the_receivers_dedup(hook, receiver,
                                                                                         admin_user, monkeypatch):
    message = integration_test_message_write(integration=hook, actor=admin_user)
    now = timezone.now()

    def die(*args, **kwargs):
        raise _Killed()

    with monkeypatch.context() as patch:
        patch.setattr(delivery, "_record_success", die)
        with pytest.raises(_Killed):
            message_deliver(message_id=message.pk, now=now)
    message.refresh_from_db()
    assert message.state == MessageState.SENDING and receiver.app.accepted[message.dedup_key] == 1
    # Another worker can't take it while the lease runs …
    assert message_claim(message_id=message.pk, now=now + timedelta(seconds=60)) is None
    # … after it, the sweep sends it again under the same key; the receiver absorbs the copy.
    result = outbox_deliver_due(now=now + timedelta(seconds=121), inline=True)
    assert result == {"reclaimed": 1, "due": 1, "delivered": 1}
    message.refresh_from_db()
    assert message.state == MessageState.DELIVERED and message.attempts == 2
    assert [a.outcome for a in message.attempt_log.all()] == ["interrupted", "delivered"]
    assert receiver.app.accepted[message.dedup_key] == 1 and receiver.app.duplicates[message.dedup_key] == 1


def test_receiver_down_for_an_hour_every_message_arrives_exactly_once(hook, receiver, hosted_node, admin_user,
                                                                      settings):
    """Simulated clock: the receiver answers 503 for an hour; the sweep runs at every due time (at least 10 s
    apart), as the periodic sweep would find them."""
    settings.INTEGRATIONS_MAX_ATTEMPTS = 20
    start = timezone.now()
    raise_xid_79(hosted_node, now=start, index=1)
    messages = [integration_test_message_write(integration=hook, actor=admin_user, now=start + timedelta(seconds=i))
                for i in range(4)]
    messages += list(OutboxMessage.objects.filter(action=TicketAction.OPEN))
    expected = {m.dedup_key for m in messages}
    assert len(expected) == 5

    now, tries_while_down = start, 0
    pending = OutboxMessage.objects.exclude(state=MessageState.DELIVERED)
    while pending.exists() and now < start + timedelta(hours=3):
        receiver.down = now < start + timedelta(hours=1)
        before = len(receiver.requests)
        outbox_deliver_due(now=now, inline=True)
        if receiver.down:
            tries_while_down += len(receiver.requests) - before
        upcoming = pending.order_by("next_attempt_at").values_list("next_attempt_at", flat=True).first()
        now = max(now + timedelta(seconds=10), upcoming or now)
    assert set(receiver.app.accepted) == expected
    assert all(count == 1 for count in receiver.app.accepted.values())
    assert not receiver.app.duplicates
    assert set(OutboxMessage.objects.values_list("state", flat=True)) == {MessageState.DELIVERED}
    # Back-off: about log2(3600 / 10) ≈ 9 tries per message during the hour, not 360.
    assert 5 * 6 <= tries_while_down <= 5 * 11


def test_a_disabled_integrations_messages_wait_until_it_is_enabled(hook, receiver, admin_user):
    message = integration_test_message_write(integration=hook, actor=admin_user)
    hook.enabled = False
    hook.save()
    now = timezone.now()
    assert due_message_ids(now=now) == []
    assert message_deliver(message_id=message.pk, now=now) == "skipped"
    assert not receiver.requests
    hook.enabled = True
    hook.save()
    assert outbox_deliver_due(now=now, inline=True)["delivered"] == 1
