"""What the console's users page asks of the API beyond plain edits: admin-issued password reset links (the admin
gets a single-use link, never a password; the user sets a new password with it without a session; everything
else is refused with the field named), deleting users, and no admin locking themselves out."""

import time
from urllib.parse import parse_qs

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from fleet.accounts.models import APIToken, User
from fleet.accounts.services import api_token_create
from fleet.core.models import AuditEntry
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

NEW_PASSWORD = "a-fresh-long-password-83"
RESET = "/api/v1/auth/password-reset/"


def _as(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user=user)
    return client


def _link(admin, user) -> dict:
    response = _as(admin).post(f"/api/v1/users/{user.pk}/password-reset/")
    assert response.status_code == 200, response.content
    body = response.json()
    path, fragment = body["path"].split("#", 1)
    assert path == "/reset-password"
    params = {k: v[0] for k, v in parse_qs(fragment).items()}
    return {"uid": params["uid"], "token": params["token"], "expires_at": body["expires_at"]}


def _csrf_client() -> tuple[APIClient, str]:
    client = APIClient(enforce_csrf_checks=True)
    return client, client.get("/api/v1/auth/session/").cookies["csrftoken"].value


@pytest.fixture
def admin():
    return UserFactory(username="the-admin", role="admin", is_staff=True)


@pytest.fixture
def alice():
    user = UserFactory(username="alice", role="operator")
    user.set_password("alice-old-password-1")
    user.save()
    return user


def test_the_link_sets_a_new_password_once_and_revokes_tokens(admin, alice):
    token, _ = api_token_create(user=alice, name="ci")
    link = _link(admin, alice)
    assert alice.username not in link["token"]
    issued = AuditEntry.objects.get(object_type="accounts.user", object_id=str(alice.pk), action="action")
    assert issued.actor_label == "the-admin" and "reset link issued" in issued.note
    assert link["token"] not in issued.note

    client, csrf = _csrf_client()
    body = {"uid": link["uid"], "token": link["token"], "password": NEW_PASSWORD}
    response = client.post(RESET, body, format="json", HTTP_X_CSRFTOKEN=csrf)
    assert response.status_code == 204, response.content
    alice.refresh_from_db()
    assert alice.check_password(NEW_PASSWORD)
    assert not APIToken.objects.get(pk=token.pk).is_active
    changes = AuditEntry.objects.filter(object_type="accounts.user", object_id=str(alice.pk), action="update",
                                        pk__gt=issued.pk)
    assert [(e.actor_label, e.after) for e in changes] == [("alice", {"password": "[changed]"})], \
        [(e.actor_label, e.before, e.after, e.note) for e in changes]

    again = client.post(RESET, {**body, "password": "yet-another-password-99"}, format="json", HTTP_X_CSRFTOKEN=csrf)
    assert again.status_code == 400
    assert "token" in again.json()["error"]["fields"]
    alice.refresh_from_db()
    assert alice.check_password(NEW_PASSWORD)


def test_a_weak_password_is_named_and_the_link_still_works(admin, alice):
    link = _link(admin, alice)
    client, csrf = _csrf_client()
    weak = client.post(RESET, {"uid": link["uid"], "token": link["token"], "password": "123"}, format="json",
                       HTTP_X_CSRFTOKEN=csrf)
    assert weak.status_code == 400
    assert "password" in weak.json()["error"]["fields"]
    ok = client.post(RESET, {"uid": link["uid"], "token": link["token"], "password": NEW_PASSWORD}, format="json",
                     HTTP_X_CSRFTOKEN=csrf)
    assert ok.status_code == 204


@pytest.mark.parametrize("tamper", ["token", "uid"])
def test_a_tampered_link_is_refused(admin, alice, tamper):
    link = _link(admin, alice)
    body = {"uid": link["uid"], "token": link["token"], "password": NEW_PASSWORD}
    body[tamper] = "x" + body[tamper][1:]
    client, csrf = _csrf_client()
    response = client.post(RESET, body, format="json", HTTP_X_CSRFTOKEN=csrf)
    assert response.status_code == 400
    assert "token" in response.json()["error"]["fields"]
    alice.refresh_from_db()
    assert alice.check_password("alice-old-password-1")


def test_the_link_needs_the_csrf_token(admin, alice):
    link = _link(admin, alice)
    client = APIClient(enforce_csrf_checks=True)
    response = client.post(RESET, {"uid": link["uid"], "token": link["token"], "password": NEW_PASSWORD},
                           format="json")
    assert response.status_code == 403
    alice.refresh_from_db()
    assert alice.check_password("alice-old-password-1")


def test_an_expired_link_is_refused(admin, alice):
    with override_settings(PASSWORD_RESET_TIMEOUT=0):
        link = _link(admin, alice)
        client, csrf = _csrf_client()
        time.sleep(1.1)
        response = client.post(RESET, {"uid": link["uid"], "token": link["token"], "password": NEW_PASSWORD},
                               format="json", HTTP_X_CSRFTOKEN=csrf)
    assert response.status_code == 400
    assert "token" in response.json()["error"]["fields"]


def test_only_admins_issue_links_and_only_superusers_for_superusers(admin, alice):
    operator = UserFactory(username="op", role="operator")
    assert _as(operator).post(f"/api/v1/users/{alice.pk}/password-reset/").status_code == 403
    root = User.objects.create_superuser(username="root", password="root-pw-for-tests-1", role="admin")
    refused = _as(admin).post(f"/api/v1/users/{root.pk}/password-reset/")
    assert refused.status_code == 403
    assert "superuser" in refused.json()["error"]["message"]
    assert _as(root).post(f"/api/v1/users/{alice.pk}/password-reset/").status_code == 200


def test_no_link_for_a_deactivated_user(admin, alice):
    alice.is_active = False
    alice.save()
    response = _as(admin).post(f"/api/v1/users/{alice.pk}/password-reset/")
    assert response.status_code == 403
    assert "deactivated" in response.json()["error"]["message"]


def test_an_admin_deletes_a_user_but_not_themselves(admin, alice):
    mine = _as(admin).delete(f"/api/v1/users/{admin.pk}/")
    assert mine.status_code == 403
    assert "your own account" in mine.json()["error"]["message"]
    assert User.objects.filter(pk=admin.pk).exists()
    assert _as(UserFactory(username="op2", role="operator")).delete(f"/api/v1/users/{alice.pk}/").status_code == 403
    assert _as(admin).delete(f"/api/v1/users/{alice.pk}/").status_code == 204
    assert not User.objects.filter(pk=alice.pk).exists()
    assert AuditEntry.objects.filter(action="delete", object_type="accounts.user", object_id=str(alice.pk)).exists()


@pytest.mark.parametrize("change", [{"is_active": False}, {"role": "operator"}])
def test_an_admin_cannot_lock_themselves_out(admin, change):
    response = _as(admin).patch(f"/api/v1/users/{admin.pk}/", change, format="json")
    assert response.status_code == 403
    assert "ask another admin" in response.json()["error"]["message"]
    admin.refresh_from_db()
    assert (admin.is_active, admin.role) == (True, "admin")
    assert _as(admin).patch(f"/api/v1/users/{admin.pk}/", {"email": "me@example.com"}, format="json").status_code == 200
