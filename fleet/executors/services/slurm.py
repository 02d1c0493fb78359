"""Slurm through `scontrol`, on the controller (over SSH) or here (when the control plane runs beside it).

Cordon is `scontrol update NodeName=X State=DRAIN Reason="fleet: <incident>"`; return is `State=RESUME`; and every
change is read back (`scontrol show node X -o`), so a drain is "done" only when Slurm itself says the node is
drained: drain flag set and no job left on it (IDLE+DRAIN or DOWN+DRAIN, not ALLOCATED/MIXED/COMPLETING+DRAIN).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import dataclass

from django.conf import settings

from .. import ssh
from ..models import ExecutorConfig, SSHHost
from .ssh_hosts import run_async, ssh_host_failed, ssh_target

COMMAND_TIMEOUT_S = 60.0
BUSY_STATES = frozenset({"ALLOCATED", "MIXED", "COMPLETING"})


class SlurmError(Exception):
    pass


@dataclass(frozen=True)
class SlurmNode:
    name: str
    state: str  # the base state: IDLE, ALLOCATED, MIXED, DOWN, …
    flags: frozenset[str]  # DRAIN, COMPLETING, NOT_RESPONDING, …
    reason: str

    @property
    def draining_or_drained(self) -> bool:
        return "DRAIN" in self.flags

    @property
    def drained(self) -> bool:
        """What Slurm calls "drained": the drain flag and nothing running any more."""
        return self.draining_or_drained and self.state not in BUSY_STATES and "COMPLETING" not in self.flags

    @property
    def label(self) -> str:
        return "+".join([self.state, *sorted(self.flags)])


def parse_node(text: str, name: str) -> SlurmNode:
    """`scontrol show node NAME -o`: one line of key=value pairs; Reason runs to the end of the line."""
    state = re.search(r"(?:^|\s)State=(\S+)", text)
    if state is None:
        raise SlurmError(f"scontrol did not show node {name}: {text.strip()[:300] or 'no output'}")
    base, *flags = state.group(1).split("+")
    reason = re.search(r"(?:^|\s)Reason=(.*?)(?:\s\[[^\]]*\])?\s*$", text.strip())
    return SlurmNode(name, base.rstrip("*"), frozenset(flags), reason.group(1).strip() if reason else "")


def _run(config: ExecutorConfig, argv: list[str]) -> tuple[int | None, str, str]:
    conf = config.settings.get("slurm_conf")
    if config.settings.get("controller") == "ssh":
        host = SSHHost.objects.get(pk=config.settings["ssh_host"])
        command = (f"SLURM_CONF={shlex.quote(conf)} " if conf else "") + " ".join(shlex.quote(a) for a in argv)
        try:
            result = run_async(ssh.run_on(ssh_target(host), command, timeout=COMMAND_TIMEOUT_S,
                                          connect_timeout=settings.SSH_CONNECT_TIMEOUT_S))
        except ssh.SSHFailure as failure:
            ssh_host_failed(host, failure)
            raise SlurmError(f"the Slurm controller {host} cannot be reached: {failure.message}") from None
        return result.exit_status, result.stdout, result.stderr
    env = {**os.environ, "SLURM_CONF": conf} if conf else None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, env=env)
    except FileNotFoundError:
        raise SlurmError(f"{argv[0]} is not installed here; run it on the controller (settings.controller=ssh)") \
            from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{argv[0]} did not answer within {COMMAND_TIMEOUT_S:.0f} s") from None
    return done.returncode, done.stdout, done.stderr


def _checked(config: ExecutorConfig, argv: list[str]) -> str:
    status, out, err = _run(config, argv)
    if status != 0:
        raise SlurmError(f"{' '.join(argv[:4])} … failed (exit {status}): {(err or out).strip()[:500]}")
    return out


def slurm_node(config: ExecutorConfig, name: str) -> SlurmNode:
    return parse_node(_checked(config, [config.settings.get("scontrol", "scontrol"), "show", "node", name, "-o"]),
                      name)


def slurm_jobs_on(config: ExecutorConfig, name: str) -> list[str]:
    out = _checked(config, [config.settings.get("squeue", "squeue"), "-h", "-w", name, "-t", "RUNNING,COMPLETING",
                            "-o", "%i"])
    return [line.strip() for line in out.splitlines() if line.strip()]


def slurm_drain(config: ExecutorConfig, name: str, reason: str) -> SlurmNode:
    _checked(config, [config.settings.get("scontrol", "scontrol"), "update", f"NodeName={name}", "State=DRAIN",
                      f"Reason={reason[:200]}"])
    return slurm_node(config, name)


def slurm_resume(config: ExecutorConfig, name: str) -> SlurmNode:
    _checked(config, [config.settings.get("scontrol", "scontrol"), "update", f"NodeName={name}", "State=RESUME"])
    return slurm_node(config, name)
