"""Real processes for integration tests: a Celery worker bound to the test database."""

import sys

import pytest

from tests.processes import running


@pytest.fixture(scope="session")
def celery_worker(django_db_setup, django_db_blocker, tmp_path_factory):
    """A real `celery worker` process, consuming the real broker, writing to the test database."""
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
