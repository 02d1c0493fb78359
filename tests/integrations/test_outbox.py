"""Outbox rows are written with the change that caused them, routed by rules, with one ticket per occurrence."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from fleet.health.models import Finding
from fleet.health.services.evaluation import evaluate
from fleet.integrations.choices import EventKind, MessageState, TicketAction
from fleet.integrations.models import OutboxMessage, Ticket
from fleet.integrations.services.delivery import message_render
from fleet.inventory.models import SoftwareStack
from tests.factories import BaselineFactory

from .conftest import raise_xid_79, resolve_xid

pytestmark = pytest.mark.django_db

PROVIDER_DESK = {"responsible_parties": ["provider"]}
OUR_ONCALL = {"responsible_parties": ["us"]}


@pytest.fixture
def channels(make_integration, hosted_node):
    provider = make_integration("email", {"to": ["support@hostco.example"]}, name="hostco-desk",
                                rules=[PROVIDER_DESK | {"providers": [hosted_node.provider_id]}])
    ours = make_integration("webhook", {"url": "https://oncall.example/hook"}, {"signing_secret": "s" * 32},
                            name="our-oncall", rules=[OUR_ONCALL])
    return provider, ours


def test_an_xid_79_on_hosted_bare_metal_goes_to_the_providers_desk_with_log_times_and_serials(channels,
                                                                                            hosted_node):
    provider_desk, our_oncall = channels
    finding = raise_xid_79(hosted_node)
    assert finding.responsible_party == "provider"
    message = OutboxMessage.objects.get()
    assert (message.integration, message.event_kind, message.action) == (provider_desk, EventKind.FINDING_OPENED,
                                                                          TicketAction.OPEN)
    assert message.ticket.key == f"fleet-finding-{finding.pk}"
    assert message.dedup_key == f"fleet-finding-{finding.pk}:open"
    assert list(message.ticket.findings.all()) == [finding]

    content = message_render(message, timezone.now())
    body = content["body"]
    assert "hostname: " + hosted_node.hostname in body
    assert "instance / server id: srv-4711" in body
    assert "region: eu-central; site: fra1" in body
    assert "GPU 3: NVIDIA H100 80GB HBM3 — serial 1650120000003, UUID GPU-" in body
    # The Xid line with its time point, as the kernel logged it.
    log_line = next(line for line in body.splitlines() if "[xid 79]" in line)
    assert "UTC [xid 79] [Tue Dec  1 11:59:58 2026] NVRM: Xid (PCI:0000:1c:00): 79" in log_line
    assert "driver 550.54.15, CUDA (driver) 12.4" in body
    assert "1. Visibility: " in body and "4. Platform / hardware: FAILED" in body
    assert "2. Software chain: ruled out — no problem found" in body
    assert ("What we ask for\n  Please power-cycle the server and confirm all GPUs come back (GPU 3, serial "
            "1650120000003); if it happens again, inspect the hardware and replace the GPU.") in body
    assert content["evidence"]["gpus"][3]["serial"] == "1650120000003"
    assert "Kernel log" in content["evidence_text"]
    assert content["facts"]["gpus"] == [{"index": 3, "serial": "1650120000003",
                                         "uuid": content["evidence"]["gpus"][3]["uuid"],
                                         "pci_bus_id": content["evidence"]["gpus"][3]["pci_bus_id"]}]
    assert not OutboxMessage.objects.filter(integration=our_oncall).exists()


def test_a_driver_drift_finding_goes_to_our_channel_not_the_providers(channels, hosted_node):
    provider_desk, our_oncall = channels
    BaselineFactory(pool=hosted_node.pool, driver_version="550.54.15")
    SoftwareStack.objects.filter(pk=hosted_node.current_stack_id).update(driver_version="550.90.07")
    now = timezone.now()
    evaluate(now=now)
    evaluate(now=now + timedelta(hours=1))  # stack drift must hold for its duration
    finding = Finding.objects.get(node=hosted_node, rule__slug="stack_drift", state="open")
    assert finding.responsible_party == "us"
    assert [m.integration for m in OutboxMessage.objects.all()] == [our_oncall]


def test_the_outbox_row_rolls_back_with_the_change(channels, hosted_node):
    with pytest.raises(RuntimeError), transaction.atomic():
        raise_xid_79(hosted_node)
        assert OutboxMessage.objects.count() == 1
        raise RuntimeError("the cycle failed after writing")
    assert not OutboxMessage.objects.exists()
    assert not Ticket.objects.exists()


def test_without_routing_rules_nothing_is_written(make_integration, hosted_node):
    make_integration("webhook", {"url": "https://oncall.example/hook"}, {"signing_secret": "s" * 32})
    raise_xid_79(hosted_node)
    assert not OutboxMessage.objects.exists()


def test_a_flap_inside_the_hold_window_keeps_one_ticket_and_a_later_occurrence_opens_a_new_one(channels,
                                                                                               hosted_node):
    provider_desk, _ = channels
    now = timezone.now()
    first = raise_xid_79(hosted_node, now=now)
    ticket = Ticket.objects.get()
    OutboxMessage.objects.filter(action=TicketAction.OPEN).update(state=MessageState.DELIVERED)

    # Resolved: the resolve is held for the integration's hold window …
    later = now + timedelta(minutes=20)
    assert resolve_xid(hosted_node, now=later) == first
    resolve = OutboxMessage.objects.get(action=TicketAction.RESOLVE)
    assert resolve.next_attempt_at == later + timedelta(seconds=provider_desk.resolve_hold_s)
    # … and the fault comes back inside it: no second ticket, the held resolve is cancelled, an update instead.
    second = raise_xid_79(hosted_node, now=later + timedelta(minutes=2))
    assert second.pk != first.pk
    assert Ticket.objects.count() == 1
    resolve.refresh_from_db()
    assert resolve.state == MessageState.CANCELLED
    update = OutboxMessage.objects.get(action=TicketAction.UPDATE)
    assert update.ticket == ticket and update.event["reopened"] is True
    assert set(ticket.findings.all()) == {first, second}

    # Resolved again, and this time the resolve goes out: the ticket is closed.
    OutboxMessage.objects.filter(action=TicketAction.UPDATE).update(state=MessageState.DELIVERED)
    much_later = later + timedelta(hours=1)
    resolve_xid(hosted_node, now=much_later)
    final = OutboxMessage.objects.get(action=TicketAction.RESOLVE, state=MessageState.PENDING)
    assert final.dedup_key == f"{ticket.key}:resolve:finding-{second.pk}"
    OutboxMessage.objects.filter(pk=final.pk).update(state=MessageState.DELIVERED)
    Ticket.objects.filter(pk=ticket.pk).update(state="resolved")

    # A new occurrence after the close opens a new ticket under a new key.
    third = raise_xid_79(hosted_node, now=much_later + timedelta(hours=1))
    assert Ticket.objects.count() == 2
    newest = Ticket.objects.exclude(pk=ticket.pk).get()
    assert newest.key == f"fleet-finding-{third.pk}" != ticket.key
    assert OutboxMessage.objects.get(ticket=newest).action == TicketAction.OPEN


def test_a_flap_after_the_resolve_went_out_opens_a_new_ticket(channels, hosted_node):
    now = timezone.now()
    raise_xid_79(hosted_node, now=now)
    OutboxMessage.objects.update(state=MessageState.DELIVERED)
    resolve_xid(hosted_node, now=now + timedelta(minutes=20))
    OutboxMessage.objects.filter(action=TicketAction.RESOLVE).update(state=MessageState.SENDING)
    raise_xid_79(hosted_node, now=now + timedelta(minutes=21))
    assert Ticket.objects.count() == 2
