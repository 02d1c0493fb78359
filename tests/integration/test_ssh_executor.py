"""The `ssh` executor through the step interface, against a real sshd: idempotent by the step's key, a reboot is
done only when the host is back, an operator-only failure waits for an operator, a dry run touches nothing."""

from datetime import timedelta

import pytest

from fleet.executors import interface as steps
from fleet.executors.backends.ssh import SSHExecutor
from fleet.executors.models import SSHAction
from fleet.executors.services import ssh_actions
from fleet.executors.services.ssh_hosts import ssh_host_create, ssh_host_pin, ssh_key_import
from tests.factories import NodeFactory, UserFactory

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def context(node, kind, *, attempt=1, dry_run=False, params=None, facts=None):
    return steps.StepContext(incident_id=1, incident_key="INC-9", node_id=node.pk, step_index=2, attempt=attempt,
                             kind=kind, params=params or {}, dry_run=dry_run,
                             idempotency_key=steps.idempotency_key("INC-9", 2, attempt), facts=facts or {})


@pytest.fixture
def node_with_host(sshd):
    admin = UserFactory(username="exec-admin", role="admin")
    node = NodeFactory()
    key = ssh_key_import(actor=admin, name="fleet", private_key=sshd.user_private_key)
    host = ssh_host_create(actor=admin, address="127.0.0.1", port=sshd.port, username=sshd.user, key=key, node=node)
    ssh_host_pin(host=host, actor=admin, public_key=sshd.host_public_key, source="test")
    return node


def test_registered_and_says_what_it_cannot_do():
    executor = steps.executor_named("ssh")
    assert isinstance(executor, SSHExecutor)
    assert "verify" not in executor.kinds and "request_replacement" not in executor.kinds
    assert {"collect_evidence", "reboot", "reset_gpu", "cordon", "drain"} <= executor.kinds


def test_evidence_and_idempotency(node_with_host):
    executor = SSHExecutor()
    first = executor.start(context(node_with_host, "collect_evidence"))
    assert first.status == "done", first.message
    assert first.output["evidence"]["summary"]["boot_id"]
    again = executor.start(context(node_with_host, "collect_evidence"))
    assert again.output["ssh_action"] == first.output["ssh_action"]
    assert SSHAction.objects.count() == 1
    assert executor.start(context(node_with_host, "collect_evidence", attempt=2)).status == "done"
    assert SSHAction.objects.count() == 2  # a new attempt is a new action


def test_reboot_waits_until_the_host_is_back(sshd, node_with_host, tmp_path, monkeypatch):
    boot_id = tmp_path / "boot_id"
    boot_id.write_text("aaaaaaaa-0000-0000-0000-000000000000\n")
    monkeypatch.setattr(ssh_actions, "BOOT_ID_COMMAND", f"cat {boot_id}")
    sshd.fake_command("systemctl", f"echo reboot requested >> {tmp_path / 'calls'}\n")
    executor = SSHExecutor()
    outcome = executor.start(context(node_with_host, "reboot"))
    assert (outcome.status, outcome.retry_after) == ("waiting", timedelta(seconds=30))
    boot_id.write_text("bbbbbbbb-0000-0000-0000-000000000000\n")  # the host came back
    assert executor.poll(context(node_with_host, "reboot")).status == "done"
    assert (tmp_path / "calls").read_text().count("reboot requested") == 1


def test_hook_failure_fails_the_step_and_a_dry_run_runs_nothing(sshd, node_with_host, settings, tmp_path):
    settings.SSH_HOOKS_DIR = str(tmp_path)
    executor = SSHExecutor()
    dry = executor.start(context(node_with_host, "cordon", dry_run=True))
    assert dry.status == "done" and "dry run" in dry.message
    assert not SSHAction.objects.exists()
    failed = executor.start(context(node_with_host, "cordon"))
    assert failed.status == "failed" and "exit 127" in failed.message
    hook = tmp_path / "slurm-cordon"
    hook.write_text("#!/bin/sh\nexit 0\n")
    hook.chmod(0o755)
    done = executor.start(context(node_with_host, "cordon", attempt=2, params={"hook": "slurm-cordon"}))
    assert done.status == "done", done.message


def test_what_only_an_operator_can_fix_waits_for_one(sshd, node_with_host, tmp_path):
    from fleet.executors.models import SSHHost
    from tests.sshd import keygen

    host = SSHHost.objects.get()
    ssh_host_pin(host=host, actor=None, public_key=keygen(tmp_path / "other", "other"), source="test")
    outcome = SSHExecutor().start(context(node_with_host, "collect_evidence"))
    assert (outcome.status, outcome.retry_after, outcome.waiting_on) == ("waiting", None, "operator")
    assert "host key changed" in outcome.message
    node_without = NodeFactory()
    assert SSHExecutor().start(context(node_without, "reboot")).waiting_on == "operator"
    gpu = SSHExecutor().start(context(node_with_host, "reset_gpu"))
    assert gpu.status == "failed" and "needs a GPU" in gpu.message
