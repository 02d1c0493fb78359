"""`manage.py fleet_ssh bootstrap --pool P hosts.txt`: install the agent on many hosts over SSH, with a progress
bar and a line per host; `manage.py fleet_ssh rotate-secrets`: re-encrypt stored secrets under the newest key.

hosts.txt has one host per line: `[user@]address[:port] [key=NAME] [jump=ADDRESS[:PORT]]`; `#` starts a comment.
Host keys are never trusted silently: a host already confirmed in the console keeps its pin; otherwise the key it
offers is pinned when it is in the `--known-hosts` file you give, or when you answer `yes` to its fingerprint at
the prompt (on a terminal). A host left unconfirmed fails with that reason; the others go on.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

import asyncssh
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from rest_framework.exceptions import ValidationError

from fleet.core.crypto import reencrypt_all
from fleet.inventory.models import Pool
from fleet_agent.protocol import ACTION_KINDS

from ...choices import BOOTSTRAP_FINISHED, BootstrapState, HostKeyState
from ...models import BootstrapHost, BootstrapRun, SSHHost, SSHKey
from ...services.bootstrap import BootstrapOptions, bootstrap_create, bootstrap_execute, bootstrap_summary
from ...services.ssh_hosts import ssh_host_confirm, ssh_host_create, ssh_host_pin, ssh_host_scan, ssh_host_update

LINE = re.compile(r"^(?:(?P<user>[^@\s:]+)@)?(?P<address>\[[^\]]+\]|[^\s:@]+)(?::(?P<port>\d+))?$")
BAR_WIDTH = 30


class CommandActor:
    """Who the audit log names for what this command does."""

    is_authenticated = False

    def __init__(self, name: str):
        self.username = name

    def __str__(self) -> str:
        return self.username


@dataclass
class HostLine:
    number: int
    user: str
    address: str
    port: int
    key: str
    jump: str


def parse_hosts(text: str, *, default_user: str, default_key: str) -> list[HostLine]:
    hosts, errors = [], []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        spec, *extras = line.split()
        match = LINE.match(spec)
        options = dict(extra.split("=", 1) for extra in extras if "=" in extra)
        if match is None or any("=" not in extra for extra in extras) or set(options) - {"key", "jump"}:
            errors.append(f"line {number}: expected [user@]address[:port] [key=NAME] [jump=ADDRESS[:PORT]], "
                          f"got {raw.strip()!r}")
            continue
        port = int(match["port"] or 22)
        if not 1 <= port <= 65535:
            errors.append(f"line {number}: port {port} out of range")
            continue
        hosts.append(HostLine(number, match["user"] or default_user, match["address"].strip("[]"), port,
                              options.get("key", default_key), options.get("jump", "")))
    if errors:
        raise CommandError("hosts file: " + "; ".join(errors))
    if not hosts:
        raise CommandError("hosts file names no host")
    return hosts


def progress_bar(done: int, total: int) -> str:
    filled = round(BAR_WIDTH * done / total) if total else BAR_WIDTH
    return f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done}/{total}"


class Command(BaseCommand):
    help = "SSH fleets: bootstrap the agent on many hosts; rotate the key that encrypts stored secrets."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="subcommand", required=True)
        boot = sub.add_parser("bootstrap", help="install the agent on the hosts of a file (per-host progress)")
        boot.add_argument("hosts_file", help="one host per line: [user@]address[:port] [key=NAME] [jump=ADDR]")
        boot.add_argument("--pool", required=True, help="pool name or id the nodes enrol into")
        boot.add_argument("--user", default="root", help="login name for lines without one (default root)")
        boot.add_argument("--key", default="", help="stored SSH key name for lines without key= (default: the "
                                                    "only stored key, else the ssh-agent)")
        boot.add_argument("--server", default="", help="URL the hosts reach this server at "
                                                       "(default FLEET_PUBLIC_URL)")
        boot.add_argument("--known-hosts", default="", help="pin host keys listed in this known_hosts file")
        boot.add_argument("--concurrency", type=int, default=None, help="hosts at once (default "
                                                                        "SSH_BOOTSTRAP_CONCURRENCY)")
        boot.add_argument("--timeout", type=int, default=None, help="seconds per host (default "
                                                                    "SSH_BOOTSTRAP_HOST_TIMEOUT_S)")
        boot.add_argument("--offline", action="store_true", help="install.sh --offline")
        boot.add_argument("--allow-actions", default="",
                          help=f"install.sh --allow-actions (of {', '.join(ACTION_KINDS)})")
        boot.add_argument("--root", default="", help="install.sh --root DIR")
        boot.add_argument("--python", default="", help="install.sh --python PATH")
        boot.add_argument("--no-systemd", action="store_true", help="install.sh --no-systemd")
        boot.add_argument("--force", action="store_true", help="run install.sh even where the agent is current")
        sub.add_parser("rotate-secrets", help="re-encrypt every stored secret under the first key of "
                       "FLEET_ENCRYPTION_KEYS (the same as manage.py reencrypt_secrets)")

    def handle(self, *args, **options):
        actor = CommandActor("manage.py fleet_ssh")
        if options["subcommand"] == "rotate-secrets":
            counts = reencrypt_all()
            self.stdout.write(", ".join(f"{name}: {count}" for name, count in counts.items()) + " re-encrypted")
            return
        self._bootstrap(actor, options)

    # -- bootstrap --------------------------------------------------------------------------------------------------

    def _bootstrap(self, actor, options) -> None:
        pool = Pool.objects.filter(pk=int(options["pool"])).first() if options["pool"].isdigit() else None
        pool = pool or Pool.objects.filter(name=options["pool"]).first()
        if pool is None:
            raise CommandError(f"no pool {options['pool']!r}")
        server = (options["server"] or settings.FLEET_PUBLIC_URL).rstrip("/")
        if not server.startswith(("http://", "https://")):
            raise CommandError("say where the hosts reach this server: --server https://… (or set FLEET_PUBLIC_URL)")
        try:
            with open(options["hosts_file"], encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise CommandError(f"cannot read {options['hosts_file']}: {exc}") from None
        default_key = options["key"] or (SSHKey.objects.get().name if SSHKey.objects.count() == 1 else "")
        lines = parse_hosts(text, default_user=options["user"], default_key=default_key)
        known = self._known_hosts(options["known_hosts"])
        hosts = [self._host(actor, line, pool, known) for line in lines]
        install = BootstrapOptions(offline=options["offline"], root=options["root"], python=options["python"],
                                   no_systemd=options["no_systemd"], force=options["force"],
                                   allow_actions=tuple(a for a in options["allow_actions"].split(",") if a))
        try:
            run = bootstrap_create(actor=actor, pool=pool, hosts=hosts, server_url=server, options=install,
                                   concurrency=options["concurrency"], host_timeout_s=options["timeout"])
        except ValidationError as exc:
            raise CommandError(str(exc.detail)) from None
        self.stdout.write(f"bootstrap #{run.pk}: {len(hosts)} host(s) into pool {pool}, {run.concurrency} at a "
                          f"time, {run.host_timeout_s} s per host, agent {run.options['agent_version']} from {server}")
        total = len(hosts)
        width = max(len(str(h)) for h in hosts)

        def show(row: BootstrapHost) -> None:
            done = BootstrapHost.objects.filter(run=run, state__in=BOOTSTRAP_FINISHED).count()
            style = {BootstrapState.FAILED: self.style.ERROR, BootstrapState.DONE: self.style.SUCCESS,
                     BootstrapState.UP_TO_DATE: self.style.SUCCESS}.get(row.state, str)
            self.stdout.write(f"{progress_bar(done, total)}  {str(row.host).ljust(width)}  "
                              f"{style(row.state.ljust(10))}  {row.message}")
            self.stdout.flush()

        run = bootstrap_execute(run_id=run.pk, on_progress=show)
        self._summary(run)

    def _summary(self, run: BootstrapRun) -> None:
        counts = bootstrap_summary(run)
        self.stdout.write("")
        self.stdout.write(", ".join(f"{state}: {count}" for state, count in counts.items() if count))
        failed = run.hosts.filter(state=BootstrapState.FAILED).select_related("host")
        for row in failed:
            self.stdout.write(self.style.ERROR(f"FAILED {row.host}: {row.message}"))
        if failed:
            raise CommandError(f"{len(failed)} host(s) failed; fix them and run the same command again (hosts "
                               "already done are left alone)")

    def _known_hosts(self, path: str):
        if not path:
            return None
        try:
            return asyncssh.read_known_hosts(path)
        except (OSError, ValueError, asyncssh.Error) as exc:
            raise CommandError(f"cannot read known_hosts file {path}: {exc}") from None

    def _host(self, actor, line: HostLine, pool: Pool, known) -> SSHHost:
        key = None
        if line.key:
            key = SSHKey.objects.filter(name=line.key).first()
            if key is None:
                raise CommandError(f"line {line.number}: no stored SSH key named {line.key!r}")
        jump = None
        if line.jump:
            address, _, port = line.jump.partition(":")
            jump = SSHHost.objects.filter(address=address, port=int(port or 22)).first()
            if jump is None:
                raise CommandError(f"line {line.number}: jump host {line.jump} is not registered")
        host = SSHHost.objects.filter(address=line.address, port=line.port).first()
        with transaction.atomic():
            if host is None:
                host = ssh_host_create(actor=actor, address=line.address, port=line.port, username=line.user,
                                       key=key, jump_host=jump, pool=pool, scan=False)
            else:
                changes = {name: value for name, value in (("username", line.user), ("key", key),
                                                           ("jump_host", jump), ("pool", pool))
                           if getattr(host, name) != value}
                if changes:
                    host = ssh_host_update(actor=actor, host=host, **changes)
        if host.host_key_state != HostKeyState.TRUSTED:
            host = ssh_host_scan(host=host, actor=actor)
        if host.host_key_state in (HostKeyState.PENDING, HostKeyState.CHANGED) and host.offered_host_key:
            host = self._confirm(actor, host, known)
        return host

    def _confirm(self, actor, host: SSHHost, known) -> SSHHost:
        if known is not None:
            trusted, *_ = known.match(host.address, "", host.port)
            offered = asyncssh.import_public_key(host.offered_host_key)
            if any(key.public_data == offered.public_data for key in trusted):
                return ssh_host_pin(host=host, actor=actor, public_key=host.offered_host_key,
                                    source="the operator's known_hosts file")
            if trusted:
                self.stdout.write(self.style.ERROR(f"{host}: offers {host.offered_fingerprint}, which is NOT the key "
                                                   "your known_hosts file lists for it; not trusted"))
                return host
        if sys.stdin.isatty():
            changed = host.host_key_state == HostKeyState.CHANGED
            prompt = (f"{host}: host key {'CHANGED from ' + host.host_key_fingerprint + ' to' if changed else 'is'} "
                      f"{host.offered_fingerprint}.\nCompare with `ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub` on the "
                      "host. Trust it? Type yes: ")
            if input(prompt).strip().lower() == "yes":
                return ssh_host_confirm(host=host, actor=actor, fingerprint=host.offered_fingerprint)
        return host
