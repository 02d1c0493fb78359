"""Inbound updates: per-integration endpoint, signature or token, external state onto the ticket's timeline;
unknown, unsigned or badly signed requests are 401 and store nothing."""

import hashlib
import hmac
import json
import time

import pytest

from fleet.integrations.connectors.webhook import sign
from fleet.integrations.models import Ticket, TicketUpdate
from fleet.integrations.signals import ticket_updated

from .conftest import raise_xid_79

pytestmark = pytest.mark.django_db


def _post(api, integration, payload, **headers):
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return api.post(f"/api/v1/inbound/{integration.inbound_id}/", body, content_type="application/json",
                    **{f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()})


@pytest.fixture
def webhook(make_integration, hosted_node):
    integration = make_integration("webhook", {"url": "https://desk.example/hook"},
                                   {"signing_secret": "out-secret", "inbound_secret": "in-secret"}, rules=[{}])
    raise_xid_79(hosted_node)
    return integration


def _signed(payload: dict, secret="in-secret", at=None) -> tuple[bytes, str]:
    body = json.dumps(payload).encode()
    return body, sign(secret, body, int(at or time.time()))


def test_a_signed_update_lands_on_the_tickets_timeline(api, webhook):
    ticket = Ticket.objects.get()
    seen = []
    ticket_updated.connect(lambda sender, **kw: seen.append(kw["update"].state), weak=False, dispatch_uid="t")
    try:
        body, signature = _signed({"id": "evt-1", "ticket": ticket.key, "state": "acknowledged",
                                   "comment": "on it", "author": "Hostco NOC", "external_id": "HC-991",
                                   "external_url": "https://desk.example/HC-991"})
        response = _post(api, webhook, body, **{"X-Fleet-Signature": signature})
    finally:
        ticket_updated.disconnect(dispatch_uid="t")
    assert response.status_code == 200, response.json()
    assert response.json() == {"stored": 1, "duplicates": 0, "unknown_ticket": 0, "ignored": 0}
    ticket.refresh_from_db()
    assert (ticket.state, ticket.external_id, ticket.external_url) == ("acknowledged", "HC-991",
                                                                        "https://desk.example/HC-991")
    update = ticket.updates.get(source="inbound")
    assert (update.comment, update.author, update.external_event_id) == ("on it", "Hostco NOC", "evt-1")
    assert seen == ["acknowledged"]
    # The same event replayed (inside the window) is stored once.
    response = _post(api, webhook, body, **{"X-Fleet-Signature": signature})
    assert response.json()["duplicates"] == 1 and TicketUpdate.objects.filter(source="inbound").count() == 1


def test_a_comment_and_resolution_with_a_cloudevent_body(api, webhook):
    ticket = Ticket.objects.get()
    event = {"specversion": "1.0", "id": "evt-7", "source": "https://desk.example", "type": "desk.ticket.updated",
             "subject": ticket.key, "data": {"state": "resolved", "comment": "hardware replaced: GPU 3 swapped"}}
    body, signature = _signed(event)
    assert _post(api, webhook, body, **{"X-Fleet-Signature": signature}).status_code == 200
    ticket.refresh_from_db()
    assert ticket.state == "resolved" and ticket.resolved_at is not None
    assert ticket.updates.get(source="inbound").comment == "hardware replaced: GPU 3 swapped"


@pytest.mark.parametrize("how", ["unsigned", "wrong secret", "tampered", "stale", "wrong token"])
def test_a_bad_signature_is_401_and_stores_nothing(api, webhook, how):
    ticket = Ticket.objects.get()
    payload = {"id": "evt-9", "ticket": ticket.key, "state": "resolved"}
    body, signature = _signed(payload)
    headers = {"X-Fleet-Signature": signature}
    if how == "unsigned":
        headers = {}
    elif how == "wrong secret":
        headers = {"X-Fleet-Signature": _signed(payload, secret="guess")[1]}
    elif how == "tampered":
        body = body.replace(b"resolved", b"in_progress")
    elif how == "stale":
        headers = {"X-Fleet-Signature": _signed(payload, at=time.time() - 3600)[1]}
    else:
        headers = {"Authorization": "Bearer fit_not-the-token"}
    response = _post(api, webhook, body, **headers)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "inbound_unauthorized"
    assert response["WWW-Authenticate"].startswith("Bearer")
    ticket.refresh_from_db()
    assert ticket.state == "opening" and not TicketUpdate.objects.exists()


def test_an_unknown_integration_is_401_and_a_disabled_one_403(api, webhook):
    webhook.inbound_id = "does-not-exist"
    assert _post(api, webhook, {"id": "x", "ticket": "y", "state": "resolved"}).status_code == 401
    webhook.refresh_from_db()
    webhook.enabled = False
    webhook.save()
    body, signature = _signed({"id": "evt", "ticket": "k", "state": "resolved"})
    assert _post(api, webhook, body, **{"X-Fleet-Signature": signature}).status_code == 403


def test_the_integration_token_works_for_systems_that_cannot_sign(api, webhook):
    ticket = Ticket.objects.get()
    payload = {"id": "n-1", "ticket": ticket.key, "comment": "engineer dispatched"}
    assert _post(api, webhook, payload, **{"X-Fleet-Token": webhook.inbound_token}).status_code == 200
    assert _post(api, webhook, payload | {"id": "n-2"},
                 Authorization=f"Bearer {webhook.inbound_token}").json()["stored"] == 1
    assert ticket.updates.filter(source="inbound").count() == 2


@pytest.mark.parametrize(("payload", "field"), [
    ({"ticket": "k", "state": "resolved"}, "id"),
    ({"id": "e"}, "ticket"),
    ({"id": "e", "ticket": "k", "state": "exploded"}, "state"),
    ([1, 2], "body"),
])
def test_an_unreadable_update_is_a_400_naming_the_field(api, webhook, payload, field):
    response = _post(api, webhook, payload, **{"X-Fleet-Token": webhook.inbound_token})
    assert response.status_code == 400 and field in response.json()["error"]["fields"], response.json()
    assert not TicketUpdate.objects.exists()


def test_an_update_for_a_ticket_we_do_not_know_is_acknowledged_and_not_stored(api, webhook):
    response = _post(api, webhook, {"id": "e", "ticket": "someone-elses", "state": "resolved"},
                     **{"X-Fleet-Token": webhook.inbound_token})
    assert response.json() == {"stored": 0, "duplicates": 0, "unknown_ticket": 1, "ignored": 0}


# --- Native webhooks of the ticketing systems --------------------------------------------------------------------

def test_pagerduty_v3_webhook_signed_with_the_subscription_secret(api, make_integration, hosted_node):
    pd = make_integration("pagerduty", {}, {"routing_key": "K", "inbound_secret": "pd-webhook-secret"},
                          rules=[{}])
    raise_xid_79(hosted_node)
    ticket = Ticket.objects.get()
    acknowledged = {"event": {"id": "01DEN", "event_type": "incident.acknowledged", "occurred_at":
                              "2026-12-01T12:05:00Z", "agent": {"summary": "Alice Oncall"},
                              "data": {"id": "Q1ABC", "type": "incident", "incident_key": ticket.key,
                                       "html_url": "https://acme.pagerduty.com/incidents/Q1ABC"}}}
    body = json.dumps(acknowledged).encode()
    good = "v1=" + hmac.new(b"pd-webhook-secret", body, hashlib.sha256).hexdigest()
    assert _post(api, pd, body, **{"X-PagerDuty-Signature": f"v1=deadbeef, {good}"}).status_code == 200
    ticket.refresh_from_db()
    assert (ticket.state, ticket.external_id) == ("acknowledged", "Q1ABC")
    note = {"event": {"id": "01DEO", "event_type": "incident.annotated", "agent": {"summary": "Alice"},
                      "data": {"incident": {"id": "Q1ABC"}, "content": "reseated the GPU"}}}
    body = json.dumps(note).encode()
    signature = "v1=" + hmac.new(b"pd-webhook-secret", body, hashlib.sha256).hexdigest()
    assert _post(api, pd, body, **{"X-PagerDuty-Signature": signature}).json()["stored"] == 1
    assert ticket.updates.filter(source="inbound").last().comment == "reseated the GPU"
    assert _post(api, pd, body, **{"X-PagerDuty-Signature": "v1=" + "0" * 64}).status_code == 401


def test_jira_webhook_signed_with_x_hub_signature(api, make_integration, hosted_node):
    jira = make_integration("jira", {"site_url": "https://acme.atlassian.net", "project_key": "OPS"},
                            {"email": "a@b.c", "api_token": "t", "inbound_secret": "jira-secret"}, rules=[{}])
    raise_xid_79(hosted_node)
    ticket = Ticket.objects.get()
    Ticket.objects.update(external_id="OPS-7")
    done = {"timestamp": 1764590000000, "webhookEvent": "jira:issue_updated", "user": {"displayName": "Bob"},
            "issue": {"id": "10007", "key": "OPS-7", "fields": {"labels": ["gpu-fleet", ticket.key],
                                                                "status": {"name": "Done",
                                                                           "statusCategory": {"key": "done"}}}}}
    body = json.dumps(done).encode()
    signature = "sha256=" + hmac.new(b"jira-secret", body, hashlib.sha256).hexdigest()
    response = _post(api, jira, body, **{"X-Hub-Signature": signature, "X-Atlassian-Webhook-Identifier": "w-1"})
    assert response.json()["stored"] == 1
    ticket.refresh_from_db()
    assert ticket.state == "resolved"
    assert _post(api, jira, body, **{"X-Hub-Signature": "sha256=bad"}).status_code == 401


def test_opsgenie_and_servicenow_post_with_the_token(api, make_integration, hosted_node):
    genie = make_integration("opsgenie", {}, {"api_key": "k"}, rules=[{}], name="genie")
    raise_xid_79(hosted_node)
    alias = Ticket.objects.get(integration=genie).key
    body = {"action": "Acknowledge", "alert": {"alertId": "a-1", "alias": alias, "username": "carol",
                                               "updatedAt": 1764590000}}
    assert _post(api, genie, body, Authorization=f"Bearer {genie.inbound_token}").json()["stored"] == 1
    assert Ticket.objects.get(integration=genie).state == "acknowledged"
    assert _post(api, genie, body).status_code == 401  # Opsgenie cannot sign: no token, no entry

    snow = make_integration("servicenow", {"instance_url": "https://x.service-now.com"}, {"oauth_token": "t"},
                            name="snow")
    Ticket.objects.create(integration=snow, key="fleet-incident-x", subject_kind="finding", subject_ref="r",
                          opened_at=Ticket.objects.get(integration=genie).opened_at, external_id="abc123")
    update = {"sys_id": "abc123", "correlation_id": "fleet-incident-x", "state": "2",
              "work_notes": "vendor engineer on site", "sys_updated_on": "2026-12-01 12:00:00",
              "sys_updated_by": "dave"}
    assert _post(api, snow, update, **{"X-Fleet-Token": snow.inbound_token}).json()["stored"] == 1
    ticket = Ticket.objects.get(integration=snow)
    assert ticket.state == "in_progress"
    assert ticket.updates.get().comment == "vendor engineer on site"
