"""Bootstrap: install the agent on many SSH hosts at once, by running the very `install.sh` the one-line install
uses, with bounded concurrency, a timeout per host and progress per host.

The run gets its own enrolment token for the pool (as many uses as hosts, revoked when the run ends); its key
reaches each host on the SSH channel's stdin, never on a command line of ours, and is kept encrypted until the
run ends. A host whose agent is already installed from this server and enrolled is left alone (`up_to_date`), so
re-running a bootstrap is cheap and changes nothing; `force` runs install.sh anyway (it upgrades in place and
keeps the credential). A host that cannot be reached, refuses the key or shows another host key fails on its
own with the reason; the others go on.
"""

from __future__ import annotations

import asyncio
import queue
import re
import shlex
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from rest_framework.exceptions import ValidationError

from fleet.core import crypto
from fleet.core.api.errors import DomainError
from fleet.core.models import AuditEntry
from fleet.core.services import audit_record
from fleet.inventory.choices import BillingMode
from fleet.inventory.models import Node
from fleet.telemetry.services.enrollment import enrollment_token_create, enrollment_token_revoke
from fleet_agent.protocol import ACTION_KINDS

from .. import ssh
from ..choices import BOOTSTRAP_FINISHED, BootstrapState, RunState
from ..models import BootstrapHost, BootstrapRun, SSHHost
from .ssh_hosts import ssh_target

_SAFE_PATH = re.compile(r"^/[A-Za-z0-9._/+-]*$")
_SAFE_PROGRAM = re.compile(r"^[A-Za-z0-9._/+-]+$")
MAX_HOSTS = 5000


@dataclass(frozen=True)
class BootstrapOptions:
    """install.sh options a bootstrap passes on (see the script's header)."""

    offline: bool = False
    allow_actions: tuple[str, ...] = ()
    root: str = ""
    python: str = ""
    no_systemd: bool = False
    force: bool = False

    def validated(self) -> BootstrapOptions:
        unknown = sorted(set(self.allow_actions) - set(ACTION_KINDS))
        if unknown:
            raise ValidationError({"options.allow_actions": [f"Unknown action kind(s): {', '.join(unknown)}; "
                                                             f"known: {', '.join(ACTION_KINDS)}."]})
        if self.root and (not _SAFE_PATH.match(self.root) or ".." in self.root.split("/")):
            raise ValidationError({"options.root": ["An absolute path of letters, digits and ._/+- only."]})
        if self.python and not _SAFE_PROGRAM.match(self.python):
            raise ValidationError({"options.python": ["A program name or path of letters, digits and ._/+- only."]})
        return BootstrapOptions(self.offline, tuple(sorted(set(self.allow_actions))), self.root, self.python,
                                self.no_systemd, self.force)

    def install_args(self) -> list[str]:
        args = []
        if self.offline:
            args.append("--offline")
        if self.allow_actions:
            args += ["--allow-actions", ",".join(self.allow_actions)]
        if self.root:
            args += ["--root", self.root]
        if self.python:
            args += ["--python", self.python]
        if self.no_systemd:
            args.append("--no-systemd")
        return args

    @classmethod
    def from_dict(cls, data: dict) -> BootstrapOptions:
        return cls(**{**data, "allow_actions": tuple(data.get("allow_actions") or ())})


def served_agent_version() -> str:
    """The agent version /install.sh hands out (from the wheel it serves)."""
    wheel_dir = Path(settings.AGENT_WHEEL_DIR)
    wheels = sorted(p.name for p in wheel_dir.glob("fleet_agent-*.whl")) if wheel_dir.exists() else []
    if not wheels:
        raise DomainError("This server has no agent wheel to install (run `manage.py build_agent_wheels`).",
                          code="no_agent_wheel")
    return wheels[-1].split("-")[1]


def bootstrap_create(*, actor, pool, hosts: list[SSHHost], server_url: str, options: BootstrapOptions | None = None,
                     concurrency: int | None = None, host_timeout_s: int | None = None) -> BootstrapRun:
    """A queued run for `hosts` into `pool`, with an enrolment token of its own. Runs via `bootstrap_execute`."""
    options = (options or BootstrapOptions()).validated()
    if not hosts:
        raise ValidationError({"hosts": ["Name at least one host."]})
    if len(hosts) > MAX_HOSTS:
        raise ValidationError({"hosts": [f"At most {MAX_HOSTS} hosts per run."]})
    if pool.provider_id is None:
        raise ValidationError({"pool": [f"Pool {pool} has no provider; set one so enrolled nodes get it."]})
    if not pool.delivery_form:
        raise ValidationError({"pool": [f"Pool {pool} has no delivery form; set one so enrolled nodes get it."]})
    version = served_agent_version()
    concurrency = max(1, min(concurrency or settings.SSH_BOOTSTRAP_CONCURRENCY, 100))
    host_timeout_s = max(10, min(host_timeout_s or settings.SSH_BOOTSTRAP_HOST_TIMEOUT_S, 3600))
    waves = -(-len(hosts) // concurrency)
    with transaction.atomic():
        token, key = enrollment_token_create(
            actor=actor, name=f"ssh bootstrap into {pool}"[:100], provider=pool.provider, site=pool.site,
            pool=pool, delivery_form=pool.delivery_form, billing_mode=pool.billing_mode or BillingMode.RESERVED,
            max_uses=len(hosts), expires_at=timezone.now() + timedelta(seconds=host_timeout_s * waves + 3600))
        run = BootstrapRun.objects.create(
            pool=pool, options={**asdict(options), "allow_actions": list(options.allow_actions),
                                "server": server_url.rstrip("/"), "agent_version": version},
            concurrency=concurrency, host_timeout_s=host_timeout_s, enrollment_token=token,
            token_encrypted=crypto.encrypt(key), created_by=actor if getattr(actor, "is_authenticated", False)
            else None)
        BootstrapHost.objects.bulk_create([BootstrapHost(run=run, host=host) for host in hosts])
        audit_record(actor=actor, action=AuditEntry.Action.CREATE, instance=run,
                     after={"pool": pool.pk, "hosts": [h.pk for h in hosts], "options": run.options,
                            "concurrency": concurrency, "host_timeout_s": host_timeout_s})
    return run


@dataclass
class Progress:
    """One host's state change, as the CLI and the console see it."""

    row_id: int
    host: str
    state: str
    message: str = ""
    output_tail: str = ""
    machine_id: str = ""
    extra: dict = field(default_factory=dict)


def remote_install_script(*, server: str, options: BootstrapOptions) -> str:
    """Fetch /install.sh from the server and run it with the token read from stdin (sudo -n unless root)."""
    fetch = ('if command -v curl >/dev/null 2>&1; then curl -fsSL "$SERVER/install.sh" -o "$T/install.sh"; '
             'else python3 -c \'import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])\' '
             '"$SERVER/install.sh" "$T/install.sh"; fi')
    args = " ".join(shlex.quote(a) for a in options.install_args())
    return "\n".join([
        "set -eu", "umask 077", f"SERVER={shlex.quote(server)}",
        'if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo -n"; fi',
        'T=$(mktemp -d)', "trap 'rm -rf \"$T\"' EXIT INT TERM",
        'IFS= read -r TOKEN', fetch,
        f'$SUDO sh "$T/install.sh" --token "$TOKEN" {args}',
    ])


def probe_command(options: BootstrapOptions) -> str:
    """Prints the installed agent's version when it is installed *and* enrolled (nothing otherwise)."""
    root = shlex.quote(options.root.rstrip("/"))
    return (f'R={root}; if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo -n"; fi; '
            '$SUDO test -s "$R/var/lib/fleet-agent/credential.json" && '
            '"$R/opt/fleet-agent/venv/bin/fleet-agent" --version 2>/dev/null || true')


async def _bootstrap_host(row_id: int, target: ssh.Target, *, server: str, token: str, version: str,
                          options: BootstrapOptions, emit: Callable[[Progress], None]) -> None:
    label = target.label
    emit(Progress(row_id, label, BootstrapState.CONNECTING))
    async with ssh.connect(target, timeout=settings.SSH_CONNECT_TIMEOUT_S) as connection:
        emit(Progress(row_id, label, BootstrapState.CHECKING, "connected; checking for an installed agent"))
        machine = await ssh.run(connection, "cat /etc/machine-id 2>/dev/null || true", timeout=30)
        machine_id = machine.stdout.strip()
        probe = await ssh.run(connection, probe_command(options), timeout=60)
        installed = probe.stdout.strip().split()[-1] if probe.stdout.strip() else ""
        if installed == version and not options.force:
            emit(Progress(row_id, label, BootstrapState.UP_TO_DATE,
                          f"fleet-agent {installed} is installed and enrolled; nothing to do", machine_id=machine_id))
            return
        emit(Progress(row_id, label, BootstrapState.INSTALLING,
                      f"running install.sh ({'upgrade from ' + installed if installed else 'fresh install'})",
                      machine_id=machine_id))
        result = await ssh.run(connection, remote_install_script(server=server, options=options),
                               stdin=token + "\n", timeout=settings.SSH_BOOTSTRAP_HOST_TIMEOUT_S)
    output = ssh.tail((result.stdout + ("\n" + result.stderr if result.stderr else "")).replace(token, "fe_…"),
                      16 * 1024)
    if result.exit_status != 0:
        last = [line for line in output.strip().splitlines() if line.strip()][-1:] or ["no output"]
        emit(Progress(row_id, label, BootstrapState.FAILED,
                      f"install.sh exited {result.exit_status}: {last[0][:500]}", output, machine_id))
        return
    emit(Progress(row_id, label, BootstrapState.DONE, f"fleet-agent {version} installed and enrolled", output,
                  machine_id))


async def _run_all(jobs: list[tuple[int, ssh.Target]], *, server: str, token: str, version: str,
                   options: BootstrapOptions, concurrency: int, host_timeout_s: float,
                   emit: Callable[[Progress], None]) -> None:
    gate = asyncio.Semaphore(concurrency)

    async def one(row_id: int, target: ssh.Target) -> None:
        async with gate:
            try:
                await asyncio.wait_for(_bootstrap_host(row_id, target, server=server, token=token, version=version,
                                                       options=options, emit=emit), host_timeout_s)
            except TimeoutError:
                emit(Progress(row_id, target.label, BootstrapState.FAILED,
                              f"timed out after {host_timeout_s:.0f} s (per-host timeout)"))
            except ssh.SSHFailure as failure:
                emit(Progress(row_id, target.label, BootstrapState.FAILED, failure.message,
                              extra={"code": failure.code, "offered_key": failure.offered_key,
                                     "offered_fingerprint": failure.offered_fingerprint}))
            except Exception as exc:  # noqa: BLE001 - one host's surprise must not stop the others
                emit(Progress(row_id, target.label, BootstrapState.FAILED, f"{type(exc).__name__}: {exc}"[:500]))

    await asyncio.gather(*(one(row_id, target) for row_id, target in jobs))


def bootstrap_execute(*, run_id: int, on_progress: Callable[[BootstrapHost], None] | None = None) -> BootstrapRun:
    """Run a queued bootstrap to the end. The SSH work runs on an event loop in a helper thread; every database
    write happens here, in the calling thread, as progress arrives (Django connections are per thread)."""
    with transaction.atomic():
        run = BootstrapRun.objects.select_for_update().get(pk=run_id)
        if run.state == RunState.RUNNING:
            # Handed out again after the worker running it died: what was in flight is not run twice.
            for row in run.hosts.exclude(state__in=sorted(BOOTSTRAP_FINISHED)).select_related("host"):
                _apply(row, Progress(row.pk, str(row.host), BootstrapState.FAILED,
                                     "interrupted: the worker running this bootstrap stopped; run it again (hosts "
                                     "already installed are left alone)"), on_progress)
            return _finish(run)
        if run.state != RunState.QUEUED:
            return run
        run.state, run.started_at = RunState.RUNNING, timezone.now()
        run.save(update_fields=["state", "started_at"])
    options = BootstrapOptions.from_dict({k: v for k, v in run.options.items()
                                          if k in BootstrapOptions.__dataclass_fields__})
    rows = {row.pk: row for row in run.hosts.select_related("host__key", "host__jump_host")}
    jobs: list[tuple[int, ssh.Target]] = []
    for row in rows.values():
        try:
            jobs.append((row.pk, ssh_target(row.host)))
        except ssh.SSHFailure as failure:
            _apply(row, Progress(row.pk, str(row.host), BootstrapState.FAILED, failure.message), on_progress)
    token = crypto.decrypt(run.token_encrypted).decode() if jobs else ""
    updates: queue.Queue = queue.Queue()
    failure: list[BaseException] = []

    def loop() -> None:
        try:
            asyncio.run(_run_all(jobs, server=run.options["server"], token=token,
                                 version=run.options["agent_version"], options=options,
                                 concurrency=run.concurrency, host_timeout_s=run.host_timeout_s, emit=updates.put))
        except BaseException as exc:  # noqa: BLE001 - reported below, in the calling thread
            failure.append(exc)
        finally:
            updates.put(None)

    worker = threading.Thread(target=loop, name=f"bootstrap-{run.pk}", daemon=True)
    worker.start()
    while (progress := updates.get()) is not None:
        _apply(rows[progress.row_id], progress, on_progress)
    worker.join()
    for row in rows.values():  # a host the loop never finished (it crashed) is not left "running"
        if row.state not in BOOTSTRAP_FINISHED:
            reason = f"bootstrap stopped: {failure[0]}" if failure else "bootstrap stopped"
            _apply(row, Progress(row.pk, str(row.host), BootstrapState.FAILED, reason), on_progress)
    return _finish(run)


def _apply(row: BootstrapHost, progress: Progress, on_progress) -> None:
    from .ssh_hosts import ssh_host_failed, ssh_host_reached

    now = timezone.now()
    row.state, row.message = progress.state, progress.message[:1000]
    if progress.output_tail:
        row.output_tail = progress.output_tail
    if row.started_at is None:
        row.started_at = now
    if progress.state in BOOTSTRAP_FINISHED:
        row.finished_at = now
        if progress.state == BootstrapState.FAILED:
            extra = progress.extra or {}
            ssh_host_failed(row.host, ssh.SSHFailure(extra.get("code", ""), progress.message,
                                                     offered_key=extra.get("offered_key", ""),
                                                     offered_fingerprint=extra.get("offered_fingerprint", "")))
        else:
            ssh_host_reached(row.host)
    if progress.machine_id and row.node_id is None:
        node = Node.objects.filter(machine_id=progress.machine_id).first()
        if node is not None:
            row.node = node
            if row.host.node_id is None and not SSHHost.objects.filter(node=node).exists():
                SSHHost.objects.filter(pk=row.host_id).update(node=node)
                row.host.node = node
    row.save()
    if on_progress is not None:
        on_progress(row)


def _finish(run: BootstrapRun) -> BootstrapRun:
    with transaction.atomic():
        run.state, run.finished_at, run.token_encrypted = RunState.FINISHED, timezone.now(), None
        run.save(update_fields=["state", "finished_at", "token_encrypted"])
        if run.enrollment_token is not None:
            enrollment_token_revoke(token=run.enrollment_token, actor=run.created_by)
    return run


def bootstrap_summary(run: BootstrapRun) -> dict[str, int]:
    counts = {state: 0 for state in BootstrapState.values}
    for state in run.hosts.values_list("state", flat=True):
        counts[state] += 1
    return counts
