from unittest import mock

import pytest
from django.contrib.auth.hashers import MD5PasswordHasher
from django.core.cache import cache
from django.test import Client
from rest_framework.test import APIClient

from fleet.accounts.services import login_failure_record
from fleet.core.models import AuditEntry
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

SESSION = "/api/v1/auth/session/"
PASSWORD = "pw-for-tests-123"


@pytest.fixture
def alice():
    return UserFactory(username="alice", role="operator")


def _csrf_client(**extra) -> tuple[APIClient, str]:
    client = APIClient(enforce_csrf_checks=True, **extra)
    return client, client.get(SESSION).cookies["csrftoken"].value


def _login(client, csrf, username="alice", password=PASSWORD, **extra):
    return client.post(SESSION, {"username": username, "password": password}, format="json",
                       HTTP_X_CSRFTOKEN=csrf, **extra)


@pytest.fixture
def hashes():
    """Counts password hash computations (verifying a password, or hashing one for an unknown user)."""
    counter = mock.Mock()
    verify, encode = MD5PasswordHasher.verify, MD5PasswordHasher.encode

    def counted_verify(self, *args):
        counter()
        return verify(self, *args)

    def counted_encode(self, *args):
        counter()
        return encode(self, *args)

    with mock.patch.object(MD5PasswordHasher, "verify", counted_verify), \
            mock.patch.object(MD5PasswordHasher, "encode", counted_encode):
        yield counter


# --- CSRF -------------------------------------------------------------------------------------------

def test_login_without_csrf_token_is_refused(alice):
    client = APIClient(enforce_csrf_checks=True)
    response = client.post(SESSION, {"username": "alice", "password": PASSWORD}, format="json")
    assert response.status_code == 403
    assert response.json()["error"]["message"].startswith("CSRF Failed")
    assert client.get(SESSION).json()["authenticated"] is False


def test_cross_origin_login_is_refused_even_with_a_token(alice):
    client, csrf = _csrf_client()
    response = _login(client, csrf, HTTP_ORIGIN="https://evil.example")
    assert response.status_code == 403
    assert "Origin" in response.json()["error"]["message"]
    assert client.get(SESSION).json()["authenticated"] is False


def test_same_origin_login_works_like_the_console(alice):
    client, csrf = _csrf_client()
    response = _login(client, csrf, HTTP_ORIGIN="http://testserver")
    assert response.status_code == 200
    assert response.json()["user"]["username"] == "alice"


# --- Throttle per address -----------------------------------------------------------------------------

def test_address_throttle_answers_429_before_hashing(alice, settings, hashes):
    settings.LOGIN_RATE_LIMIT = "3/min"
    client, csrf = _csrf_client()
    for _ in range(3):
        assert _login(client, csrf, username=f"nobody{_}", password="wrong").status_code == 401
    hashed = hashes.call_count
    assert hashed >= 3
    for _ in range(5):
        response = _login(client, csrf)  # even the right password waits
        assert response.status_code == 429
    assert hashes.call_count == hashed
    body = response.json()["error"]
    assert body["code"] == "throttled" and "Too many login attempts" in body["message"]
    assert 1 <= int(response["Retry-After"]) <= 60
    entries = AuditEntry.objects.filter(object_type="accounts.login")
    assert [e.note.split(":")[0] for e in entries] == ["login throttled"]  # once per window, not per attempt
    # Another address is not affected.
    other, other_csrf = _csrf_client(REMOTE_ADDR="10.9.9.9")
    assert _login(other, other_csrf).status_code == 200


def test_forwarded_for_is_ignored_unless_proxies_are_trusted(alice, settings):
    settings.LOGIN_RATE_LIMIT = "2/min"
    client, csrf = _csrf_client()
    for n in range(2):
        _login(client, csrf, password="wrong", HTTP_X_FORWARDED_FOR=f"198.51.100.{n}")
    # A client cannot dodge the limit by inventing a new X-Forwarded-For for each attempt.
    assert _login(client, csrf, HTTP_X_FORWARDED_FOR="198.51.100.77").status_code == 429


# --- Back-off per username ---------------------------------------------------------------------------

def test_username_lockout_after_failures_from_any_address(alice, settings, hashes):
    settings.LOGIN_LOCKOUT_FAILURES = 3
    for n in range(3):
        client, csrf = _csrf_client(REMOTE_ADDR=f"10.0.0.{n}")
        assert _login(client, csrf, password="wrong").status_code == 401
    hashed = hashes.call_count
    client, csrf = _csrf_client(REMOTE_ADDR="10.0.0.99")
    response = _login(client, csrf)
    assert response.status_code == 429
    assert 25 <= int(response["Retry-After"]) <= 30
    assert hashes.call_count == hashed
    entry = AuditEntry.objects.get(object_type="accounts.login")
    assert entry.object_id == "alice" and "locked for 30 s after 3 failed" in entry.note
    assert entry.actor_label == "anonymous@10.0.0.2"
    # Other users log in as usual.
    UserFactory(username="bob")
    assert _login(client, csrf, username="bob").status_code == 200


def test_lockout_doubles_and_is_capped(settings):
    settings.LOGIN_LOCKOUT_FAILURES, settings.LOGIN_LOCKOUT_BASE_S, settings.LOGIN_LOCKOUT_MAX_S = 2, 30, 100
    waits = [login_failure_record(username="Mallory", address="10.0.0.1") for _ in range(5)]
    assert waits == [None, 30, 60, 100, 100]
    # Usernames are matched case-insensitively, so "MALLORY" shares the counter.
    assert login_failure_record(username="MALLORY", address="10.0.0.1") == 100


def test_success_clears_the_failure_count(alice, settings):
    settings.LOGIN_LOCKOUT_FAILURES = 3
    client, csrf = _csrf_client()
    for _ in range(2):
        _login(client, csrf, password="wrong")
    assert _login(client, csrf).status_code == 200
    client, csrf = _csrf_client()
    for _ in range(2):
        assert _login(client, csrf, password="wrong").status_code == 401
    assert _login(client, csrf).status_code == 200


def test_unlock_clears_a_lockout(alice, settings):
    from django.core.management import call_command

    settings.LOGIN_LOCKOUT_FAILURES = 1
    client, csrf = _csrf_client()
    _login(client, csrf, password="wrong")
    assert _login(client, csrf).status_code == 429
    call_command("unlock_login", "alice")
    assert _login(client, csrf).status_code == 200


def test_cache_outage_fails_open(alice):
    with mock.patch.object(cache, "get", side_effect=ConnectionError("cache down")), \
            mock.patch("fleet.core.ratelimit.hit", side_effect=ConnectionError("cache down")), \
            mock.patch.object(cache, "add", side_effect=ConnectionError("cache down")):
        client, csrf = _csrf_client()
        assert _login(client, csrf, password="wrong").status_code == 401
        assert _login(client, csrf).status_code == 200


# --- Django admin's login ------------------------------------------------------------------------------

def test_admin_login_shares_the_throttle(settings, hashes):
    settings.LOGIN_LOCKOUT_FAILURES = 2
    UserFactory(username="root", role="admin", is_staff=True)
    client = Client()
    for _ in range(2):
        response = client.post("/admin/login/", {"username": "root", "password": "wrong"})
        assert response.status_code == 200  # the form again, with an error
    hashed = hashes.call_count
    response = client.post("/admin/login/", {"username": "root", "password": PASSWORD})
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert hashes.call_count == hashed
    # The API's session login honours the same lockout.
    api, csrf = _csrf_client()
    assert _login(api, csrf, username="root").status_code == 429


def test_admin_login_success_and_address_limit(settings):
    settings.LOGIN_RATE_LIMIT = "2/min"
    UserFactory(username="root", role="admin", is_staff=True)
    client = Client()
    response = client.post("/admin/login/", {"username": "root", "password": PASSWORD})
    assert response.status_code == 302
    client.post("/admin/login/", {"username": "root", "password": "wrong"})
    assert client.post("/admin/login/", {"username": "root", "password": PASSWORD}).status_code == 429


def test_oversized_credentials_are_refused_before_hashing(alice, hashes):
    client, csrf = _csrf_client()
    response = _login(client, csrf, password="x" * 5000)
    assert response.status_code == 400
    assert "password" in response.json()["error"]["fields"]
    assert hashes.call_count == 0


def test_password_whitespace_is_not_trimmed(settings):
    UserFactory(username="spacey", password=" padded pw ")
    client, csrf = _csrf_client()
    assert _login(client, csrf, username="spacey", password=" padded pw ").status_code == 200
