"""The seams with the remediation engine: incident events become outbox rows in the incident's transaction, and
the `ticket` executor carries out `open_ticket` and `await_external` steps, driven by inbound updates."""

import json
import time
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from fleet.integrations.choices import EventKind, MessageState, TicketAction
from fleet.integrations.connectors.webhook import sign
from fleet.integrations.models import OutboxMessage, Ticket
from fleet.integrations.remediation import incident_outbox_write
from fleet.integrations.services.delivery import outbox_deliver_due
from fleet.integrations.services.inbound import inbound_receive
from fleet.remediation.choices import IncidentEventKind, IncidentState, StepStatus, TimelineKind
from fleet.remediation.models import Incident, PoolRemediationSettings, StepRun
from fleet.remediation.services.actions import incident_approve, incident_step_complete
from fleet.remediation.services.engine import current_run
from fleet.remediation.signals import IncidentEvent
from tests.factories import UserFactory
from tests.health.factories import T0
from tests.remediation.helpers import fault_and_intake, node_in, pool_for, reboot, report, tick

from .fakes import PagerDutyEvents, WebhookReceiver

pytestmark = pytest.mark.django_db

SECRET = "desk-secret-" + "d" * 20
INCIDENT_EVENTS = ["ticket.requested", "incident.step_changed", "incident.approval_needed", "incident.closed"]


@pytest.fixture
def operator():
    return UserFactory(username="op", role="operator")


@pytest.fixture
def desk(make_integration, server):
    receiver = server(WebhookReceiver(SECRET))
    integration = make_integration("webhook", {"url": receiver.url + "/tickets"},
                                   {"signing_secret": SECRET, "inbound_secret": "in-" + SECRET},
                                   name="hostco-desk",
                                   rules=[{"responsible_parties": ["provider"], "event_kinds": INCIDENT_EVENTS}])
    return integration, receiver


def _hosted(executors=("ticket",), **settings):
    pool = pool_for("bare_metal_hosted", **settings)
    PoolRemediationSettings.objects.filter(pool=pool).update(executors=list(executors))
    node = node_in(pool)
    fault_and_intake([node])
    return node, Incident.objects.get(node=node)


def _inbound(api, integration, payload):
    body = json.dumps(payload).encode()
    return api.post(f"/api/v1/inbound/{integration.inbound_id}/", body, content_type="application/json",
                    HTTP_X_FLEET_SIGNATURE=sign("in-" + SECRET, body, int(time.time())))


def drive(incident, operator, node, *, at, on_ticket_step, limit=60):
    """Walk the workflow as a worker and an operator would; steps the ticket executor carries are left to it (and
    to `on_ticket_step`, which plays the outside world), the others are completed by the book."""
    for _ in range(limit):
        incident.refresh_from_db()
        if not incident.is_open:
            return incident
        at += timedelta(minutes=10)
        run = current_run(incident)
        if run.executor == "ticket":
            if run.status == StepStatus.WAITING:
                on_ticket_step(run, at)
                StepRun.objects.filter(pk=run.pk).update(next_poll_at=at)
            tick(incident, at=at)
            continue
        if run.kind == "verify":
            report(node, at=at)
        if run.status == StepStatus.AWAITING_APPROVAL:
            incident_approve(incident_id=incident.pk, step_index=run.step_index, actor=operator, now=at)
        elif run.status == StepStatus.PENDING:
            tick(incident, at=at)
        elif run.status == StepStatus.WAITING and not run.executor_done:
            incident_step_complete(incident_id=incident.pk, step_index=run.step_index, actor=operator, now=at)
        else:
            StepRun.objects.filter(pk=run.pk).update(next_poll_at=at)
            tick(incident, at=at)
    raise AssertionError(f"{incident.key} did not finish: {incident.state} {incident.state_reason}")


def test_the_ticket_executor_opens_the_providers_ticket_and_waits_for_their_answer(desk, operator, api):
    integration, receiver = desk
    node, incident = _hosted()
    assert incident.workflow.slug == "hosted-hardware-ticket"
    answered = []

    def outside_world(run, at):
        outbox_deliver_due(inline=True)  # the delivery worker
        if run.kind == "await_external" and not answered:
            ticket = Ticket.objects.get(incident_id=incident.pk)
            response = _inbound(api, integration, {"id": "desk-1", "ticket": ticket.key, "state": "acknowledged",
                                                   "author": "Hostco NOC"})
            assert response.status_code == 200, response.json()
            reboot(node, at=at)  # the provider swapped the GPU and the server came back clean
            _inbound(api, integration, {"id": "desk-2", "ticket": ticket.key, "state": "resolved",
                                        "comment": "hardware replaced: GPU 3 swapped"})
            answered.append(True)

    drive(incident, operator, node, at=T0, on_ticket_step=outside_world)
    outbox_deliver_due(inline=True)
    incident.refresh_from_db()
    assert incident.state == IncidentState.RESOLVED, incident.state_reason

    ticket = Ticket.objects.get(incident_id=incident.pk)
    assert ticket.key == f"fleet-incident-{incident.key}" and ticket.integration == integration
    assert ticket.state == "resolved" and ticket.external_id == f"T-{ticket.key}"
    opened = StepRun.objects.get(incident=incident, kind="open_ticket")
    assert opened.executor == "ticket" and opened.status == "done"
    assert opened.output["tickets"][0]["external_id"] == ticket.external_id
    waited = StepRun.objects.get(incident=incident, kind="await_external")
    assert waited.status == "done" and "resolved — hardware replaced: GPU 3 swapped" in waited.message
    assert waited.waiting_on == "provider"

    # What the desk received: the provider ticket (with serials, log lines and the ask), updates, the close.
    actions = [e["fleetaction"] for e in receiver.app.events]
    # The provider resolved their ticket themselves: nothing more is sent to it (no comments on a closed ticket).
    assert actions[0] == "open" and "update" in actions and "resolve" not in actions
    first = receiver.app.events[0]
    assert first["type"] == "io.gpufleet.ticket.requested" and first["subject"] == ticket.key
    body = first["data"]["body"]
    assert f"Incident {incident.key}" in body and "We ask for: on-site inspection" in body
    assert "serial" in body and "[xid 79]" in body
    assert first["id"] == opened.idempotency_key  # the step's idempotency key is the message's dedup key
    assert all(count == 1 for count in receiver.app.accepted.values())

    # The provider's answers are on the incident's timeline.
    notes = [e.message for e in incident.timeline.filter(kind=TimelineKind.NOTE)]
    assert any("hostco-desk ticket" in n and "acknowledged (Hostco NOC)" in n for n in notes)
    assert any("resolved — hardware replaced: GPU 3 swapped" in n for n in notes)


def test_a_repeated_start_writes_no_second_ticket(desk, operator):
    node, incident = _hosted()
    run = None
    for _ in range(10):
        incident.refresh_from_db()
        run = current_run(incident)
        if run.kind == "open_ticket":
            break
        if run.status == StepStatus.PENDING:
            tick(incident, at=T0)
        else:
            incident_step_complete(incident_id=incident.pk, step_index=run.step_index, actor=operator, now=T0)
    from fleet.integrations.remediation import TicketExecutor
    from fleet.remediation.services.engine import step_context

    tick(incident, at=T0)
    run.refresh_from_db()
    ctx = step_context(incident, run)
    TicketExecutor().start(ctx)  # a worker died after start() and the engine calls it again with the same key
    assert OutboxMessage.objects.filter(action=TicketAction.OPEN).count() == 1
    assert Ticket.objects.count() == 1


def test_an_incident_opened_event_opens_the_ticket_and_the_step_reuses_it(make_integration, server, operator):
    receiver = server(WebhookReceiver(SECRET))
    make_integration("webhook", {"url": receiver.url}, {"signing_secret": SECRET}, name="desk",
                     rules=[{"responsible_parties": ["provider"],
                             "event_kinds": ["incident.opened", "ticket.requested"]}])
    node, incident = _hosted()
    opening = OutboxMessage.objects.get(action=TicketAction.OPEN)
    assert opening.event_kind == EventKind.INCIDENT_OPENED
    outbox_deliver_due(inline=True)

    def provider_fixes_it(run, at):
        if run.kind == "await_external":
            reboot(node, at=at)
            ticket = Ticket.objects.get()
            inbound_receive(integration=ticket.integration, headers={}, payload={
                "id": f"fixed-{ticket.pk}", "ticket": ticket.key, "state": "resolved", "comment": "fixed"})

    drive(incident, operator, node, at=T0, on_ticket_step=provider_fixes_it)
    incident.refresh_from_db()
    assert incident.state == IncidentState.RESOLVED, incident.state_reason
    assert OutboxMessage.objects.filter(action=TicketAction.OPEN).count() == 1
    assert Ticket.objects.count() == 1


def test_without_a_routed_integration_the_step_fails_saying_what_to_do(operator):
    node, incident = _hosted()
    for _ in range(10):
        incident.refresh_from_db()
        run = current_run(incident)
        if run.kind == "open_ticket" and run.status != StepStatus.PENDING:
            break
        if run.status == StepStatus.PENDING:
            tick(incident, at=T0)
        else:
            incident_step_complete(incident_id=incident.pk, step_index=run.step_index, actor=operator, now=T0)
    run = StepRun.objects.get(incident=incident, kind="open_ticket")
    assert run.status == StepStatus.FAILED
    assert "No integration is routed ticket.requested" in run.message
    assert not OutboxMessage.objects.exists()


def test_a_dry_run_writes_nothing(desk, operator):
    node, incident = _hosted(dry_run=True)
    assert incident.dry_run
    for _ in range(10):
        incident.refresh_from_db()
        run = current_run(incident)
        if run.kind == "open_ticket" and run.status != StepStatus.PENDING:
            break
        tick(incident, at=T0)
    run = StepRun.objects.get(incident=incident, kind="open_ticket")
    assert run.status == "done" and run.message == "dry run: would open a ticket with hostco-desk"
    assert not OutboxMessage.objects.filter(action=TicketAction.OPEN).exists()


def test_incident_rows_roll_back_with_the_incident(make_integration):
    make_integration("webhook", {"url": "https://desk.example"}, {"signing_secret": SECRET}, rules=[{}])
    with pytest.raises(RuntimeError), transaction.atomic():
        _hosted()
        assert OutboxMessage.objects.filter(event_kind=EventKind.INCIDENT_OPENED).exists()
        raise RuntimeError("the intake failed after opening the incident")
    assert not OutboxMessage.objects.exists() and not Ticket.objects.exists()


def test_a_tripped_breaker_is_a_notification_and_closing_resolves(make_integration):
    chat = make_integration("webhook", {"url": "https://chat.example"}, {"signing_secret": SECRET}, name="chat",
                            rules=[{"event_kinds": ["incident.opened", "circuit_breaker.tripped", "incident.closed"]}])
    node, incident = _hosted()
    tripped = incident_outbox_write(event=IncidentEvent(
        kind=IncidentEventKind.BREAKER_TRIPPED, incident_id=incident.pk, incident_key=incident.key,
        state=incident.state, at=timezone.now(), detail={"scope": "pool"}))
    assert [(m.action, m.ticket) for m in tripped] == [(TicketAction.NOTIFY, None)]
    closed = incident_outbox_write(event=IncidentEvent(
        kind=IncidentEventKind.CLOSED, incident_id=incident.pk, incident_key=incident.key, state="resolved",
        at=timezone.now()))
    assert [m.action for m in closed] == [TicketAction.RESOLVE]
    assert closed[0].ticket == Ticket.objects.get(integration=chat)
    from fleet.integrations.services.delivery import message_render

    assert message_render(tripped[0], timezone.now())["title"].startswith("Circuit breaker tripped")


def test_an_operator_acknowledges_the_pagerduty_alert(make_integration, server, operator_api, viewer_api):
    pd = server(PagerDutyEvents("R0UTINGKEY"))
    integration = make_integration("pagerduty", {}, {"routing_key": "R0UTINGKEY"}, name="pd",
                                   rules=[{"event_kinds": ["incident.opened"]}])
    from fleet.integrations.models import Integration

    Integration.objects.filter(pk=integration.pk).update(config={"events_url": pd.url + "/v2/enqueue"})
    node, incident = _hosted(executors=())
    outbox_deliver_due(inline=True)
    ticket = Ticket.objects.get()
    assert pd.app.alerts[ticket.key]["status"] == "triggered"
    assert viewer_api.post(f"/api/v1/tickets/{ticket.pk}/acknowledge/").status_code == 403
    response = operator_api.post(f"/api/v1/tickets/{ticket.pk}/acknowledge/", {"note": "looking at it"},
                                 format="json")
    assert response.status_code == 202 and response.json()["action"] == "acknowledge"
    outbox_deliver_due(inline=True)
    assert pd.app.alerts[ticket.key]["status"] == "acknowledged"
    ticket.refresh_from_db()
    assert ticket.state == "acknowledged"
    assert OutboxMessage.objects.get(action=TicketAction.ACKNOWLEDGE).state == MessageState.DELIVERED
    Ticket.objects.update(state="resolved")
    response = operator_api.post(f"/api/v1/tickets/{ticket.pk}/acknowledge/")
    assert response.status_code == 409 and response.json()["error"]["code"] == "ticket_closed"
