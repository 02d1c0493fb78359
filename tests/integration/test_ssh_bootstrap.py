"""Bootstrap over SSH against a real sshd: the served install.sh installs and enrols the agent (into a temporary
root), a re-run changes nothing, and 20 hosts at once show progress per host while a refused key and a changed
host key fail only their own host, with a clear message."""

import io
import json
import shutil
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings
from rest_framework.test import APIClient

from fleet.core import crypto
from fleet.core.models import AuditEntry
from fleet.executors import tasks
from fleet.executors.choices import BootstrapState, HostKeyState, RunState
from fleet.executors.models import BootstrapHost, BootstrapRun, SSHHost
from fleet.executors.services.bootstrap import BootstrapOptions, bootstrap_create, bootstrap_execute
from fleet.executors.services.ssh_hosts import ssh_host_create, ssh_host_pin, ssh_key_generate, ssh_key_import
from fleet.executors.ssh import fingerprint
from fleet.inventory.models import Node
from fleet.telemetry.models import EnrollmentToken
from tests.factories import PoolFactory, ProviderFactory, UserFactory
from tests.sshd import keygen, start_sshd, stop_sshd

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def agent_wheels(tmp_path_factory):
    """This checkout's agent wheel in a directory of the test's own (the shared one may be rebuilt meanwhile)."""
    shared = Path(settings.AGENT_WHEEL_DIR)
    deps = sorted(shared.glob("nvidia_ml_py-*.whl"))
    if not deps:
        pytest.skip(f"no nvidia-ml-py wheel in {shared}: `make setup` downloads it (tests never download)")
    wheel_dir = tmp_path_factory.mktemp("wheels")
    shutil.copy(deps[-1], wheel_dir)
    with override_settings(AGENT_WHEEL_DIR=str(wheel_dir)):
        call_command("build_agent_wheels", stdout=io.StringIO())
        yield wheel_dir


@pytest.fixture(scope="module")
def sshd20(tmp_path_factory):
    server = start_sshd(tmp_path_factory.mktemp("sshd20"), ports=20)
    yield server
    stop_sshd(server)


def test_bootstrap_installs_then_twenty_hosts_show_progress_and_fail_alone(agent_wheels, live_server, sshd20,
                                                                          tmp_path, monkeypatch):
    operator = UserFactory(username="boot-op", role="operator")
    pool = PoolFactory(name="metal", provider=ProviderFactory(kind="own", cloud=""),
                       delivery_form="bare_metal_owned", billing_mode="reserved")
    key = ssh_key_import(actor=operator, name="fleet", private_key=sshd20.user_private_key)
    first = ssh_host_create(actor=operator, address="127.0.0.1", port=sshd20.ports[0], username=sshd20.user,
                            key=key)
    first = ssh_host_pin(host=first, actor=operator, public_key=sshd20.host_public_key, source="test")
    root = tmp_path / "root"
    install = BootstrapOptions(offline=True, root=str(root), python=sys.executable, no_systemd=True)

    # One host for real: install.sh from the live server installs and enrols the agent.
    run = bootstrap_create(actor=operator, pool=pool, hosts=[first], server_url=live_server.url, options=install)
    token_key = crypto.decrypt(run.token_encrypted).decode()
    run = bootstrap_execute(run_id=run.pk)
    row = BootstrapHost.objects.get(run=run)
    assert row.state == BootstrapState.DONE, f"{row.message}\n{row.output_tail}"
    node = Node.objects.get()
    assert (node.pool, node.delivery_form) == (pool, "bare_metal_owned")
    assert row.node == node and SSHHost.objects.get(pk=first.pk).node == node
    assert (root / "var/lib/fleet-agent/credential.json").exists()
    assert "enrolling with" in row.output_tail
    run.refresh_from_db()
    assert run.state == RunState.FINISHED and run.token_encrypted is None
    assert EnrollmentToken.objects.get(pk=run.enrollment_token_id).revoked_at is not None
    # The run's enrolment token reached the host on stdin only: it is in no output, answer or audit entry.
    assert token_key.startswith("fe_") and token_key not in row.output_tail
    assert token_key not in json.dumps(list(AuditEntry.objects.values("before", "after", "note")), default=str)

    # Twenty hosts through the CLI: 18 good ones, one whose login key is refused, one whose host key changed.
    wrong_key = ssh_key_generate(actor=operator, name="stale")
    changed = ssh_host_create(actor=operator, address="127.0.0.1", port=sshd20.ports[19], username=sshd20.user,
                              key=key, scan=False)
    ssh_host_pin(host=changed, actor=operator, public_key=keygen(tmp_path / "old_host_key", "old"), source="test")
    lines = [f"{sshd20.user}@127.0.0.1:{port}" for port in sshd20.ports[:18]]
    lines.append(f"{sshd20.user}@127.0.0.1:{sshd20.ports[18]} key=stale")
    lines.append(f"{sshd20.user}@127.0.0.1:{sshd20.ports[19]}")
    hosts_file = tmp_path / "hosts.txt"
    hosts_file.write_text("# twenty hosts\n" + "\n".join(lines) + "\n")
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("".join(f"[127.0.0.1]:{port} {sshd20.host_public_key}\n" for port in sshd20.ports[:19]))
    out = io.StringIO()
    with pytest.raises(CommandError, match="2 host"):
        call_command("fleet_ssh", "bootstrap", str(hosts_file), "--pool", "metal", "--key", "fleet",
                     "--server", live_server.url, "--known-hosts", str(known_hosts), "--concurrency", "5",
                     "--offline", "--root", str(root), "--python", sys.executable, "--no-systemd", stdout=out)
    text = out.getvalue()

    run = BootstrapRun.objects.latest("pk")
    rows = {row.host.port: row for row in run.hosts.select_related("host")}
    assert len(rows) == 20 and run.concurrency == 5
    assert [rows[port].state for port in sshd20.ports[:18]] == [BootstrapState.UP_TO_DATE] * 18
    refused = rows[sshd20.ports[18]]
    assert refused.state == BootstrapState.FAILED
    assert f"refused the key {wrong_key.fingerprint}" in refused.message
    moved = rows[sshd20.ports[19]]
    assert moved.state == BootstrapState.FAILED
    assert "host key changed" in moved.message and fingerprint(sshd20.host_public_key) in moved.message
    assert SSHHost.objects.get(pk=changed.pk).host_key_state == HostKeyState.CHANGED
    # Hosts confirmed from the operator's known_hosts file are pinned, and the audit log says where from.
    assert SSHHost.objects.filter(host_key_state=HostKeyState.TRUSTED).count() == 19

    # Per-host progress lines with a progress bar, ending at 20/20, and the failures named at the end.
    assert text.count("connecting") >= 20 and "20/20" in text
    assert "] 20/20" in text.splitlines()[-4] or any("] 20/20" in line for line in text.splitlines())
    assert f"FAILED {sshd20.user}@127.0.0.1:{sshd20.ports[18]}" in text
    assert "up_to_date: 18" in text and "failed: 2" in text
    assert Node.objects.count() == 1  # nothing was enrolled twice

    # The API starts a run on a worker (here: inline) and answers 202 with the hosts' progress.
    monkeypatch.setattr(tasks.bootstrap_run, "delay", lambda run_id: tasks.bootstrap_run(run_id))
    api = APIClient()
    api.force_authenticate(operator)
    answer = api.post("/api/v1/ssh-bootstraps/", {"pool": pool.pk, "hosts": [first.pk], "concurrency": 2,
                                                  "options": {"offline": True, "root": str(root),
                                                              "python": sys.executable, "no_systemd": True}},
                      format="json")
    assert answer.status_code == 202, answer.json()
    again = api.get(f"/api/v1/ssh-bootstraps/{answer.json()['id']}/").json()
    assert again["state"] == "finished" and [h["state"] for h in again["hosts"]] == ["up_to_date"]
    assert "token" not in json.dumps(again).lower().replace("enrollment_token", "")


def test_bootstrap_refuses_bad_input(live_server, operator_api, sshd):
    pool = PoolFactory(provider=None)
    host = SSHHost.objects.create(address="127.0.0.1", port=sshd.port, username=sshd.user)
    answer = operator_api.post("/api/v1/ssh-bootstraps/", {"pool": pool.pk, "hosts": [host.pk]}, format="json")
    assert answer.status_code == 400 and "pool" in answer.json()["error"]["fields"]
    answer = operator_api.post("/api/v1/ssh-bootstraps/", {"pool": pool.pk, "hosts": []}, format="json")
    assert answer.status_code == 400 and "hosts" in answer.json()["error"]["fields"]
    answer = operator_api.post("/api/v1/ssh-bootstraps/", {"pool": PoolFactory().pk, "hosts": [host.pk],
                                                           "options": {"allow_actions": ["format_disk"]}},
                               format="json")
    assert answer.status_code == 400 and "options.allow_actions.0" in answer.json()["error"]["fields"]
    answer = operator_api.post("/api/v1/ssh-bootstraps/", {"pool": PoolFactory().pk, "hosts": [host.pk],
                                                           "options": {"root": "/tmp/../etc"}}, format="json")
    assert answer.status_code == 400 and "options.root" in answer.json()["error"]["fields"]
    assert not BootstrapRun.objects.exists() and not EnrollmentToken.objects.exists()
