"""Secrets at rest: Fernet under FLEET_SECRETS_KEY, rotation to a new key, and clear errors without a key."""

import pytest
from cryptography.fernet import Fernet

from fleet.executors import secrets
from fleet.executors.models import SSHKey
from fleet.executors.services.secrets_rotation import secrets_rotate
from fleet.executors.services.ssh_hosts import ssh_key_generate
from tests.factories import UserFactory


def test_round_trip_and_nothing_readable_at_rest():
    token = secrets.encrypt("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert b"OPENSSH" not in token
    assert secrets.decrypt(token) == b"-----BEGIN OPENSSH PRIVATE KEY-----"


def test_without_a_key_storing_a_secret_is_a_clear_409(settings, admin_api):
    settings.FLEET_SECRETS_KEY = ""
    with pytest.raises(secrets.SecretsUnavailable, match="FLEET_SECRETS_KEY"):
        secrets.encrypt("x")
    answer = admin_api.post("/api/v1/ssh-keys/", {"name": "k", "generate": True}, format="json")
    assert answer.status_code == 409
    assert answer.json()["error"]["code"] == "secrets_key_missing"
    assert not SSHKey.objects.exists()


def test_a_malformed_key_is_named(settings):
    settings.FLEET_SECRETS_KEY = "not-a-fernet-key"
    with pytest.raises(secrets.SecretsUnavailable) as caught:
        secrets.encrypt("x")
    assert caught.value.detail.code == "secrets_key_invalid"


@pytest.mark.django_db
def test_rotation_moves_every_secret_to_the_newest_key(settings):
    old = settings.FLEET_SECRETS_KEY
    key = ssh_key_generate(actor=UserFactory(role="admin"), name="k")
    new = Fernet.generate_key().decode()
    settings.FLEET_SECRETS_KEY = f"{new},{old}"
    assert secrets_rotate()["executors.sshkey.private_key_encrypted"] == 1
    settings.FLEET_SECRETS_KEY = new  # the old key is gone: everything still decrypts
    key.refresh_from_db()
    assert b"PRIVATE KEY" in secrets.decrypt(key.private_key_encrypted)
    settings.FLEET_SECRETS_KEY = old  # and the old key alone no longer does
    with pytest.raises(secrets.SecretsUnavailable) as caught:
        secrets.decrypt(key.private_key_encrypted)
    assert caught.value.detail.code == "secrets_key_mismatch"
