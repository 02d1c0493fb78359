"""Every write audited whatever its entry point: admin, API, services, tasks (fleet.core.audit)."""

import json

import pytest
from django.apps import apps
from django.db import transaction
from django.test import Client

from fleet.billing.models import BillingPlan
from fleet.core.audit import MASK, SECRET_AFTER, SECRET_BEFORE, audit_context, audited_models, exempt_models
from fleet.core.models import AuditEntry
from fleet.core.services import audit_record
from fleet.inventory.models import Node, Provider
from tests.billing.factories import BillingPlanFactory
from tests.factories import NodeFactory, ProviderFactory, UserFactory

pytestmark = pytest.mark.django_db

FLEET_APPS = [c for c in apps.get_app_configs() if c.name.startswith("fleet.")]


def _admin_form_data(response) -> dict:
    """What the admin's change form would post back unchanged: every field's current value, inline management
    forms included."""
    data = {}
    form = response.context["adminform"].form
    for name, field in form.fields.items():
        value = field.prepare_value(form[name].value())
        if isinstance(value, bool):
            if value:
                data[name] = "on"
        elif isinstance(value, list | tuple):
            data[name] = [str(v) for v in value]
        else:
            data[name] = "" if value is None else value
    for inline in response.context["inline_admin_formsets"]:
        management = inline.formset.management_form
        for name in management.fields:
            data[management.add_prefix(name)] = management[name].value()
    return data


@pytest.fixture
def staff_client():
    user = UserFactory(username="root", role="admin", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(user)
    return client


def test_an_admin_edit_shows_in_the_audit_api_with_actor_before_and_after(staff_client, admin_api):
    node = NodeFactory(state="active", labels={"team": "ml"})
    url = f"/admin/inventory/node/{node.pk}/change/"
    data = _admin_form_data(staff_client.get(url))
    data.update(state="cordoned", labels=json.dumps({"team": "infra"}))

    response = staff_client.post(url, data)
    assert response.status_code == 302, response.context["adminform"].form.errors

    entries = admin_api.get("/api/v1/audit/", {"object_type": "inventory.node", "object_id": node.pk,
                                               "action": "update"}).json()["results"]
    assert len(entries) == 1
    entry = entries[0]
    assert entry["actor_label"] == "root"
    assert entry["actor"] == UserFactory._meta.model.objects.get(username="root").pk
    assert entry["before"] == {"state": "active", "labels": {"team": "ml"}}
    assert entry["after"] == {"state": "cordoned", "labels": {"team": "infra"}}
    assert entry["object_repr"] == str(node)


def test_an_admin_delete_keeps_the_row_in_the_log(staff_client):
    plan = BillingPlanFactory(rate="2.50")
    response = staff_client.post(f"/admin/billing/billingplan/{plan.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not BillingPlan.objects.filter(pk=plan.pk).exists()
    entry = AuditEntry.objects.get(object_type="billing.billingplan", object_id=str(plan.pk), action="delete")
    assert (entry.actor_label, entry.after) == ("root", None)
    assert entry.before["rate"] == "2.5000" or float(entry.before["rate"]) == 2.5


def test_an_api_edit_records_exactly_one_entry(operator_api):
    provider = ProviderFactory()
    before = AuditEntry.objects.count()
    response = operator_api.patch(f"/api/v1/providers/{provider.pk}/", {"support_contact": "noc@example.com"},
                                  format="json")
    assert response.status_code == 200, response.content
    assert AuditEntry.objects.count() == before + 1
    entry = AuditEntry.objects.latest("id")
    assert (entry.action, entry.actor_label, entry.object_type) == ("update", "operator-user", "inventory.provider")
    assert entry.after == {"support_contact": "noc@example.com"}


def test_outside_a_request_the_actor_is_system_and_a_service_may_name_it():
    provider = ProviderFactory()
    created = AuditEntry.objects.get(object_type="inventory.provider", object_id=str(provider.pk))
    assert (created.action, created.actor, created.actor_label) == ("create", None, "system")

    with audit_context(actor="enrolment:fe_abc", note="imported"):
        Provider.objects.filter(pk=provider.pk).first().delete()
    deleted = AuditEntry.objects.get(object_type="inventory.provider", action="delete")
    assert (deleted.actor_label, deleted.note, deleted.before["name"]) == ("enrolment:fe_abc", "imported",
                                                                          provider.name)


def test_an_update_that_changes_nothing_is_not_recorded_unless_noted():
    node = NodeFactory()
    count = AuditEntry.objects.count()
    node.save()
    assert AuditEntry.objects.count() == count
    with audit_context(note="checked by hand"):
        node.save()
    entry = AuditEntry.objects.latest("id")
    assert (entry.action, entry.note, entry.before, entry.after) == ("update", "checked by hand", {}, {})


def test_a_write_that_rolls_back_leaves_no_entry():
    count = AuditEntry.objects.count()
    with pytest.raises(RuntimeError), transaction.atomic():
        ProviderFactory()
        raise RuntimeError
    assert AuditEntry.objects.count() == count


def test_secrets_never_reach_the_log(token_for, admin_api):
    user, _ = token_for("operator")
    token_entry = AuditEntry.objects.get(object_type="accounts.apitoken", action="create")
    assert token_entry.after["key_hash"] == MASK
    assert token_entry.actor_label == user.username
    user_entry = AuditEntry.objects.get(object_type="accounts.user", object_id=str(user.pk), action="create")
    assert user_entry.after["password"] in (MASK, "")

    response = admin_api.patch(f"/api/v1/users/{user.pk}/", {"password": "a-much-better-passphrase-42"},
                               format="json")
    assert response.status_code == 200, response.content
    changed = AuditEntry.objects.get(object_type="accounts.user", object_id=str(user.pk), action="update")
    # A changed secret says that it changed, never with what: not the same before and after, and no hash.
    assert (changed.before, changed.after) == ({"password": SECRET_BEFORE}, {"password": SECRET_AFTER})
    assert "pbkdf2" not in json.dumps(list(AuditEntry.objects.values("before", "after")))


def test_an_action_entry_is_not_doubled_by_the_hooks(operator_api):
    """A service that records an action (here a set-based state change) gets one entry, not two."""
    node = NodeFactory(billing_mode="spot")
    last = AuditEntry.objects.latest("id").pk
    response = operator_api.post(f"/api/v1/nodes/{node.pk}/preempted/", {}, format="json")
    assert response.status_code == 201, response.content
    new = list(AuditEntry.objects.filter(object_type="inventory.node", pk__gt=last))
    assert [(e.action, e.actor_label) for e in new] == [("action", "operator-user")]


def test_audit_record_keeps_its_signature_and_takes_the_request_actor_when_none_is_given():
    node = NodeFactory()
    entry = audit_record(actor=None, action=AuditEntry.Action.ACTION, instance=node, note="cordoned by a runbook")
    assert (entry.actor_label, entry.object_type, entry.object_id, entry.note) == (
        "system", "inventory.node", str(node.pk), "cordoned by a runbook")


def test_every_model_is_audited_or_deliberately_exempt():
    models = {m for config in FLEET_APPS for m in config.get_models()}
    undecided = sorted(m._meta.label for m in models - audited_models() - exempt_models())
    assert undecided == [], "register each in its AppConfig.ready(): audit_register(...) or audit_exempt(...)"
    assert Node in audited_models() and BillingPlan in audited_models()
    assert AuditEntry in exempt_models()

