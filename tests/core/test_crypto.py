"""Secrets at rest: one key ring (FLEET_ENCRYPTION_KEYS) for every app, rotation of every registered column to a new
key, the legacy FLEET_SECRETS_KEY still readable, and clear errors without a key."""

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command

from fleet.core import crypto
from fleet.executors.models import SSHKey
from fleet.executors.services.ssh_hosts import ssh_key_generate
from fleet.integrations.models import Integration
from tests.factories import UserFactory


def test_round_trip_and_nothing_readable_at_rest():
    token = crypto.encrypt("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert b"OPENSSH" not in token
    assert crypto.decrypt(token) == b"-----BEGIN OPENSSH PRIVATE KEY-----"
    text = crypto.encrypt_json({"api_token": "s3cret"})
    assert "s3cret" not in text
    assert crypto.decrypt_json(text) == {"api_token": "s3cret"}
    assert crypto.encrypt_json({}) == "" and crypto.decrypt_json("") == {}


def test_every_encrypted_column_is_registered():
    names = {f"{entry.model._meta.label_lower}.{entry.field}" for entry in crypto.encrypted_fields()}
    assert names == {"integrations.integration.secrets_encrypted", "executors.sshkey.private_key_encrypted",
                     "executors.bootstraprun.token_encrypted", "executors.executorconfig.secret_encrypted"}


def test_without_a_key_storing_a_secret_is_a_clear_503_and_stores_nothing(settings, admin_api):
    settings.FLEET_ENCRYPTION_KEYS = []
    settings.FLEET_SECRETS_KEY = ""
    with pytest.raises(crypto.EncryptionNotConfigured, match="FLEET_ENCRYPTION_KEYS"):
        crypto.encrypt("x")
    answer = admin_api.post("/api/v1/ssh-keys/", {"name": "k", "generate": True}, format="json")
    assert answer.status_code == 503
    assert answer.json()["error"]["code"] == "encryption_not_configured"
    assert not SSHKey.objects.exists()


def test_a_malformed_key_is_named(settings):
    settings.FLEET_ENCRYPTION_KEYS = ["not-a-fernet-key"]
    with pytest.raises(crypto.EncryptionNotConfigured) as caught:
        crypto.encrypt("x")
    assert caught.value.detail.code == "encryption_key_invalid"


def test_the_legacy_secrets_key_still_decrypts_and_encrypts_when_alone(settings):
    legacy = Fernet.generate_key().decode()
    settings.FLEET_ENCRYPTION_KEYS = []
    settings.FLEET_SECRETS_KEY = legacy
    token = crypto.encrypt("old secret")  # stored before the settings were merged
    settings.FLEET_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    assert crypto.decrypt(token) == b"old secret"
    assert crypto.encryption_keys()[1] == legacy


@pytest.mark.django_db
def test_reencrypt_secrets_moves_every_app_to_the_newest_key(settings):
    old = settings.FLEET_ENCRYPTION_KEYS[0]
    key = ssh_key_generate(actor=UserFactory(role="admin"), name="k")
    integration = Integration.objects.create(name="jira", kind="jira", config={}, inbound_id="in-jira",
                                             secrets_encrypted=crypto.encrypt_json({"api_token": "t"}))
    new = Fernet.generate_key().decode()
    settings.FLEET_ENCRYPTION_KEYS = [new, old]
    call_command("reencrypt_secrets", stdout=__import__("io").StringIO())
    settings.FLEET_ENCRYPTION_KEYS = [new]  # the old key is gone: everything still decrypts
    key.refresh_from_db()
    integration.refresh_from_db()
    assert b"PRIVATE KEY" in crypto.decrypt(key.private_key_encrypted)
    assert crypto.decrypt_json(integration.secrets_encrypted) == {"api_token": "t"}
    settings.FLEET_ENCRYPTION_KEYS = [old]  # and the old key alone no longer does
    with pytest.raises(crypto.SecretsUnreadable) as caught:
        crypto.decrypt(key.private_key_encrypted)
    assert caught.value.detail.code == "secrets_unreadable"
