"""The integrations API: configuration (validated, credentials write-only and encrypted), routing rules, the
delivery log with test and retry, tickets, and /metrics."""

import pytest
from django.db import connection
from django.utils import timezone

from fleet.core.models import AuditEntry
from fleet.integrations.choices import MessageState
from fleet.integrations.models import DeliveryAttempt, Integration, OutboxMessage, RoutingRule
from fleet.integrations.services.delivery import message_deliver

from .conftest import raise_xid_79
from .fakes import PagerDutyEvents

pytestmark = pytest.mark.django_db

WEBHOOK = {"name": "oncall-hook", "kind": "webhook", "config": {"url": "https://hooks.example/fleet"},
           "secrets": {"signing_secret": "whsec-super-secret-value"}}


def _create(api, body=None):
    return api.post("/api/v1/integrations/", body or WEBHOOK, format="json")


def test_admin_creates_an_integration_and_the_credentials_never_come_back(admin_api):
    response = _create(admin_api)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert "secrets" not in body and body["secret_names"] == ["signing_secret"]
    assert body["inbound_token"].startswith("fit_") and body["inbound_url"].endswith(
        f"/api/v1/inbound/{Integration.objects.get().inbound_id}/")
    assert body["config"] == {"url": "https://hooks.example/fleet", "include_evidence": True}
    for url in ("/api/v1/integrations/", f"/api/v1/integrations/{body['id']}/"):
        text = admin_api.get(url).content.decode()
        assert "whsec-super-secret-value" not in text and "inbound_token\"" not in text
    # Encrypted at rest: the column holds a Fernet token, not the value.
    with connection.cursor() as cursor:
        cursor.execute("SELECT secrets_encrypted FROM integrations_integration")
        stored = cursor.fetchone()[0]
    assert "whsec-super-secret-value" not in stored and stored.startswith("gAAAAA")
    entry = AuditEntry.objects.get(object_type="integrations.integration", action="create")
    assert "whsec-super-secret-value" not in str(entry.after)


def test_operators_cannot_configure_integrations_but_can_send_a_test(operator_api, admin_api):
    assert _create(operator_api).status_code == 403
    integration_id = _create(admin_api).json()["id"]
    response = operator_api.post(f"/api/v1/integrations/{integration_id}/test/")
    assert response.status_code == 202
    assert response.json()["event_kind"] == "test" and response.json()["state"] == "pending"


@pytest.mark.parametrize(("body", "field"), [
    ({**WEBHOOK, "config": {"url": "not a url"}}, "config.url"),
    ({**WEBHOOK, "config": {"url": "https://x.example", "retries": 3}}, "config.retries"),
    ({**WEBHOOK, "secrets": {}}, "secrets.signing_secret"),
    ({**WEBHOOK, "secrets": {"signing_secret": "s", "api_key": "x"}}, "secrets.api_key"),
    ({**WEBHOOK, "config": {"url": "https://x.example", "ca_bundle": "-----BEGIN CERTIFICATE-----\nnope"}},
     "config.ca_bundle"),
    ({**WEBHOOK, "secrets": {"signing_secret": "s", "client_cert": "not pem"}}, "secrets.client_cert"),
    ({**WEBHOOK, "kind": "fax"}, "kind"),
    ({"name": "pd", "kind": "pagerduty", "config": {}, "secrets": {}}, "secrets.routing_key"),
    ({"name": "sn", "kind": "servicenow", "config": {"instance_url": "http://x.service-now.com"},
      "secrets": {"oauth_token": "t"}}, "config.instance_url"),
    ({"name": "sn", "kind": "servicenow", "config": {"instance_url": "https://x.service-now.com"},
      "secrets": {"username": "u"}}, "secrets.password"),
    ({"name": "jira", "kind": "jira", "config": {"site_url": "https://x.atlassian.net", "project_key": "ops"},
      "secrets": {"email": "a@b.c", "api_token": "t"}}, "config.project_key"),
    ({"name": "mail", "kind": "email", "config": {"to": ["not-an-address"]}}, "config.to.0"),
    ({"name": "slack", "kind": "slack", "config": {}, "secrets": {"webhook_url": "http://hooks.slack.com/x"}},
     "secrets.webhook_url"),
])
def test_bad_configuration_is_a_400_naming_the_field_and_stores_nothing(admin_api, body, field):
    response = _create(admin_api, body)
    assert response.status_code == 400, response.json()
    assert field in response.json()["error"]["fields"], response.json()
    assert not Integration.objects.exists()


def test_updating_secrets_replaces_only_the_names_given(admin_api):
    from fleet.core.crypto import decrypt_json as secrets_decrypt

    created = _create(admin_api, {**WEBHOOK, "secrets": {"signing_secret": "one", "inbound_secret": "two"}}).json()
    url = f"/api/v1/integrations/{created['id']}/"
    response = admin_api.patch(url, {"secrets": {"signing_secret": "three"}, "enabled": False}, format="json")
    assert response.status_code == 200 and response.json()["enabled"] is False
    assert secrets_decrypt(Integration.objects.get().secrets_encrypted) == {"signing_secret": "three",
                                                                            "inbound_secret": "two"}
    response = admin_api.patch(url, {"secrets": {"inbound_secret": ""}}, format="json")
    assert response.json()["secret_names"] == ["signing_secret"]
    assert admin_api.patch(url, {"secrets": {"signing_secret": ""}}, format="json").status_code == 400
    assert admin_api.patch(url, {"kind": "slack"}, format="json").json()["error"]["fields"] == {
        "kind": ["The connector kind cannot change; create a new integration."]}
    assert admin_api.patch(url, {"config": {"url": "ftp://x"}}, format="json").json()["error"]["fields"] == {
        "config.url": ["Enter a valid URL."]}


def test_connector_specs_list_settings_and_credentials(viewer_api):
    specs = {s["kind"]: s for s in viewer_api.get("/api/v1/integrations/connectors/").json()}
    assert set(specs) == {"webhook", "pagerduty", "opsgenie", "servicenow", "jira", "email", "slack"}
    assert specs["pagerduty"]["secrets"] == {"routing_key": True, "inbound_secret": False}
    assert {f["name"] for f in specs["jira"]["config"]} >= {"site_url", "project_key", "close_transition"}
    assert specs["slack"]["keeps_tickets"] is False


def test_routing_rules_validate_their_fields(operator_api, admin_api, hosted_node):
    integration_id = _create(admin_api).json()["id"]
    good = {"integration": integration_id, "match": {"responsible_parties": ["provider"], "severities": ["critical"],
                                                     "providers": [hosted_node.provider_id],
                                                     "event_kinds": ["finding.opened"]}}
    response = operator_api.post("/api/v1/integration-rules/", good, format="json")
    assert response.status_code == 201, response.json()
    bad = [({"colour": ["red"]}, "match.colour"), ({"severities": ["loud"]}, "match.severities"),
           ({"providers": [999999]}, "match.providers"), ({"pools": "1"}, "match.pools"),
           ({"responsible_parties": ["someone"]}, "match.responsible_parties")]
    for match, field in bad:
        response = operator_api.post("/api/v1/integration-rules/", {"integration": integration_id, "match": match},
                                     format="json")
        assert response.status_code == 400 and field in response.json()["error"]["fields"], (match, response.json())
    assert RoutingRule.objects.count() == 1


def test_the_delivery_log_shows_attempts_and_a_dead_message_can_be_retried(admin_api, operator_api, viewer_api,
                                                                           server, hosted_node):
    api = server(PagerDutyEvents("R0UTINGKEY"))
    created = _create(admin_api, {"name": "pd", "kind": "pagerduty", "config": {},
                                  "secrets": {"routing_key": "WRONG"}}).json()
    Integration.objects.filter(pk=created["id"]).update(config={"events_url": api.url + "/v2/enqueue"})
    RoutingRule.objects.create(integration_id=created["id"], match={})
    raise_xid_79(hosted_node)
    message = OutboxMessage.objects.get()
    message_deliver(message_id=message.pk)

    log = viewer_api.get("/api/v1/deliveries/", {"integration": created["id"], "state": "dead"}).json()
    assert log["count"] == 1
    row = log["results"][0]
    assert row["state"] == "dead" and row["last_status_code"] == 400 and row["connector"] == "pagerduty"
    assert row["ticket"]["key"] == message.ticket.key and row["title"].startswith("[CRITICAL] Xid error")
    detail = viewer_api.get(f"/api/v1/deliveries/{message.pk}/").json()
    assert detail["attempt_log"][0]["exchanges"][0]["status"] == 400
    assert "WRONG" not in str(detail["attempt_log"])
    assert viewer_api.post(f"/api/v1/deliveries/{message.pk}/retry/").status_code == 403

    admin_api.patch(f"/api/v1/integrations/{created['id']}/", {"secrets": {"routing_key": "R0UTINGKEY"}},
                    format="json")
    response = operator_api.post(f"/api/v1/deliveries/{message.pk}/retry/")
    assert response.status_code == 200 and response.json()["state"] == "retrying"
    assert message_deliver(message_id=message.pk) == "delivered"
    assert operator_api.post(f"/api/v1/deliveries/{message.pk}/retry/").json()["error"]["code"] == "not_retryable"
    assert AuditEntry.objects.filter(object_type="integrations.outboxmessage", note="retry").count() == 1

    tickets = viewer_api.get("/api/v1/tickets/", {"finding": message.event["finding_id"]}).json()["results"]
    assert [t["key"] for t in tickets] == [message.ticket.key]
    timeline = viewer_api.get(f"/api/v1/tickets/{tickets[0]['id']}/").json()["updates"]
    assert [(u["source"], u["state"]) for u in timeline] == [("outbound", "open")]

    listed = admin_api.get("/api/v1/integrations/").json()[0]
    assert (listed["sent"], listed["failed"], listed["dead_lettered"], listed["backlog"]) == (1, 1, 1, 0)


def test_metrics_count_sent_failed_and_dead_lettered_per_connector(admin_api, api, server, hosted_node):
    created = _create(admin_api, {"name": "pd", "kind": "pagerduty", "config": {},
                                  "secrets": {"routing_key": "K"}}).json()
    fake = server(PagerDutyEvents("K"))
    Integration.objects.filter(pk=created["id"]).update(config={"events_url": fake.url + "/v2/enqueue"})
    from fleet.integrations.services.outbox import integration_test_message_write

    integration = Integration.objects.get()
    ok = integration_test_message_write(integration=integration, actor=None)
    message_deliver(message_id=ok.pk)
    fake.down = True
    failing = integration_test_message_write(integration=integration, actor=None,
                                             now=timezone.now().replace(microsecond=1))
    message_deliver(message_id=failing.pk, now=failing.created_at)
    text = api.get("/metrics").content.decode()
    assert 'fleet_integration_messages_sent_total{connector="pagerduty",integration="pd"} 1.0' in text
    assert 'fleet_integration_messages_failed_total{connector="pagerduty",integration="pd"} 1.0' in text
    assert 'fleet_integration_messages_dead_lettered_total{connector="pagerduty",integration="pd"} 0.0' in text
    assert 'fleet_integration_messages{connector="pagerduty",integration="pd",state="retrying"} 1.0' in text
    assert DeliveryAttempt.objects.count() == 2
    assert OutboxMessage.objects.filter(state=MessageState.RETRYING).count() == 1


def test_credentials_survive_a_key_rotation(admin_api, settings):
    from cryptography.fernet import Fernet
    from django.core.management import call_command

    from fleet.core.crypto import SecretsUnreadable
    from fleet.core.crypto import decrypt_json as secrets_decrypt

    _create(admin_api)
    old = settings.FLEET_ENCRYPTION_KEYS[0]
    new = Fernet.generate_key().decode()
    settings.FLEET_ENCRYPTION_KEYS = [new, old]
    call_command("integrations_reencrypt", stdout=open("/dev/null", "w"))  # noqa: SIM115
    settings.FLEET_ENCRYPTION_KEYS = [new]
    assert secrets_decrypt(Integration.objects.get().secrets_encrypted) == {"signing_secret":
                                                                           "whsec-super-secret-value"}
    settings.FLEET_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    with pytest.raises(SecretsUnreadable):
        secrets_decrypt(Integration.objects.get().secrets_encrypted)


def test_without_an_encryption_key_credentials_are_refused_with_a_clear_503(admin_api, settings):
    settings.FLEET_ENCRYPTION_KEYS = []
    response = _create(admin_api)
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "encryption_not_configured"
    assert "FLEET_ENCRYPTION_KEYS" in response.json()["error"]["message"]
    assert not Integration.objects.exists()
