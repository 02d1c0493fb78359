"""SSH hosts against a real OpenSSH sshd: keys stored encrypted and never shown, host keys pinned only by an
operator's confirmation of the exact fingerprint, a changed host key or a refused login stops everything on that
host, and remote diagnostics / reboot / GPU reset / hooks run through the real server."""

import json

import pytest

from fleet.core.models import AuditEntry
from fleet.executors import tasks
from fleet.executors.choices import HostKeyState, SSHActionState
from fleet.executors.models import SSHAction, SSHHost, SSHKey
from fleet.executors.services import ssh_actions
from fleet.executors.services.ssh_hosts import ssh_host_create, ssh_host_pin, ssh_key_generate, ssh_key_import
from fleet.executors.ssh import fingerprint
from tests.factories import UserFactory

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


@pytest.fixture
def run_tasks_inline(monkeypatch, django_capture_on_commit_callbacks):
    monkeypatch.setattr(tasks.ssh_action_run, "delay", lambda action_id: tasks.ssh_action_run(action_id))

    def run(call):
        with django_capture_on_commit_callbacks(execute=True):
            return call()

    return run


@pytest.fixture
def admin():
    return UserFactory(username="ssh-admin", role="admin")


@pytest.fixture
def trusted_host(sshd, admin):
    key = ssh_key_import(actor=admin, name="fleet", private_key=sshd.user_private_key)
    host = ssh_host_create(actor=admin, address="127.0.0.1", port=sshd.port, username=sshd.user, key=key)
    return ssh_host_pin(host=host, actor=admin, public_key=sshd.host_public_key, source="test")


def test_key_and_host_registration_pins_only_the_confirmed_fingerprint(sshd, admin_api, operator_api, caplog):
    caplog.set_level("DEBUG")
    answer = admin_api.post("/api/v1/ssh-keys/", {"name": "fleet", "private_key": sshd.user_private_key},
                            format="json")
    assert answer.status_code == 201, answer.json()
    key = answer.json()
    assert "private_key" not in key and key["fingerprint"].startswith("SHA256:")
    stored = SSHKey.objects.get()
    assert b"OPENSSH PRIVATE KEY" not in bytes(stored.private_key_encrypted)  # encrypted at rest

    created = operator_api.post("/api/v1/ssh-hosts/", {"address": "127.0.0.1", "port": sshd.port,
                                                       "username": sshd.user, "key": key["id"]}, format="json")
    assert created.status_code == 201, created.json()
    host = created.json()
    offered = fingerprint(sshd.host_public_key)
    assert (host["host_key_state"], host["offered_fingerprint"], host["host_key_fingerprint"]) == \
        ("pending", offered, "")

    wrong = operator_api.post(f"/api/v1/ssh-hosts/{host['id']}/confirm-host-key/",
                              {"fingerprint": "SHA256:" + "A" * 43}, format="json")
    assert wrong.status_code == 400
    assert "fingerprint" in wrong.json()["error"]["fields"]
    assert SSHHost.objects.get().host_key_state == HostKeyState.PENDING

    confirmed = operator_api.post(f"/api/v1/ssh-hosts/{host['id']}/confirm-host-key/", {"fingerprint": offered},
                                  format="json")
    assert confirmed.status_code == 200
    assert (confirmed.json()["host_key_state"], confirmed.json()["host_key_fingerprint"]) == ("trusted", offered)

    # The private key appears in no answer and in no audit entry.
    private_body = sshd.user_private_key.split("-----")[2].strip().splitlines()[1]
    listing = json.dumps([admin_api.get("/api/v1/ssh-keys/").json(), operator_api.get("/api/v1/ssh-hosts/").json(),
                          admin_api.get("/api/v1/audit/").json()])
    assert private_body not in listing
    assert private_body not in caplog.text
    assert not AuditEntry.objects.filter(after__icontains=private_body).exists()


def test_keys_need_an_admin_and_a_usable_key(admin_api, operator_api):
    assert operator_api.post("/api/v1/ssh-keys/", {"name": "x", "generate": True}, format="json").status_code == 403
    bad = admin_api.post("/api/v1/ssh-keys/", {"name": "x", "private_key": "not a key"}, format="json")
    assert bad.status_code == 400 and "private_key" in bad.json()["error"]["fields"]
    neither = admin_api.post("/api/v1/ssh-keys/", {"name": "x"}, format="json")
    assert neither.status_code == 400
    generated = admin_api.post("/api/v1/ssh-keys/", {"name": "gen", "generate": True}, format="json")
    assert generated.status_code == 201 and generated.json()["public_key"].startswith("ssh-ed25519 ")
    assert SSHKey.objects.count() == 1


def test_nothing_runs_on_a_host_whose_key_is_not_confirmed(sshd, admin, operator_api, run_tasks_inline):
    key = ssh_key_import(actor=admin, name="fleet", private_key=sshd.user_private_key)
    host = ssh_host_create(actor=admin, address="127.0.0.1", port=sshd.port, username=sshd.user, key=key)
    answer = run_tasks_inline(lambda: operator_api.post(f"/api/v1/ssh-hosts/{host.pk}/diagnose/"))
    assert answer.status_code == 202
    action = SSHAction.objects.get()
    assert action.state == SSHActionState.FAILED
    assert "waits for an operator to confirm" in action.message


def test_a_changed_host_key_stops_commands_and_says_so(sshd, admin, tmp_path):
    from tests.sshd import keygen

    key = ssh_key_import(actor=admin, name="fleet", private_key=sshd.user_private_key)
    host = ssh_host_create(actor=admin, address="127.0.0.1", port=sshd.port, username=sshd.user, key=key,
                           scan=False)
    other = keygen(tmp_path / "other", "impostor")  # what was pinned is not what the host offers now
    host = ssh_host_pin(host=host, actor=admin, public_key=other, source="test")
    action, _ = ssh_actions.ssh_action_request(host=host, kind="diagnose", params={}, actor=admin)
    action = ssh_actions.ssh_action_execute(action_id=action.pk)
    assert action.state == SSHActionState.FAILED
    assert "host key changed" in action.message and fingerprint(sshd.host_public_key) in action.message
    host.refresh_from_db()
    assert host.host_key_state == HostKeyState.CHANGED
    assert host.host_key_fingerprint == fingerprint(other)  # the pin stays until an operator confirms another
    assert host.offered_fingerprint == fingerprint(sshd.host_public_key)


def test_a_refused_key_fails_with_its_fingerprint(sshd, admin):
    wrong = ssh_key_generate(actor=admin, name="not-authorized")
    host = ssh_host_create(actor=admin, address="127.0.0.1", port=sshd.port, username=sshd.user, key=wrong)
    host = ssh_host_pin(host=host, actor=admin, public_key=sshd.host_public_key, source="test")
    action, _ = ssh_actions.ssh_action_request(host=host, kind="diagnose", params={}, actor=admin)
    action = ssh_actions.ssh_action_execute(action_id=action.pk)
    assert action.state == SSHActionState.FAILED
    assert f"refused the key {wrong.fingerprint}" in action.message


def test_remote_diagnostics_collect_what_is_readable(sshd, trusted_host, operator_api, run_tasks_inline):
    sshd.fake_command("nvidia-smi", "echo '<?xml version=\"1.0\" ?><nvidia_smi_log><attached_gpus>2"
                                    "</attached_gpus></nvidia_smi_log>'\n")
    sshd.fake_command("lspci", "printf '01:00.0 0302: 10de:2330 (rev a1)\\n02:00.0 0302: 10de:2330 (rev a1)\\n"
                               "03:00.0 0680: 10de:22a3 (rev a1)\\n'\n")
    sshd.fake_command("journalctl", "echo 'kernel: NVRM: Xid (PCI:0000:01:00): 79, pid=123, GPU has fallen off "
                                    "the bus.'\n")
    answer = run_tasks_inline(lambda: operator_api.post(f"/api/v1/ssh-hosts/{trusted_host.pk}/diagnose/"))
    assert answer.status_code == 202
    action = operator_api.get(f"/api/v1/ssh-actions/{answer.json()['id']}/").json()
    assert action["state"] == "done", action["message"]
    summary = action["result"]["summary"]
    assert summary["pci_gpu_count"] == 2 and summary["xid_codes"] == [79] and summary["nvidia_smi"]
    assert summary["uptime"] and len(summary["boot_id"]) == 36
    assert "<nvidia_smi_log>" in action["result"]["sections"]["nvidia_smi_xml"]["output"]
    trusted_host.refresh_from_db()
    assert trusted_host.last_contact_at is not None and trusted_host.last_error == ""


def test_gpu_reset_only_when_idle(sshd, trusted_host, admin, tmp_path):
    calls = tmp_path / "calls"
    busy = tmp_path / "busy"
    sshd.fake_command("nvidia-smi", f"echo \"$*\" >> {calls}\n"
                                    f"case \"$*\" in *query-compute-apps*) cat {busy} 2>/dev/null || true ;; esac\n")
    busy.write_text("4242, python\n")
    first, _ = ssh_actions.ssh_action_request(host=trusted_host, kind="gpu_reset", params={"gpu_index": 3},
                                              actor=admin)
    first = ssh_actions.ssh_action_execute(action_id=first.pk)
    assert first.state == SSHActionState.FAILED and "busy" in first.message
    assert "-r -i 3" not in calls.read_text()

    busy.unlink()
    second, _ = ssh_actions.ssh_action_request(host=trusted_host, kind="gpu_reset", params={"gpu_index": 3},
                                               actor=admin, idempotency_key="INC-1:2:1")
    second = ssh_actions.ssh_action_execute(action_id=second.pk)
    assert second.state == SSHActionState.DONE, second.message
    again, created = ssh_actions.ssh_action_request(host=trusted_host, kind="gpu_reset", params={"gpu_index": 3},
                                                    actor=admin, idempotency_key="INC-1:2:1")
    assert (again.pk, created) == (second.pk, False)
    assert ssh_actions.ssh_action_execute(action_id=again.pk).pk == second.pk
    assert calls.read_text().count("-r -i 3") == 1  # the retried step ran nothing twice


def test_reboot_needs_the_address_typed_and_is_seen_through(sshd, trusted_host, operator_api, run_tasks_inline,
                                                            tmp_path, monkeypatch):
    boot_id = tmp_path / "boot_id"
    boot_id.write_text("11111111-1111-1111-1111-111111111111\n")
    monkeypatch.setattr(ssh_actions, "BOOT_ID_COMMAND", f"cat {boot_id}")
    sshd.fake_command("systemctl", f"echo 22222222-2222-2222-2222-222222222222 > {boot_id}\n")

    refused = operator_api.post(f"/api/v1/ssh-hosts/{trusted_host.pk}/reboot/", {"confirm": "yes"}, format="json")
    assert refused.status_code == 400 and "confirm" in refused.json()["error"]["fields"]
    assert not SSHAction.objects.exists()

    answer = run_tasks_inline(lambda: operator_api.post(f"/api/v1/ssh-hosts/{trusted_host.pk}/reboot/",
                                                        {"confirm": "127.0.0.1"}, format="json"))
    action = SSHAction.objects.get(pk=answer.json()["id"])
    assert action.state == SSHActionState.DONE, action.message
    assert action.result["boot_id_before"].startswith("1111")
    back, message = ssh_actions.ssh_rebooted(action=action)
    assert back, message


def test_hooks_run_by_name_only(sshd, trusted_host, admin, tmp_path, settings):
    settings.SSH_HOOKS_DIR = str(tmp_path / "hooks")
    (tmp_path / "hooks").mkdir()
    hook = tmp_path / "hooks" / "drain"
    hook.write_text(f"#!/bin/sh\necho \"draining for $FLEET_INCIDENT\" > {tmp_path / 'ran'}\n")
    hook.chmod(0o755)
    action, _ = ssh_actions.ssh_action_request(host=trusted_host, kind="run_hook", params={"name": "drain"},
                                               actor=admin, incident_key="INC-7")
    action = ssh_actions.ssh_action_execute(action_id=action.pk)
    assert action.state == SSHActionState.DONE, action.message
    assert (tmp_path / "ran").read_text().strip() == "draining for INC-7"

    missing, _ = ssh_actions.ssh_action_request(host=trusted_host, kind="run_hook", params={"name": "cordon"},
                                                actor=admin)
    missing = ssh_actions.ssh_action_execute(action_id=missing.pk)
    assert missing.state == SSHActionState.FAILED and missing.exit_status == 127
    with pytest.raises(Exception, match="hook name"):
        ssh_actions.ssh_action_request(host=trusted_host, kind="run_hook", params={"name": "../../bin/sh"},
                                       actor=admin)


def test_a_host_behind_a_jump_host(sshd, trusted_host, admin):
    """The target is reached through the (pinned) jump host's forwarding; its own key is scanned and pinned too."""
    behind = ssh_host_create(actor=admin, address="localhost", port=sshd.port, username=sshd.user,
                             key=trusted_host.key, jump_host=trusted_host)
    assert behind.offered_fingerprint == fingerprint(sshd.host_public_key)  # scanned through the jump host
    behind = ssh_host_pin(host=behind, actor=admin, public_key=sshd.host_public_key, source="test")
    action, _ = ssh_actions.ssh_action_request(host=behind, kind="diagnose", params={}, actor=admin)
    action = ssh_actions.ssh_action_execute(action_id=action.pk)
    assert action.state == SSHActionState.DONE, action.message
    assert "Accepted publickey" in sshd.log() and sshd.log().count("Accepted publickey") >= 2
