"""SSH keys and hosts: import or generate a key (stored encrypted), register a host, read the host key it offers,
and pin it only when an operator confirms that exact fingerprint. Every write is audited without secrets."""

from __future__ import annotations

import asyncio

import asyncssh
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from rest_framework.exceptions import ValidationError

from fleet.core import crypto
from fleet.core.api.errors import DomainError
from fleet.core.models import AuditEntry
from fleet.core.services import audit_record

from .. import ssh
from ..choices import HostKeyState
from ..models import SSHHost, SSHKey

MAX_JUMP_DEPTH = 4
HOST_FIELDS = ("address", "port", "username", "key_id", "jump_host_id", "pool_id", "node_id")


def host_snapshot(host: SSHHost) -> dict:
    """What the audit log keeps of a host: where it is and what is pinned, never a key's private half."""
    return {**{name: getattr(host, name) for name in HOST_FIELDS},
            "host_key_state": host.host_key_state, "host_key_fingerprint": host.host_key_fingerprint}


# -- keys -------------------------------------------------------------------------------------------------------

def _store_key(*, actor, name: str, private: asyncssh.SSHKey, note: str) -> SSHKey:
    if SSHKey.objects.filter(name=name).exists():
        raise ValidationError({"name": [f"An SSH key named {name!r} exists already."]})
    public = ssh.public_key_text(private.convert_to_public())
    with transaction.atomic():
        key = SSHKey.objects.create(
            name=name, public_key=public, fingerprint=private.get_fingerprint("sha256"),
            private_key_encrypted=crypto.encrypt(private.export_private_key("openssh")),
            created_by=actor if getattr(actor, "is_authenticated", False) else None)
        audit_record(actor=actor, action=AuditEntry.Action.CREATE, instance=key, note=note,
                     after={"name": key.name, "fingerprint": key.fingerprint, "public_key": key.public_key})
    return key


def ssh_key_import(*, actor, name: str, private_key: str, passphrase: str = "") -> SSHKey:
    """Store an operator's private key (decrypted with `passphrase` if it has one, then encrypted at rest)."""
    try:
        private = asyncssh.import_private_key(private_key.strip().encode() + b"\n", passphrase or None)
    except (asyncssh.KeyImportError, asyncssh.KeyEncryptionError, ValueError) as exc:
        field = "passphrase" if "passphrase" in str(exc).lower() else "private_key"
        raise ValidationError({field: [f"Not a usable private key: {exc}"]}) from None
    return _store_key(actor=actor, name=name, private=private, note="imported")


def ssh_key_generate(*, actor, name: str) -> SSHKey:
    """A fresh Ed25519 key pair; the operator puts the public half into the hosts' authorized_keys."""
    return _store_key(actor=actor, name=name, private=asyncssh.generate_private_key("ssh-ed25519"),
                      note="generated")


def ssh_key_delete(*, actor, key: SSHKey) -> None:
    if key.hosts.exists():
        raise DomainError(f"SSH key {key.name} is used by {key.hosts.count()} host(s); give them another key first.",
                          code="in_use")
    with transaction.atomic():
        audit_record(actor=actor, action=AuditEntry.Action.DELETE, instance=key,
                     before={"name": key.name, "fingerprint": key.fingerprint})
        key.delete()


# -- hosts ------------------------------------------------------------------------------------------------------

def _check_jump(host: SSHHost | None, jump: SSHHost | None) -> None:
    seen = {host.pk} if host is not None and host.pk else set()
    depth = 0
    while jump is not None:
        if jump.pk in seen:
            raise ValidationError({"jump_host": ["The jump hosts form a loop."]})
        seen.add(jump.pk)
        depth += 1
        if depth > MAX_JUMP_DEPTH:
            raise ValidationError({"jump_host": [f"At most {MAX_JUMP_DEPTH} jump hosts in a chain."]})
        jump = jump.jump_host


def ssh_host_create(*, actor, address: str, port: int = 22, username: str, key: SSHKey | None = None,
                    jump_host: SSHHost | None = None, pool=None, node=None, scan: bool = True) -> SSHHost:
    """Register a host. Its key is read at once (if reachable) and waits for an operator's confirmation."""
    if SSHHost.objects.filter(address=address, port=port).exists():
        raise ValidationError({"address": [f"{address}:{port} is registered already."]})
    _check_jump(None, jump_host)
    with transaction.atomic():
        host = SSHHost.objects.create(address=address, port=port, username=username, key=key, jump_host=jump_host,
                                      pool=pool, node=node)
        audit_record(actor=actor, action=AuditEntry.Action.CREATE, instance=host, after=host_snapshot(host))
    if scan:
        host = ssh_host_scan(host=host, actor=actor)
    return host


def ssh_host_update(*, actor, host: SSHHost, **changes) -> SSHHost:
    """Change a host's settings. Another address or port is another machine: its pinned key is dropped."""
    before = host_snapshot(host)
    if "jump_host" in changes:
        _check_jump(host, changes["jump_host"])
    moved = any(name in changes and changes[name] != getattr(host, name) for name in ("address", "port"))
    if moved and SSHHost.objects.filter(address=changes.get("address", host.address),
                                        port=changes.get("port", host.port)).exclude(pk=host.pk).exists():
        raise ValidationError({"address": ["Another host is registered at that address and port."]})
    for name, value in changes.items():
        setattr(host, name, value)
    if moved:
        _unpin(host)
    with transaction.atomic():
        host.save()
        audit_record(actor=actor, action=AuditEntry.Action.UPDATE, instance=host, before=before,
                     after=host_snapshot(host), note="address changed: host key unpinned" if moved else "")
    return host


def _unpin(host: SSHHost) -> None:
    host.host_key = host.host_key_fingerprint = host.offered_host_key = host.offered_fingerprint = ""
    host.host_key_state, host.offered_at, host.confirmed_by, host.confirmed_at = HostKeyState.UNKNOWN, None, None, None


def ssh_host_delete(*, actor, host: SSHHost) -> None:
    if SSHHost.objects.filter(jump_host=host).exists():
        raise DomainError(f"{host} is the jump host of other hosts; change them first.", code="in_use")
    with transaction.atomic():
        audit_record(actor=actor, action=AuditEntry.Action.DELETE, instance=host, before=host_snapshot(host))
        host.delete()


def ssh_host_scan(*, host: SSHHost, actor) -> SSHHost:
    """Read the key the host offers now. Trusts nothing: a first key waits for confirmation, a different key on a
    pinned host marks it `changed` (commands stop until an operator confirms the new one)."""
    jump = ssh_target(host.jump_host) if host.jump_host_id else None
    try:
        offered, offered_fp = run_async(ssh.scan(host.address, host.port, jump=jump,
                                                 timeout=settings.SSH_CONNECT_TIMEOUT_S))
    except ssh.SSHFailure as failure:
        host.last_error = failure.message[:1000]
        host.save(update_fields=["last_error", "updated_at"])
        return host
    with transaction.atomic():
        host = SSHHost.objects.select_for_update().get(pk=host.pk)
        host.offered_host_key, host.offered_fingerprint, host.offered_at = offered, offered_fp, timezone.now()
        host.last_error = ""
        if host.host_key and host.host_key_fingerprint == offered_fp:
            host.host_key_state = HostKeyState.TRUSTED
        elif host.host_key:
            host.host_key_state = HostKeyState.CHANGED
            host.last_error = (f"host key changed: pinned {host.host_key_fingerprint}, the host offers {offered_fp}")
        else:
            host.host_key_state = HostKeyState.PENDING
        host.save()
        audit_record(actor=actor, action=AuditEntry.Action.ACTION, instance=host,
                     note=f"host key scanned: {offered_fp} ({host.host_key_state})",
                     after={"offered_fingerprint": offered_fp, "host_key_state": host.host_key_state})
    return host


def ssh_host_confirm(*, host: SSHHost, actor, fingerprint: str) -> SSHHost:
    """Pin the key the host offered, if `fingerprint` is exactly the one the operator was shown for it."""
    fingerprint = fingerprint.strip()
    with transaction.atomic():
        host = SSHHost.objects.select_for_update().get(pk=host.pk)
        if not host.offered_host_key:
            raise DomainError("This host has not offered a key yet; scan it first.", code="not_scanned")
        if fingerprint != host.offered_fingerprint:
            raise ValidationError({"fingerprint": [
                f"{fingerprint or '(empty)'} is not the fingerprint of the key this host offered "
                f"({host.offered_fingerprint}); scan again and compare with the host's own "
                "`ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub`."]})
        before = host_snapshot(host)
        host.host_key, host.host_key_fingerprint = host.offered_host_key, host.offered_fingerprint
        host.host_key_state = HostKeyState.TRUSTED
        host.confirmed_by = actor if getattr(actor, "is_authenticated", False) else None
        host.confirmed_at = timezone.now()
        host.last_error = ""
        host.save()
        audit_record(actor=actor, action=AuditEntry.Action.ACTION, instance=host, before=before,
                     after=host_snapshot(host), note=f"host key confirmed: {fingerprint}")
    return host


def ssh_host_pin(*, host: SSHHost, actor, public_key: str, source: str) -> SSHHost:
    """Pin a key the operator supplied from a source of their own (a known_hosts file they trust)."""
    try:
        offered_fp = ssh.fingerprint(public_key)
    except (asyncssh.KeyImportError, ValueError) as exc:
        raise ValidationError({"public_key": [f"Not an SSH public key: {exc}"]}) from None
    with transaction.atomic():
        host = SSHHost.objects.select_for_update().get(pk=host.pk)
        before = host_snapshot(host)
        host.offered_host_key, host.offered_fingerprint, host.offered_at = public_key.strip(), offered_fp, \
            timezone.now()
        host.host_key, host.host_key_fingerprint = public_key.strip(), offered_fp
        host.host_key_state = HostKeyState.TRUSTED
        host.confirmed_by = actor if getattr(actor, "is_authenticated", False) else None
        host.confirmed_at = timezone.now()
        host.save()
        audit_record(actor=actor, action=AuditEntry.Action.ACTION, instance=host, before=before,
                     after=host_snapshot(host), note=f"host key pinned from {source}: {offered_fp}"[:200])
    return host


def ssh_target(host: SSHHost, *, _depth: int = 0) -> ssh.Target:
    """How to reach a host: its pinned key, its decrypted login key (in memory only), its jump host."""
    if _depth > MAX_JUMP_DEPTH:
        raise ssh.SSHFailure(ssh.UNREACHABLE, "jump host chain too long")
    if host.host_key_state != HostKeyState.TRUSTED or not host.host_key:
        detail = {HostKeyState.CHANGED: f"its host key changed (pinned {host.host_key_fingerprint}, offered "
                                        f"{host.offered_fingerprint}); confirm the new fingerprint if expected",
                  HostKeyState.PENDING: f"its host key {host.offered_fingerprint} waits for an operator to confirm "
                                        "it",
                  HostKeyState.UNKNOWN: "its host key has not been scanned and confirmed"}[host.host_key_state]
        code = ssh.HOST_KEY_CHANGED if host.host_key_state == HostKeyState.CHANGED else ssh.HOST_KEY_UNCONFIRMED
        raise ssh.SSHFailure(code, f"{host}: not connecting, {detail}")
    private = crypto.decrypt(host.key.private_key_encrypted) if host.key_id else None
    jump = ssh_target(host.jump_host, _depth=_depth + 1) if host.jump_host_id else None
    return ssh.Target(address=host.address, port=host.port, username=host.username, host_key=host.host_key,
                      private_key=private, agent_path=settings.SSH_AUTH_SOCK if private is None else "", jump=jump)


def ssh_host_failed(host: SSHHost, failure: ssh.SSHFailure) -> None:
    """Remember why the last contact failed; a changed host key unpins nothing but stops every command."""
    host.last_error = failure.message[:1000]
    fields = ["last_error", "updated_at"]
    if failure.code == ssh.HOST_KEY_CHANGED and failure.offered_key:
        host.host_key_state = HostKeyState.CHANGED
        host.offered_host_key, host.offered_fingerprint = failure.offered_key, failure.offered_fingerprint
        host.offered_at = timezone.now()
        fields += ["host_key_state", "offered_host_key", "offered_fingerprint", "offered_at"]
    SSHHost.objects.filter(pk=host.pk).update(**{f: getattr(host, f) for f in fields if f != "updated_at"},
                                              updated_at=timezone.now())


def ssh_host_reached(host: SSHHost) -> None:
    now = timezone.now()
    SSHHost.objects.filter(pk=host.pk).update(last_contact_at=now, last_error="", updated_at=now)


def run_async(coroutine):
    """Run SSH work from synchronous code (views, tasks, commands), each call on its own event loop."""
    return asyncio.run(coroutine)
