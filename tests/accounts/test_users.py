import json

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from fleet.accounts.models import APIToken, User
from fleet.accounts.services import api_token_create
from fleet.core.models import AuditEntry
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

NEW_PASSWORD = "another-long-password-71"


def _as(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user=user)
    return client


def _token_client(user) -> APIClient:
    _, key = api_token_create(user=user, name="t")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def _session_client(username: str, password: str = "pw-for-tests-123") -> APIClient:
    client = APIClient()
    assert client.login(username=username, password=password)
    return client


@pytest.fixture
def root():
    return User.objects.create_superuser(username="root", password="root-pw-for-tests-1", role="admin")


@pytest.fixture
def admin():
    return UserFactory(username="plain-admin", role="admin", is_staff=True)


@pytest.mark.parametrize("change", [
    {"password": NEW_PASSWORD},
    {"is_active": False},
    {"role": "viewer"},
    {"email": "attacker@example.com"},
    {"username": "not-root"},
])
def test_admin_cannot_change_a_superuser(admin, root, change):
    response = _as(admin).patch(f"/api/v1/users/{root.pk}/", change, format="json")
    assert response.status_code == 403
    assert "superuser" in response.json()["error"]["message"]
    root.refresh_from_db()
    assert root.check_password("root-pw-for-tests-1")
    assert (root.username, root.is_active, root.role, root.email) == ("root", True, "admin", "")
    assert not AuditEntry.objects.filter(object_type="accounts.user").exists()


def test_admin_cannot_delete_a_superuser(admin, root):
    assert _as(admin).delete(f"/api/v1/users/{root.pk}/").status_code == 403
    assert User.objects.filter(pk=root.pk).exists()


def test_superuser_may_change_a_superuser(root):
    other = User.objects.create_superuser(username="root2", password="x-long-password-12", role="admin")
    response = _as(root).patch(f"/api/v1/users/{other.pk}/", {"password": NEW_PASSWORD}, format="json")
    assert response.status_code == 200
    other.refresh_from_db()
    assert other.check_password(NEW_PASSWORD)


def test_password_change_is_audited_without_the_hash(admin):
    user = UserFactory(username="bob", role="operator")
    old_hash = user.password
    response = _as(admin).patch(f"/api/v1/users/{user.pk}/", {"password": NEW_PASSWORD}, format="json")
    assert response.status_code == 200
    user.refresh_from_db()
    entry = AuditEntry.objects.get(object_type="accounts.user", object_id=str(user.pk))
    assert entry.action == AuditEntry.Action.UPDATE
    assert "password changed" in entry.note
    assert entry.before != entry.after
    assert set(entry.after) == {"password"}
    dumped = json.dumps([entry.before, entry.after, entry.note])
    for secret in (old_hash, user.password, NEW_PASSWORD):
        assert secret not in dumped
    assert entry.actor == admin


def test_profile_change_audits_only_what_changed(admin):
    user = UserFactory(username="carol", role="viewer")
    response = _as(admin).patch(f"/api/v1/users/{user.pk}/", {"role": "operator", "email": ""}, format="json")
    assert response.status_code == 200
    entry = AuditEntry.objects.get(object_type="accounts.user")
    assert (entry.before, entry.after) == ({"role": "viewer"}, {"role": "operator"})


def test_password_change_ends_tokens_and_sessions(admin):
    user = UserFactory(username="dave", role="operator")
    token_client = _token_client(user)
    session_client = _session_client("dave")
    assert token_client.get("/api/v1/nodes/").status_code == 200
    assert session_client.get("/api/v1/nodes/").status_code == 200

    assert _as(admin).patch(f"/api/v1/users/{user.pk}/", {"password": NEW_PASSWORD}, format="json").status_code == 200

    response = token_client.get("/api/v1/nodes/")
    assert response.status_code == 401
    assert "revoked" in response.json()["error"]["message"]
    assert session_client.get("/api/v1/nodes/").status_code in (401, 403)
    revoked = AuditEntry.objects.get(object_type="accounts.apitoken", note__startswith="revoked")
    assert revoked.note == "revoked: password changed" and revoked.actor == admin


def test_deactivation_ends_tokens_and_sessions_for_good(admin):
    user = UserFactory(username="erin", role="operator")
    token_client = _token_client(user)
    session_client = _session_client("erin")

    assert _as(admin).patch(f"/api/v1/users/{user.pk}/", {"is_active": False}, format="json").status_code == 200
    assert token_client.get("/api/v1/nodes/").status_code == 401
    assert session_client.get("/api/v1/nodes/").status_code in (401, 403)

    # Reactivating the account does not bring the old key back.
    assert _as(admin).patch(f"/api/v1/users/{user.pk}/", {"is_active": True}, format="json").status_code == 200
    assert token_client.get("/api/v1/nodes/").status_code == 401
    assert APIToken.objects.get(user=user).revoked_at is not None


def test_password_changed_outside_the_api_revokes_tokens_too():
    user = UserFactory(username="frank", role="operator")
    token_client = _token_client(user)
    user.set_password(NEW_PASSWORD)  # as Django admin's password form and `manage.py changepassword` do
    user.save()
    assert token_client.get("/api/v1/nodes/").status_code == 401
    entry = AuditEntry.objects.get(object_type="accounts.apitoken", note__startswith="revoked")
    assert entry.note == "revoked: password changed" and entry.actor_label == "system"


def test_saving_a_user_without_a_new_password_keeps_tokens():
    user = UserFactory(username="gina", role="operator")
    token_client = _token_client(user)
    user.email = "gina@example.com"
    user.save()
    assert token_client.get("/api/v1/nodes/").status_code == 200


def test_own_password_change_keeps_the_session(admin):
    admin.set_password("admin-pw-for-tests-9")
    admin.save()
    client = _session_client("plain-admin", "admin-pw-for-tests-9")
    csrf = client.get("/api/v1/auth/session/").cookies["csrftoken"].value
    response = client.patch(f"/api/v1/users/{admin.pk}/", {"password": NEW_PASSWORD}, format="json",
                            HTTP_X_CSRFTOKEN=csrf)
    assert response.status_code == 200
    assert client.get("/api/v1/me/").json()["username"] == "plain-admin"


def test_create_goes_through_the_service_and_is_audited_once(admin):
    response = _as(admin).post("/api/v1/users/", {"username": "newadmin", "role": "admin",
                                                  "password": "a-long-password-93"}, format="json")
    assert response.status_code == 201
    user = User.objects.get(username="newadmin")
    assert user.is_staff and user.check_password("a-long-password-93")
    entry = AuditEntry.objects.get(object_type="accounts.user")
    assert entry.action == AuditEntry.Action.CREATE
    assert entry.after["password"] == "[set]"
    assert user.password not in json.dumps(entry.after)


def test_create_rejects_a_weak_password_and_creates_nothing(admin):
    response = _as(admin).post("/api/v1/users/", {"username": "weak", "role": "viewer", "password": "123"},
                               format="json")
    assert response.status_code == 400
    assert "password" in response.json()["error"]["fields"]
    assert not User.objects.filter(username="weak").exists()


def test_django_admin_hides_superusers_from_plain_admins(admin, root, client):
    from django.contrib.auth.models import Permission

    admin.user_permissions.set(Permission.objects.filter(codename__in=["change_user", "delete_user"]))
    client.force_login(admin)
    response = client.post(f"/admin/accounts/user/{root.pk}/password/",
                           {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD, "usable_password": "true"})
    assert response.status_code == 403
    response = client.post(f"/admin/accounts/user/{root.pk}/change/", {"username": "taken", "role": "viewer"})
    assert response.status_code == 403
    assert client.post(f"/admin/accounts/user/{root.pk}/delete/", {"post": "yes"}).status_code == 403
    root.refresh_from_db()
    assert root.check_password("root-pw-for-tests-1") and root.username == "root"
    # A plain user stays editable for them.
    other = UserFactory(username="harry")
    response = client.post(f"/admin/accounts/user/{other.pk}/password/",
                           {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD, "usable_password": "true"})
    assert response.status_code == 302


def test_unlock_login_command_is_audited():
    call_command("unlock_login", "someone")
    assert AuditEntry.objects.get(object_type="accounts.login").note == "login lockout cleared"


def test_user_list_says_who_is_a_superuser(admin, root):
    rows = {row["username"]: row for row in _as(admin).get("/api/v1/users/").json()["results"]}
    assert rows["root"]["is_superuser"] is True and rows["plain-admin"]["is_superuser"] is False
    response = _as(root).patch(f"/api/v1/users/{admin.pk}/", {"is_superuser": True}, format="json")
    assert response.status_code == 200
    admin.refresh_from_db()
    assert admin.is_superuser is False  # read-only: nobody is made a superuser through the API
