"""The `slurm` executor against a real one-node Slurm cluster (slurmctld + slurmd + munged started by the test):
cordon drains with the incident as the reason, drain is done only when Slurm says the node is drained (its job
finished), return resumes it; locally and through the controller over SSH."""

import time

import pytest

from fleet.executors import interface as steps
from fleet.executors.backends.slurm import SlurmExecutor
from fleet.executors.services.executor_configs import executor_config_save
from fleet.executors.services.ssh_hosts import ssh_host_create, ssh_host_pin, ssh_key_import
from tests.factories import NodeFactory, PoolFactory, UserFactory
from tests.processes import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def ctx(node, kind, step=0, *, dry_run=False):
    return steps.StepContext(incident_id=5, incident_key="INC-5", node_id=node.pk, step_index=step, attempt=1,
                             kind=kind, params={}, dry_run=dry_run, idempotency_key=f"INC-5:{step}:1",
                             facts={"title": "Xid 79 on GPU 3"})


@pytest.fixture
def slurm_node(slurm):
    pool = PoolFactory()
    executor_config_save(actor=UserFactory(role="admin"), pool=pool, executor="slurm",
                         settings={"controller": "local", "slurm_conf": str(slurm.conf)})
    return NodeFactory(pool=pool, hostname=f"{slurm.node}.cluster.example")  # short host name = Slurm's name


def test_cordon_drain_and_return(slurm, slurm_node):
    executor = SlurmExecutor()
    assert steps.executor_named("slurm") is not None and "reboot" not in executor.kinds
    dry = executor.start(ctx(slurm_node, "cordon", dry_run=True))
    assert dry.status == "done" and 'Reason="fleet: INC-5 Xid 79 on GPU 3"' in dry.message
    assert slurm.state() == "IDLE"

    job = slurm.run("sbatch", "--parsable", "-o", "/dev/null", "--wrap", "sleep 6").strip()
    wait_for(lambda: slurm.run("squeue", "-h", "-j", job, "-o", "%T").strip() == "RUNNING", timeout=30,
             what="the job to run")

    cordon = executor.start(ctx(slurm_node, "cordon", 0))
    assert cordon.status == "done", cordon.message
    base, *flags = cordon.output["slurm_state"].split("+")  # (a busy slurmd may add NOT_RESPONDING)
    assert base in ("ALLOCATED", "MIXED") and "DRAIN" in flags
    assert cordon.output["slurm_reason"] == "fleet: INC-5 Xid 79 on GPU 3"

    drain = executor.start(ctx(slurm_node, "drain", 1))
    assert (drain.status, drain.waiting_on) == ("waiting", "executor"), drain.message
    assert drain.output["jobs"] == [job]
    done = wait_for(lambda: (o := executor.poll(ctx(slurm_node, "drain", 1))).status == "done" and o,
                    timeout=60, interval=1, what="Slurm to report the node drained")
    assert done.output["slurm_state"].startswith("IDLE+") and "DRAIN" in done.output["slurm_state"].split("+")
    assert "drained" in done.message

    back = executor.start(ctx(slurm_node, "return_to_service", 2))
    assert back.status == "done", back.message
    assert "DRAIN" not in slurm.state()


def test_through_the_controller_over_ssh(slurm, sshd):
    admin = UserFactory(role="admin", username="slurm-admin")
    key = ssh_key_import(actor=admin, name="ctl", private_key=sshd.user_private_key)
    host = ssh_host_create(actor=admin, address="127.0.0.1", port=sshd.port, username=sshd.user, key=key,
                           scan=False)
    ssh_host_pin(host=host, actor=admin, public_key=sshd.host_public_key, source="test")
    pool = PoolFactory()
    executor_config_save(actor=admin, pool=pool, executor="slurm",
                         settings={"controller": "ssh", "ssh_host": host.pk, "slurm_conf": str(slurm.conf)})
    node = NodeFactory(pool=pool, hostname="gpu-17", labels={"slurm-node": slurm.node})
    executor = SlurmExecutor()
    cordon = executor.start(ctx(node, "cordon", 0))
    assert cordon.status == "done", cordon.message
    assert "DRAIN" in slurm.state().split("+")
    time.sleep(0.5)
    assert executor.start(ctx(node, "return_to_service", 1)).status == "done"
    assert "DRAIN" not in slurm.state()


def test_unknown_node_fails_and_missing_settings_wait(slurm, slurm_node):
    no_such = NodeFactory(pool=slurm_node.pool, hostname="not-in-slurm")
    failed = SlurmExecutor().start(ctx(no_such, "cordon"))
    assert failed.status == "failed" and "not-in-slurm" in failed.message
    unconfigured = SlurmExecutor().start(ctx(NodeFactory(pool=PoolFactory()), "cordon"))
    assert (unconfigured.status, unconfigured.waiting_on) == ("waiting", "operator")
