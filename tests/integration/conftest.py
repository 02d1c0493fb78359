"""Real processes for integration tests (a Celery worker, sshd, Slurm, moto, a real agent), on the test database."""

import os
import socket
import sys
from pathlib import Path

import pytest

from tests.processes import running
from tests.sshd import free_ports


@pytest.fixture(scope="module")
def celery_worker(django_db_setup, django_db_blocker, tmp_path_factory):
    """A real `celery worker` process, consuming the real broker, writing to the test database. One per module
    (purging the queue when it starts), so no worker is left consuming while other modules run their own."""
    log = tmp_path_factory.mktemp("worker") / "worker.log"
    command = [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo", "--loglevel", "INFO",
               "--without-gossip", "--without-mingle", "--without-heartbeat", "--purge", "-n", "test@%h"]
    with running(command, log=log, ready=lambda: log.exists() and b"ready." in log.read_bytes(),
                 what="celery worker") as proc:
        yield proc


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    """A real OpenSSH sshd on a high port of 127.0.0.1 (tests/sshd.py)."""
    from tests.sshd import start_sshd, stop_sshd

    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    stop_sshd(server)


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """A real one-node Slurm cluster (tests/slurm.py)."""
    from tests.slurm import start_slurm, stop_slurm

    cluster = start_slurm(tmp_path_factory.mktemp("slurm"))
    yield cluster
    stop_slurm(cluster)


# -- AWS: moto in server mode -----------------------------------------------------------------------------------
AWS_KEY_ID, AWS_SECRET = "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    binary = Path(sys.executable).parent / "moto_server"
    if not binary.exists():
        pytest.skip("moto[server] is not installed (it is in the dev extra)")
    [port] = free_ports(1)

    def up() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            return False

    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with running([str(binary), "-H", "127.0.0.1", "-p", str(port)], log=log, ready=up, what="moto_server"):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
def fleet_on_aws(moto):
    """An Auto Scaling group of two instances behind a launch template, and a pool set up for it."""
    import boto3

    from tests.factories import PoolFactory, UserFactory

    kwargs = {"region_name": "us-east-1", "endpoint_url": moto, "aws_access_key_id": AWS_KEY_ID,
              "aws_secret_access_key": AWS_SECRET}
    ec2, autoscaling = boto3.client("ec2", **kwargs), boto3.client("autoscaling", **kwargs)
    name = f"gpus-{UserFactory._meta.model.objects.count()}-{id(kwargs)}"
    template = ec2.create_launch_template(LaunchTemplateName=name, LaunchTemplateData={
        "ImageId": "ami-12c6146b", "InstanceType": "p5.48xlarge"})["LaunchTemplate"]["LaunchTemplateId"]
    autoscaling.create_auto_scaling_group(AutoScalingGroupName=name, MinSize=2, MaxSize=2, DesiredCapacity=2,
                                          LaunchTemplate={"LaunchTemplateId": template, "Version": "$Latest"},
                                          AvailabilityZones=["us-east-1a"])

    def members() -> list[str]:
        group = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"][0]
        return sorted(i["InstanceId"] for i in group["Instances"])

    def state(instance_id: str) -> str:
        return ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]["State"]["Name"]

    pool = PoolFactory()
    return {"ec2": ec2, "members": members, "state": state, "template": template, "pool": pool, "endpoint": moto,
            "key_id": AWS_KEY_ID, "secret": AWS_SECRET}



# -- a real agent process -----------------------------------------------------------------------------------------
@pytest.fixture
def agent_node(live_server, tmp_path):
    """An enrolled node whose real agent (`fleet-agent run`, started with `node.start_agent()`) allows evidence,
    reboot and its hooks (not verify), with stand-ins for nvidia-smi and the reboot command; /proc is a fixture
    copy whose boot id the stand-in reboot changes."""
    import shutil
    import subprocess
    import uuid

    from fleet.inventory.models import Node
    from fleet.telemetry.services.enrollment import enrollment_token_create
    from tests.factories import PoolFactory, ProviderFactory, UserFactory

    operator = UserFactory(username="e2e-op", role="operator")
    provider = ProviderFactory(kind="own", cloud="")
    pool = PoolFactory(provider=provider, delivery_form="bare_metal_owned", billing_mode="reserved")
    _, token = enrollment_token_create(actor=operator, name="e2e", provider=provider, pool=pool,
                                       delivery_form="bare_metal_owned", billing_mode="reserved")
    proc = tmp_path / "proc"
    shutil.copytree(Path(__file__).parents[1] / "agents/fixtures/proc/t0", proc)
    boot_id = proc / "sys/kernel/random/boot_id"
    boot_id.write_text(f"{uuid.uuid4()}\n")
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "slow-drain").write_text(f"#!/bin/sh\necho started >> {tmp_path / 'drain.log'}\nsleep 20\n")
    for name in ("cordon", "drain", "return_to_service"):
        (hooks / name).write_text(f"#!/bin/sh\necho {name} >> {tmp_path / 'hooks.log'}\n")
    stand_ins = {"slow-drain": hooks, "cordon": hooks, "drain": hooks, "return_to_service": hooks}
    for name, directory in stand_ins.items():
        (directory / name).chmod(0o755)
    nvidia_smi = tmp_path / "nvidia-smi"
    nvidia_smi.write_text("#!/bin/sh\necho '<nvidia_smi_log><driver_version>550.54.15</driver_version>"
                          "</nvidia_smi_log>'\n")
    reboot = tmp_path / "reboot"
    reboot.write_text(f"#!/bin/sh\ncat /proc/sys/kernel/random/uuid > {boot_id}\n")
    for script in (nvidia_smi, reboot):
        script.chmod(0o755)
    conf = tmp_path / "agent.toml"
    conf.write_text("\n".join([
        f'server = "{live_server.url}"', f'state_dir = "{tmp_path / "state"}"', "interval_s = 1",
        'kernel_log = "off"', 'cloud = "none"', 'nvml_events = "off"', "stack_refresh_s = 3600",
        f'proc_root = "{proc}"',
        "[actions]", 'allow = ["collect_evidence", "reboot", "run_hook"]', f'hooks_dir = "{hooks}"',
        f'nvidia_smi = "{nvidia_smi}"', f'reboot_command = ["{reboot}"]', ""]))
    enrolled = subprocess.run([sys.executable, "-m", "fleet_agent", "enroll", "--config", str(conf), "--token",
                               token], capture_output=True, text=True, timeout=60)
    assert enrolled.returncode == 0, enrolled.stdout + enrolled.stderr
    node = Node.objects.get()
    processes = []

    def start():
        log = (tmp_path / f"agent-{len(processes)}.log").open("wb")
        process = subprocess.Popen([sys.executable, "-m", "fleet_agent", "run", "--config", str(conf)],
                                   stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        processes.append(process)
        return process

    node.start_agent = start
    node.tmp = tmp_path
    yield node
    for process in processes:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
