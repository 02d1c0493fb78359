"""A real one-node Slurm cluster for the Slurm executor's tests: munged with a generated key, slurmctld and slurmd
from Debian's packages (slurmctld slurmd slurm-client munge), all on high ports of 127.0.0.1 with their state in a
temporary directory. Without the binaries the tests skip, unless FLEET_SLURM_REQUIRED=1 (CI) makes that a failure.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.sshd import free_ports

BINARIES = ("munged", "slurmctld", "slurmd", "scontrol", "sbatch", "squeue")
NODE = "fleetnode1"


def _which(name: str) -> str | None:
    return shutil.which(name) or next((f"{d}/{name}" for d in ("/usr/sbin", "/usr/bin") if
                                       os.access(f"{d}/{name}", os.X_OK)), None)


@dataclass
class SlurmCluster:
    directory: Path
    conf: Path
    node: str
    processes: list[subprocess.Popen]

    def env(self) -> dict:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *argv: str) -> str:
        done = subprocess.run([_which(argv[0]) or argv[0], *argv[1:]], capture_output=True, text=True, timeout=60,
                              env=self.env())
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def state(self) -> str:
        line = self.run("scontrol", "show", "node", self.node, "-o")
        return line.split("State=", 1)[1].split()[0]

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
                         for p in sorted(self.directory.glob("*.log")))


def start_slurm(directory: Path) -> SlurmCluster:
    missing = [name for name in BINARIES if _which(name) is None]
    if missing:
        message = f"Slurm is not installed ({', '.join(missing)} missing; Debian: slurmctld slurmd slurm-client munge)"
        if os.environ.get("FLEET_SLURM_REQUIRED") == "1":
            pytest.fail(message + " and FLEET_SLURM_REQUIRED=1")
        pytest.skip(message)
    directory.mkdir(parents=True, exist_ok=True)
    for sub in ("state", "spool"):
        (directory / sub).mkdir(exist_ok=True)
    key = directory / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    socket_path = directory / "munge.sock"
    processes = [subprocess.Popen(
        [_which("munged"), "-F", "-f", f"--key-file={key}", f"--socket={socket_path}",
         f"--pid-file={directory / 'munged.pid'}", f"--seed-file={directory / 'munged.seed'}",
         f"--log-file={directory / 'munged.log'}"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)]
    _wait(lambda: socket_path.exists(), processes, directory, "munged")
    ctld_port, slurmd_port = free_ports(2)
    host = socket.gethostname().split(".")[0]
    conf = directory / "slurm.conf"
    conf.write_text("\n".join([
        "ClusterName=fleettest", f"SlurmctldHost={host}(127.0.0.1)", f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={slurmd_port}", "AuthType=auth/munge", f"AuthInfo=socket={socket_path}", "CredType=cred/munge",
        "SlurmUser=root", "SlurmdUser=root", f"StateSaveLocation={directory / 'state'}",
        f"SlurmdSpoolDir={directory / 'spool'}", f"SlurmctldPidFile={directory / 'slurmctld.pid'}",
        f"SlurmdPidFile={directory / 'slurmd.pid'}", f"SlurmctldLogFile={directory / 'slurmctld.log'}",
        f"SlurmdLogFile={directory / 'slurmd.log'}", "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none", "SchedulerType=sched/builtin", "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core", "MpiDefault=none", "ReturnToService=2",
        f"NodeName={NODE} NodeAddr=127.0.0.1 NodeHostname={host} CPUs=1 RealMemory=100 State=UNKNOWN",
        "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP", ""]))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    processes.append(subprocess.Popen([_which("slurmctld"), "-D", "-f", str(conf)], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
    cluster = SlurmCluster(directory, conf, NODE, processes)

    def controller_up() -> bool:
        return subprocess.run([_which("scontrol"), "ping"], capture_output=True, text=True, env=env,
                              timeout=10).stdout.count("UP") > 0

    _wait(controller_up, processes, directory, "slurmctld")
    processes.append(subprocess.Popen([_which("slurmd"), "-D", "-f", str(conf), "-N", NODE], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
    _wait(lambda: cluster.state().startswith("IDLE"), processes, directory, "slurmd (node IDLE)")
    return cluster


def _wait(ready, processes, directory: Path, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if ready():
                return
        except (AssertionError, OSError, subprocess.SubprocessError):
            pass
        if any(p.poll() is not None for p in processes) or time.monotonic() > deadline:
            stop_slurm(SlurmCluster(directory, directory / "slurm.conf", NODE, processes))
            logs = "\n".join(p.read_text(errors="replace")[-2000:] for p in directory.glob("*.log"))
            raise RuntimeError(f"{what} did not come up:\n{logs}")
        time.sleep(0.3)


def stop_slurm(cluster: SlurmCluster) -> None:
    for process in reversed(cluster.processes):
        process.terminate()
    for process in cluster.processes:
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
