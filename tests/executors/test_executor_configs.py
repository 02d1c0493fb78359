"""Per-pool executor settings: validated per executor (unknown keys named), admins write, the secret goes in and
never comes out (not in answers, not in the audit log), and it is stored encrypted."""

import json

import pytest

from fleet.core.models import AuditEntry
from fleet.executors.models import ExecutorConfig
from fleet.executors.services.executor_configs import executor_secret
from tests.factories import PoolFactory

pytestmark = pytest.mark.django_db
TOKEN = "eyJhbGciOiJSUzI1NiIsImtpZCI6InNlY3JldC10b2tlbi1mb3ItdGVzdHMifQ"


def test_secret_is_write_only_encrypted_and_not_audited(admin_api, operator_api, viewer_api):
    pool = PoolFactory()
    created = admin_api.post("/api/v1/executor-configs/", {
        "pool": pool.pk, "executor": "kubernetes", "secret": TOKEN,
        "settings": {"api_url": "https://k8s.example:6443", "verify_tls": False}}, format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["has_secret"] is True and "secret" not in body
    assert body["settings"]["taint_key"] == "fleet.io/unhealthy"  # defaults are filled in
    config = ExecutorConfig.objects.get()
    assert TOKEN.encode() not in bytes(config.secret_encrypted) and executor_secret(config) == TOKEN
    assert operator_api.get("/api/v1/executor-configs/").status_code == 200
    assert viewer_api.get("/api/v1/executor-configs/").status_code == 403
    assert operator_api.patch(f"/api/v1/executor-configs/{config.pk}/", {"settings": {}},
                              format="json").status_code == 403
    # Changing settings keeps the secret unless a new one is given.
    changed = admin_api.patch(f"/api/v1/executor-configs/{config.pk}/",
                              {"settings": {"api_url": "https://k8s2.example"}}, format="json")
    assert changed.status_code == 200 and changed.json()["has_secret"] is True
    config.refresh_from_db()
    assert executor_secret(config) == TOKEN
    everything = json.dumps([admin_api.get("/api/v1/executor-configs/").json(),
                             list(AuditEntry.objects.values("before", "after", "note"))])
    assert TOKEN not in everything


@pytest.mark.parametrize("executor, settings, secret, field", [
    ("slurm", {"controller": "ssh"}, None, "settings.ssh_host"),
    ("slurm", {"controller": "local", "partition": "gpu"}, None, "settings.partition"),
    ("slurm", {"scontrol": "scontrol; rm -rf /"}, None, "settings.scontrol"),
    ("kubernetes", {"api_url": "https://k"}, None, "secret"),
    ("kubernetes", {"api_url": "ftp://k"}, "t", "settings.api_url"),
    ("aws", {"region": "mars-1"}, None, "settings.region"),
    ("aws", {"region": "us-east-1", "mode": "launch_template"}, None, "settings.launch_template_id"),
    ("aws", {"region": "us-east-1", "access_key_id": "AKIAIOSFODNN7EXAMPLE"}, None, "secret"),
    ("webhook", {"url": "https://hooks.example/replace"}, None, "secret"),
    ("webhook", {"url": "https://hooks.example/replace", "timeout_s": 0}, "s", "settings.timeout_s"),
])
def test_bad_settings_are_named(admin_api, executor, settings, secret, field):
    body = {"pool": PoolFactory().pk, "executor": executor, "settings": settings}
    if secret:
        body["secret"] = secret
    answer = admin_api.post("/api/v1/executor-configs/", body, format="json")
    assert answer.status_code == 400, answer.json()
    assert field in answer.json()["error"]["fields"]
    assert not ExecutorConfig.objects.exists()


def test_one_config_per_pool_and_executor(admin_api):
    pool = PoolFactory()
    body = {"pool": pool.pk, "executor": "slurm", "settings": {}}
    assert admin_api.post("/api/v1/executor-configs/", body, format="json").status_code == 201
    again = admin_api.post("/api/v1/executor-configs/", body, format="json")
    assert again.status_code == 400 and "executor" in again.json()["error"]["fields"]
