"""The hosts file of `manage.py fleet_ssh bootstrap` and its progress bar."""

import pytest
from django.core.management.base import CommandError

from fleet.executors.management.commands.fleet_ssh import parse_hosts, progress_bar


def test_hosts_file_lines():
    hosts = parse_hosts("# rack 1\nroot@10.0.0.1\n10.0.0.2:2222 key=rack\nadmin@[fe80::1]:22 jump=bastion:2200\n\n",
                        default_user="ubuntu", default_key="fleet")
    assert [(h.user, h.address, h.port, h.key, h.jump) for h in hosts] == [
        ("root", "10.0.0.1", 22, "fleet", ""), ("ubuntu", "10.0.0.2", 2222, "rack", ""),
        ("admin", "fe80::1", 22, "fleet", "bastion:2200")]


@pytest.mark.parametrize("text, message", [("", "names no host"), ("10.0.0.1:99999", "out of range"),
                                           ("10.0.0.1 colour=red", "line 1"), ("a b", "line 1")])
def test_bad_hosts_files_name_the_line(text, message):
    with pytest.raises(CommandError, match=message):
        parse_hosts(text, default_user="root", default_key="")


def test_progress_bar():
    assert progress_bar(0, 20) == "[" + "." * 30 + "] 0/20"
    assert progress_bar(10, 20) == "[" + "#" * 15 + "." * 15 + "] 10/20"
    assert progress_bar(20, 20).startswith("[" + "#" * 30 + "]")


@pytest.mark.django_db
def test_a_bootstrap_redelivered_after_its_worker_died_runs_nothing_twice():
    from fleet.executors.choices import BootstrapState, RunState
    from fleet.executors.models import BootstrapHost, BootstrapRun, SSHHost
    from fleet.executors.services.bootstrap import bootstrap_execute
    from tests.factories import PoolFactory

    run = BootstrapRun.objects.create(pool=PoolFactory(), state=RunState.RUNNING, options={"server": "http://x"})
    done = BootstrapHost.objects.create(run=run, host=SSHHost.objects.create(address="a", username="root"),
                                        state=BootstrapState.DONE)
    stuck = BootstrapHost.objects.create(run=run, host=SSHHost.objects.create(address="b", username="root"),
                                         state=BootstrapState.INSTALLING)
    run = bootstrap_execute(run_id=run.pk)
    assert run.state == RunState.FINISHED
    stuck.refresh_from_db()
    done.refresh_from_db()
    assert (stuck.state, done.state) == (BootstrapState.FAILED, BootstrapState.DONE)
    assert "interrupted" in stuck.message
