"""Each connector against a local server that behaves like the real API."""

import email
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from fleet.integrations.choices import AttemptOutcome, MessageState, TicketAction
from fleet.integrations.models import OutboxMessage, Ticket
from fleet.integrations.services.delivery import message_deliver
from fleet.integrations.services.outbox import integration_test_message_write

from .conftest import raise_xid_79, resolve_xid
from .fakes import FakeSMTP, Jira, Opsgenie, PagerDutyEvents, Scripted, ServiceNow, SlackWebhook

pytestmark = pytest.mark.django_db


def _deliver_all(now=None):
    now = now or timezone.now()
    outcomes = []
    for message in OutboxMessage.objects.filter(state__in=["pending", "retrying"]).order_by("id"):
        outcomes.append(message_deliver(message_id=message.pk, now=max(now, message.next_attempt_at)))
    return outcomes


def _point_at(integration, **config):
    """Aim a validated integration at the local fake (the real APIs are https only; the fakes are plain http)."""
    from fleet.integrations.models import Integration

    Integration.objects.filter(pk=integration.pk).update(config={**integration.config, **config})


def _hook_at(integration, url):
    from fleet.core.crypto import encrypt_json as secrets_encrypt
    from fleet.integrations.models import Integration

    Integration.objects.filter(pk=integration.pk).update(secrets_encrypted=secrets_encrypt({"webhook_url": url}))


def _open_and_close(node):
    """Open a ticket for an Xid 79, deliver, resolve the finding, deliver the (held) resolve."""
    now = timezone.now()
    raise_xid_79(node, now=now)
    opened = _deliver_all(now)
    resolve_xid(node, now=now + timedelta(minutes=30))
    closed = _deliver_all(now + timedelta(hours=1))
    return opened, closed


# --- PagerDuty ----------------------------------------------------------------------------------------------------

def test_pagerduty_triggers_and_resolves_one_alert_per_occurrence(make_integration, server, hosted_node):
    api = server(PagerDutyEvents("R0UTINGKEY"))
    make_integration("pagerduty", {"events_url": api.url + "/v2/enqueue"}, {"routing_key": "R0UTINGKEY"},
                     rules=[{}])
    assert _open_and_close(hosted_node) == (["delivered"], ["delivered"])
    ticket = Ticket.objects.get()
    trigger, resolve = api.app.events
    assert trigger["event_action"] == "trigger" and trigger["dedup_key"] == ticket.key
    assert trigger["payload"]["severity"] == "critical" and trigger["payload"]["source"] == hosted_node.hostname
    assert trigger["payload"]["custom_details"]["gpus"][0]["serial"] == "1650120000003"
    assert resolve == {"routing_key": "R0UTINGKEY", "event_action": "resolve", "dedup_key": ticket.key}
    assert api.app.alerts[ticket.key]["status"] == "resolved"
    assert ticket.state == "resolved"


def test_pagerduty_folds_a_resent_trigger_into_the_open_alert(make_integration, server, hosted_node):
    api = server(PagerDutyEvents("R0UTINGKEY"))
    make_integration("pagerduty", {"events_url": api.url + "/v2/enqueue"}, {"routing_key": "R0UTINGKEY"},
                     rules=[{}])
    raise_xid_79(hosted_node)
    message = OutboxMessage.objects.get()
    api.script.append(Scripted(0, delay=0))  # passes through; the request counts
    _deliver_all()
    OutboxMessage.objects.filter(pk=message.pk).update(state=MessageState.RETRYING)  # as if the outcome was lost
    _deliver_all()
    assert len(api.app.alerts) == 1 and api.app.alerts[message.ticket.key]["triggers"] == 2


def test_pagerduty_bad_routing_key_is_dead_lettered_and_429_waits(make_integration, server, admin_user):
    api = server(PagerDutyEvents("R0UTINGKEY"))
    wrong = make_integration("pagerduty", {"events_url": api.url + "/v2/enqueue"}, {"routing_key": "WRONG"})
    message = integration_test_message_write(integration=wrong, actor=admin_user)
    assert message_deliver(message_id=message.pk) == AttemptOutcome.DEAD
    message.refresh_from_db()
    assert message.last_status_code == 400 and "Invalid routing key" in message.last_error

    right = make_integration("pagerduty", {"events_url": api.url + "/v2/enqueue"}, {"routing_key": "R0UTINGKEY"})
    message = integration_test_message_write(integration=right, actor=admin_user)
    api.script.append(Scripted(429, {"Retry-After": "30"}, b'{"status":"throttle event"}'))
    now = timezone.now()
    assert message_deliver(message_id=message.pk, now=now) == AttemptOutcome.RETRY
    message.refresh_from_db()
    assert 30 <= (message.next_attempt_at - now).total_seconds() <= 31
    assert message_deliver(message_id=message.pk, now=message.next_attempt_at) == AttemptOutcome.DELIVERED
    assert [e["event_action"] for e in api.app.events] == ["trigger", "resolve"]  # the test alert, closed again


def test_pagerduty_5xx_is_retried_and_the_routing_key_never_reaches_the_log(make_integration, server, admin_user):
    api = server(PagerDutyEvents("R0UTINGKEY"))
    integration = make_integration("pagerduty", {"events_url": api.url + "/v2/enqueue"},
                                   {"routing_key": "R0UTINGKEY"})
    message = integration_test_message_write(integration=integration, actor=admin_user)
    api.script.append(Scripted(500, body=b"internal error"))
    assert message_deliver(message_id=message.pk) == AttemptOutcome.RETRY
    exchange = message.attempt_log.get().exchanges[0]
    assert "R0UTINGKEY" not in json.dumps(exchange) and '"routing_key": "***"' in exchange["body"]


# --- Opsgenie -----------------------------------------------------------------------------------------------------

def test_opsgenie_creates_notes_and_closes_by_alias(make_integration, server, hosted_node):
    api = server(Opsgenie("genie-key"))
    make_integration("opsgenie", {"api_url": api.url, "tags": ["gpu"]}, {"api_key": "genie-key"}, rules=[{}])
    now = timezone.now()
    raise_xid_79(hosted_node, now=now)
    _deliver_all(now)
    ticket = Ticket.objects.get()
    alert = api.app.alerts[ticket.key]
    assert alert["body"]["priority"] == "P1" and alert["body"]["entity"] == hosted_node.hostname
    assert "GPU 3: NVIDIA H100 80GB HBM3 — serial 1650120000003" in alert["body"]["description"]
    assert api.requests[0].headers["authorization"] == "GenieKey genie-key"
    # A flap inside the hold: the held close is cancelled, a note goes to the same alert.
    resolve_xid(hosted_node, now=now + timedelta(minutes=30))
    raise_xid_79(hosted_node, now=now + timedelta(minutes=31))
    _deliver_all(now + timedelta(minutes=31))
    assert alert["status"] == "open" and len(alert["notes"]) == 1 and len(api.app.alerts) == 1
    resolve_xid(hosted_node, now=now + timedelta(minutes=40))
    _deliver_all(now + timedelta(hours=2))
    assert alert["status"] == "closed"


def test_opsgenie_wrong_key_is_401_dead_and_422_is_dead(make_integration, server, admin_user):
    api = server(Opsgenie("genie-key"))
    wrong = make_integration("opsgenie", {"api_url": api.url}, {"api_key": "nope"})
    message = integration_test_message_write(integration=wrong, actor=admin_user)
    assert message_deliver(message_id=message.pk) == AttemptOutcome.DEAD
    message.refresh_from_db()
    assert message.last_status_code == 401 and "nope" not in json.dumps(message.attempt_log.get().exchanges)


# --- ServiceNow ---------------------------------------------------------------------------------------------------

def test_servicenow_creates_an_incident_with_correlation_id_and_resolves_it(make_integration, server, hosted_node):
    api = server(ServiceNow("fleet.bot", "pw"))
    integration = make_integration("servicenow", {"instance_url": "https://example.service-now.com",
                                                  "assignment_group": "GPU"},
                                   {"username": "fleet.bot", "password": "pw"}, rules=[{}])
    _point_at(integration, instance_url=api.url)
    assert _open_and_close(hosted_node) == (["delivered"], ["delivered"])
    ticket = Ticket.objects.get()
    incident = api.app.incidents[ticket.external_id]
    assert incident["correlation_id"] == ticket.key and incident["assignment_group"] == "GPU"
    assert incident["urgency"] == "1" and "serial 1650120000003" in incident["description"]
    assert incident["state"] == "6" and incident["close_code"] == "Solution provided"
    assert ticket.data["number"] == incident["number"] and ticket.external_url.endswith(ticket.external_id)


def test_servicenow_finds_the_incident_an_interrupted_try_created(make_integration, server, hosted_node):
    api = server(ServiceNow("fleet.bot", "pw"))
    integration = make_integration("servicenow", {"instance_url": "https://example.service-now.com"},
                                   {"username": "fleet.bot", "password": "pw"}, rules=[{}])
    _point_at(integration, instance_url=api.url)
    raise_xid_79(hosted_node)
    # The first try gets through but its answer is lost (a 504 from a proxy after the instance created it).
    api.script.append(Scripted(0))
    message = OutboxMessage.objects.get()
    message_deliver(message_id=message.pk)
    assert len(api.app.incidents) == 1
    OutboxMessage.objects.filter(pk=message.pk).update(state=MessageState.RETRYING, next_attempt_at=timezone.now())
    Ticket.objects.update(external_id="")
    assert message_deliver(message_id=message.pk) == AttemptOutcome.DELIVERED
    assert len(api.app.incidents) == 1
    assert Ticket.objects.get().external_id == next(iter(api.app.incidents))


def test_servicenow_needs_credentials_and_401_is_dead(make_integration, server, admin_user):
    api = server(ServiceNow("fleet.bot", "pw"))
    integration = make_integration("servicenow", {"instance_url": "https://example.service-now.com"},
                                   {"username": "fleet.bot", "password": "wrong"})
    _point_at(integration, instance_url=api.url)
    message = integration_test_message_write(integration=integration, actor=admin_user)
    assert message_deliver(message_id=message.pk) == AttemptOutcome.DEAD
    assert OutboxMessage.objects.get(pk=message.pk).last_status_code == 401


def test_servicenow_em_event_mode_sends_events_with_message_key(make_integration, server, hosted_node):
    api = server(ServiceNow("fleet.bot", "pw"))
    integration = make_integration("servicenow", {"instance_url": "https://example.service-now.com",
                                                  "mode": "em_event"}, {"oauth_token": "tok"}, rules=[{}])
    api.app.auth = "Bearer tok"
    _point_at(integration, instance_url=api.url)
    _open_and_close(hosted_node)
    key = Ticket.objects.get().key
    assert [(e["message_key"], e["severity"]) for e in api.app.events] == [(key, "1"), (key, "0")]
    assert api.app.events[0]["node"] == hosted_node.hostname


# --- Jira ---------------------------------------------------------------------------------------------------------

def _jira(make_integration, server, **config):
    api = server(Jira("bot@example.com", "api-token", project="OPS"))
    integration = make_integration("jira", {"site_url": "https://example.atlassian.net", "project_key": "OPS",
                                            **config}, {"email": "bot@example.com", "api_token": "api-token"},
                                   rules=[{}])
    _point_at(integration, site_url=api.url)
    return api


def test_jira_creates_attaches_comments_and_transitions(make_integration, server, hosted_node):
    api = _jira(make_integration, server)
    now = timezone.now()
    raise_xid_79(hosted_node, now=now)
    _deliver_all(now)
    ticket = Ticket.objects.get()
    issue = api.app.issues[ticket.external_id]
    assert issue["fields"]["labels"] == ["gpu-fleet", ticket.key]
    assert issue["fields"]["summary"].startswith("[CRITICAL] Xid error on ")
    assert issue["fields"]["description"]["type"] == "doc"
    assert [name.rsplit(".", 1)[1] for name in issue["attachments"]] == ["txt", "json"]
    assert ticket.external_url == f"{api.url}/browse/{ticket.external_id}"
    resolve_xid(hosted_node, now=now + timedelta(minutes=30))
    _deliver_all(now + timedelta(hours=1))
    assert issue["category"] == "done" and len(issue["comments"]) == 1
    assert "GPU fleet · " in json.dumps(issue["comments"][0], ensure_ascii=False)


def test_jira_retry_after_a_lost_answer_creates_no_second_issue_or_attachment(make_integration, server,
                                                                              hosted_node):
    api = _jira(make_integration, server)
    raise_xid_79(hosted_node)
    message = OutboxMessage.objects.get()
    # The issue is created and attached, then the worker "dies" before recording: progress is checkpointed.
    message_deliver(message_id=message.pk)
    OutboxMessage.objects.filter(pk=message.pk).update(state=MessageState.RETRYING, progress={})
    Ticket.objects.update(external_id="")
    assert message_deliver(message_id=message.pk) == AttemptOutcome.DELIVERED
    assert len(api.app.issues) == 1
    assert len(next(iter(api.app.issues.values()))["attachments"]) == 2


def test_jira_a_missing_transition_is_dead_and_a_wrong_project_is_400(make_integration, server, hosted_node,
                                                                        admin_user):
    api = _jira(make_integration, server, close_transition="Closed")
    _, closed = _open_and_close(hosted_node)
    assert closed == ["dead"]
    assert "no transition named 'closed'" in OutboxMessage.objects.get(action=TicketAction.RESOLVE).last_error
    assert api.app.issues  # the issue itself exists


def test_jira_429_with_retry_after(make_integration, server, admin_user):
    api = _jira(make_integration, server)
    from fleet.integrations.models import Integration

    message = integration_test_message_write(integration=Integration.objects.get(), actor=admin_user)
    api.script.append(Scripted(429, {"Retry-After": "5"}, b"{}"))
    now = timezone.now()
    assert message_deliver(message_id=message.pk, now=now) == AttemptOutcome.RETRY
    message.refresh_from_db()
    assert 5 <= (message.next_attempt_at - now).total_seconds() <= 6


# --- E-mail -------------------------------------------------------------------------------------------------------

def test_email_sends_the_ticket_body_with_the_evidence_attached_and_threads_replies(make_integration, hosted_node):
    smtp = FakeSMTP(username="mailer", password="mail-pw")
    try:
        make_integration("email", {"to": ["support@hostco.example"], "from_email": "fleet@ops.example",
                                   "smtp_host": "127.0.0.1", "smtp_port": smtp.port, "smtp_security": "none",
                                   "smtp_username": "mailer"}, {"smtp_password": "mail-pw"}, rules=[{}])
        assert _open_and_close(hosted_node) == (["delivered"], ["delivered"])
    finally:
        smtp.close()
    first, second = (email.message_from_bytes(raw) for raw in smtp.messages)
    ticket = Ticket.objects.get()
    assert first["To"] == "support@hostco.example" and first["Subject"].endswith(f"[{ticket.key}]")
    assert first["Message-ID"] == f"<{ticket.key}:open@ops.example>".replace(":", ".")
    parts = list(first.walk())
    body = next(p for p in parts if p.get_content_type() == "text/plain" and not p.get_filename())
    assert "serial 1650120000003" in body.get_payload(decode=True).decode()
    names = [p.get_filename() for p in parts if p.get_filename()]
    assert [n.rsplit(".", 1)[1] for n in names] == ["txt", "json"]
    assert second["In-Reply-To"] == first["Message-ID"] and second["Subject"].startswith("[GPU fleet] Resolved")


def test_email_a_temporary_smtp_failure_is_retried_a_permanent_one_dead(make_integration, admin_user):
    smtp = FakeSMTP()
    try:
        integration = make_integration("email", {"to": ["desk@example.com"], "smtp_host": "127.0.0.1",
                                                 "smtp_port": smtp.port, "smtp_security": "none"})
        smtp.fail_with = 451
        message = integration_test_message_write(integration=integration, actor=admin_user)
        assert message_deliver(message_id=message.pk) == AttemptOutcome.RETRY
        smtp.fail_with = 550
        message = integration_test_message_write(integration=integration, actor=admin_user,
                                                 now=timezone.now() + timedelta(seconds=1))
        assert message_deliver(message_id=message.pk, now=message.created_at) == AttemptOutcome.DEAD
    finally:
        smtp.close()


def test_email_through_djangos_configured_backend(make_integration, admin_user, mailoutbox, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    integration = make_integration("email", {"to": ["desk@example.com"]})
    message = integration_test_message_write(integration=integration, actor=admin_user)
    assert message_deliver(message_id=message.pk) == AttemptOutcome.DELIVERED
    assert mailoutbox[0].subject == "[GPU fleet] GPU fleet: test message"


# --- Slack --------------------------------------------------------------------------------------------------------

def test_slack_posts_a_summary_with_a_console_link(make_integration, server, hosted_node, settings):
    settings.FLEET_CONSOLE_URL = "https://fleet.example"
    api = server(SlackWebhook())
    integration = make_integration("slack", {}, {"webhook_url": "https://hooks.slack.com/services/T/B/X"},
                                   rules=[{}])
    _hook_at(integration, api.url + api.app.path)
    _open_and_close(hosted_node)
    opened, resolved = api.app.messages
    assert opened["text"].startswith(":red_circle: [CRITICAL] Xid error on")
    assert f"<https://fleet.example/nodes/{hosted_node.pk}|Open in the console>" in json.dumps(opened["blocks"])
    assert resolved["text"].startswith(":white_check_mark: Resolved")


def test_slack_errors_map_to_retry_or_dead(make_integration, server, admin_user):
    api = server(SlackWebhook())
    integration = make_integration("slack", {}, {"webhook_url": "https://hooks.slack.com/services/T/B/X"})
    _hook_at(integration, api.url + "/services/T000/B000/GONE")
    message = integration_test_message_write(integration=integration, actor=admin_user)
    assert message_deliver(message_id=message.pk) == AttemptOutcome.DEAD  # 404 no_service
    exchange = OutboxMessage.objects.get(pk=message.pk).attempt_log.get().exchanges[0]
    assert "GONE" not in exchange["url"]  # the hook URL is the credential: redacted in the log
    integration2 = make_integration("slack", {}, {"webhook_url": "https://hooks.slack.com/services/T/B/Y"},
                                    name="slack-2")
    _hook_at(integration2, api.url + api.app.path)
    api.script.append(Scripted(429, {"Retry-After": "3"}, b"rate_limited"))
    message = integration_test_message_write(integration=integration2, actor=admin_user)
    assert message_deliver(message_id=message.pk) == AttemptOutcome.RETRY


# --- Generic webhook (the rest of its behaviour is in test_delivery) ---------------------------------------------

def test_webhook_event_is_a_structured_cloudevent_with_the_evidence(make_integration, server, hosted_node):
    from .fakes import WebhookReceiver

    api = server(WebhookReceiver("sekrit-" + "y" * 20))
    make_integration("webhook", {"url": api.url}, {"signing_secret": "sekrit-" + "y" * 20}, rules=[{}])
    raise_xid_79(hosted_node)
    _deliver_all()
    event = api.app.events[0]
    ticket = Ticket.objects.get()
    assert api.requests[0].headers["content-type"] == "application/cloudevents+json; charset=utf-8"
    assert (event["specversion"], event["type"], event["subject"], event["fleetaction"]) == (
        "1.0", "io.gpufleet.finding.opened", ticket.key, "open")
    assert event["data"]["evidence"]["gpus"][3]["serial"] == "1650120000003"
    assert ticket.external_id == f"T-{ticket.key}"


# --- TLS: a private CA bundle, and a client certificate (mTLS) -----------------------------------------------------

def test_webhook_trusts_a_private_ca_bundle_and_presents_a_client_certificate(make_integration, admin_user,
                                                                               tmp_path):
    from .fakes import FakeServer, ThrowawayCA, WebhookReceiver

    ca = ThrowawayCA()
    secret = "sekrit-" + "z" * 20
    receiver = FakeServer(WebhookReceiver(secret), tls=ca.server_files(tmp_path, require_client_cert=True))
    try:
        client_cert, client_key = ca.issue("fleet-client", client=True)
        trusted = make_integration("webhook", {"url": receiver.url, "ca_bundle": ca.pem},
                                   {"signing_secret": secret, "client_cert": client_cert, "client_key": client_key},
                                   name="mtls")
        message = integration_test_message_write(integration=trusted, actor=admin_user)
        assert message_deliver(message_id=message.pk) == AttemptOutcome.DELIVERED

        untrusted = make_integration("webhook", {"url": receiver.url}, {"signing_secret": secret}, name="no-ca")
        message = integration_test_message_write(integration=untrusted, actor=admin_user)
        assert message_deliver(message_id=message.pk) == AttemptOutcome.RETRY
        assert "TLS error" in OutboxMessage.objects.get(pk=message.pk).last_error
        assert len(receiver.app.events) == 1
    finally:
        receiver.close()
