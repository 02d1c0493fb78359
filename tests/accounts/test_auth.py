from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from fleet.accounts.models import APIToken
from fleet.inventory.models import Provider

pytestmark = pytest.mark.django_db

PROVIDER = {"name": "AWS", "slug": "aws", "kind": "cloud", "cloud": "aws"}


def _client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_anonymous_is_401_with_error_shape():
    response = APIClient().get("/api/v1/nodes/")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "not_authenticated"
    assert response["WWW-Authenticate"] == "Token"


def test_token_auth_reads_and_writes(token_for):
    _, key = token_for("operator")
    client = _client(key)
    assert client.get("/api/v1/nodes/").status_code == 200
    assert client.post("/api/v1/providers/", PROVIDER, format="json").status_code == 201


def test_token_stored_hashed_and_last_used_updated(token_for):
    _, key = token_for("viewer")
    token = APIToken.objects.get()
    assert key not in (token.key_hash, token.prefix)
    assert token.last_used_at is None
    _client(key).get("/api/v1/nodes/")
    token.refresh_from_db()
    assert token.last_used_at is not None


def test_expired_token_is_401(token_for):
    _, key = token_for("operator", expires_at=timezone.now() - timedelta(seconds=1))
    response = _client(key).get("/api/v1/nodes/")
    assert response.status_code == 401
    assert "expired" in response.json()["error"]["message"]


def test_revoked_token_is_401(token_for):
    user, key = token_for("operator")
    client = _client(key)
    token_id = APIToken.objects.get(user=user).pk
    assert client.post(f"/api/v1/tokens/{token_id}/revoke/").status_code == 200
    response = client.get("/api/v1/nodes/")
    assert response.status_code == 401
    assert "revoked" in response.json()["error"]["message"]


def test_unknown_token_is_401():
    assert _client("fleet_nope").get("/api/v1/nodes/").status_code == 401


def test_read_only_token_cannot_write_even_for_admin(token_for):
    _, key = token_for("admin", write_enabled=False)
    client = _client(key)
    assert client.get("/api/v1/nodes/").status_code == 200
    response = client.post("/api/v1/providers/", PROVIDER, format="json")
    assert response.status_code == 403
    assert "read-only" in response.json()["error"]["message"]
    assert Provider.objects.count() == 0


def test_viewer_token_cannot_write(token_for):
    _, key = token_for("viewer")
    response = _client(key).post("/api/v1/providers/", PROVIDER, format="json")
    assert response.status_code == 403
    assert "operator" in response.json()["error"]["message"]


def test_token_create_shows_key_once(viewer_api):
    response = viewer_api.post("/api/v1/tokens/", {"name": "ci", "write_enabled": False}, format="json")
    assert response.status_code == 201
    key = response.json()["key"]
    assert key.startswith("fleet_")
    listed = viewer_api.get("/api/v1/tokens/").json()["results"]
    assert "key" not in listed[0]
    assert listed[0]["write_enabled"] is False


def test_users_admin_only(viewer_api, operator_api, admin_api):
    assert viewer_api.get("/api/v1/users/").status_code == 403
    assert operator_api.post("/api/v1/users/", {"username": "x", "role": "admin"}, format="json").status_code == 403
    response = admin_api.post("/api/v1/users/", {"username": "newop", "role": "operator",
                                                 "password": "a-long-password-93"}, format="json")
    assert response.status_code == 201
    assert "password" not in response.json()
    response = admin_api.post("/api/v1/users/", {"username": "bad", "role": "god"}, format="json")
    assert response.status_code == 400
    assert "role" in response.json()["error"]["fields"]


def test_session_login_and_csrf(db):
    from tests.factories import UserFactory

    UserFactory(username="alice", role="operator")
    client = APIClient(enforce_csrf_checks=True)
    response = client.get("/api/v1/auth/session/")
    assert response.json()["authenticated"] is False
    csrf = response.cookies["csrftoken"].value
    response = client.post("/api/v1/auth/session/", {"username": "alice", "password": "wrong"},
                           format="json", HTTP_X_CSRFTOKEN=csrf)
    assert response.status_code in (401, 403)
    response = client.post("/api/v1/auth/session/", {"username": "alice", "password": "pw-for-tests-123"},
                           format="json", HTTP_X_CSRFTOKEN=csrf)
    assert response.status_code == 200
    assert response.json()["user"]["role"] == "operator"
    csrf = client.cookies["csrftoken"].value
    # Session writes need the CSRF token.
    assert client.post("/api/v1/providers/", PROVIDER, format="json").status_code == 403
    response = client.post("/api/v1/providers/", PROVIDER, format="json", HTTP_X_CSRFTOKEN=csrf)
    assert response.status_code == 201
