"""API tokens: least privilege unless asked for — read-only, and every token expires."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from fleet.accounts.models import APIToken
from fleet.accounts.services import api_token_create
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_new_token_is_read_only_and_expires_by_default(operator_api):
    response = operator_api.post("/api/v1/tokens/", {"name": "ci"}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert body["write_enabled"] is False
    token = APIToken.objects.get()
    assert not token.write_enabled
    expected = timezone.now() + timedelta(days=90)
    assert abs((token.expires_at - expected).total_seconds()) < 60
    client = _client(body["key"])
    assert client.get("/api/v1/nodes/").status_code == 200
    response = client.post("/api/v1/providers/", {"name": "P", "slug": "p", "kind": "cloud"}, format="json")
    assert response.status_code == 403
    assert "read-only" in response.json()["error"]["message"]


def test_write_access_only_when_asked_for(operator_api):
    response = operator_api.post("/api/v1/tokens/", {"name": "deploy", "write_enabled": True}, format="json")
    assert response.status_code == 201
    client = _client(response.json()["key"])
    response = client.post("/api/v1/providers/", {"name": "P", "slug": "p", "kind": "cloud"}, format="json")
    assert response.status_code == 201


def test_default_lifetime_is_configurable(operator_api, settings):
    settings.API_TOKEN_DEFAULT_TTL_DAYS = 7
    operator_api.post("/api/v1/tokens/", {"name": "short"}, format="json")
    lifetime = APIToken.objects.get().expires_at - timezone.now()
    assert timedelta(days=6, hours=23) < lifetime <= timedelta(days=7)


@pytest.mark.parametrize("expires_at, message", [
    (None, "Every token expires"),
    ("2000-01-01T00:00:00Z", "future"),
    (timedelta(days=400), "365 days"),  # from the test's own "now", not the collection's
])
def test_expiry_must_be_in_the_future_and_bounded(operator_api, expires_at, message):
    if isinstance(expires_at, timedelta):
        expires_at = (timezone.now() + expires_at).isoformat()
    response = operator_api.post("/api/v1/tokens/", {"name": "x", "expires_at": expires_at}, format="json")
    assert response.status_code == 400
    assert message in response.json()["error"]["fields"]["expires_at"][0]
    assert not APIToken.objects.exists()


def test_explicit_expiry_within_the_limit(operator_api):
    when = timezone.now() + timedelta(days=200)
    response = operator_api.post("/api/v1/tokens/", {"name": "x", "expires_at": when.isoformat()}, format="json")
    assert response.status_code == 201
    assert abs((APIToken.objects.get().expires_at - when).total_seconds()) < 1


def test_service_defaults_match_the_api():
    token, _ = api_token_create(user=UserFactory(), name="svc")
    assert token.write_enabled is False and token.expires_at is not None
