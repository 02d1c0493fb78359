"""SSH transport (asyncssh), free of models: pinned host keys only, one key per host, optional jump host.

Nothing here trusts on first use. `scan` only *reads* the key a host offers (for an operator to confirm); every
connection that runs a command accepts exactly the pinned key and fails with `host_key_changed` otherwise. No
file of the server's own user is read (~/.ssh/config, ~/.ssh/known_hosts, default identities): a host uses the
key stored for it, or the keys of the configured ssh-agent, and nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncssh

TAIL_BYTES = 8192


class SSHFailure(Exception):
    """A connection or command that did not work; `code` says which kind, the message says what to do."""

    def __init__(self, code: str, message: str, *, offered_key: str = "", offered_fingerprint: str = ""):
        super().__init__(message)
        self.code = code
        self.message = message
        self.offered_key = offered_key
        self.offered_fingerprint = offered_fingerprint


# Failure codes.
HOST_KEY_CHANGED = "host_key_changed"
HOST_KEY_UNCONFIRMED = "host_key_unconfirmed"
AUTH_FAILED = "auth_failed"
UNREACHABLE = "unreachable"
TIMEOUT = "timeout"


@dataclass(frozen=True)
class Target:
    """Everything needed to reach one host. `private_key` is the decrypted key (OpenSSH text), held in memory only
    for the duration of a connection; `agent_path` is used only when there is no key."""

    address: str
    port: int
    username: str
    host_key: str  # the pinned public key, OpenSSH one-line form
    private_key: bytes | None = None
    agent_path: str = ""
    jump: Target | None = None

    @property
    def label(self) -> str:
        return f"{self.username}@{self.address}:{self.port}"

    def __repr__(self) -> str:  # never print the key
        return f"Target({self.label})"


@dataclass(frozen=True)
class CommandResult:
    exit_status: int | None
    stdout: str
    stderr: str
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


def fingerprint(public_key: str) -> str:
    return asyncssh.import_public_key(public_key).get_fingerprint("sha256")


def public_key_text(key: asyncssh.SSHKey) -> str:
    return key.export_public_key("openssh").decode().strip()


def tail(text: str, limit: int = TAIL_BYTES) -> str:
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return text
    return "…" + data[-limit:].decode("utf-8", "replace")


async def scan(address: str, port: int, *, jump: Target | None = None, timeout: float = 15.0) -> tuple[str, str]:
    """The host key `address:port` offers now, as (OpenSSH public key, SHA256 fingerprint). Trusts nothing."""
    async with _tunnel(jump, timeout) as tunnel:
        try:
            key = await asyncio.wait_for(
                asyncssh.get_server_host_key(address, port, tunnel=tunnel or (), config=None), timeout)
        except TimeoutError:
            raise SSHFailure(TIMEOUT, f"{address}:{port} did not answer within {timeout:.0f} s") from None
        except (OSError, UnicodeError, asyncssh.Error) as exc:
            raise SSHFailure(UNREACHABLE, f"cannot reach {address}:{port}: {_reason(exc)}") from None
    if key is None:
        raise SSHFailure(UNREACHABLE, f"{address}:{port} offered no host key")
    text = public_key_text(key)
    return text, key.get_fingerprint("sha256")


async def _client_keys(target: Target) -> list:
    if target.private_key:
        try:
            return [asyncssh.import_private_key(target.private_key)]
        except (asyncssh.KeyImportError, ValueError) as exc:
            raise SSHFailure(AUTH_FAILED, f"the stored key for {target.label} cannot be read: {exc}") from None
    if target.agent_path:
        try:
            async with asyncssh.connect_agent(target.agent_path) as agent:
                keys = await agent.get_keys()
        except (OSError, asyncssh.Error) as exc:
            raise SSHFailure(AUTH_FAILED, f"the ssh-agent at {target.agent_path} cannot be used: {exc}") from None
        if keys:
            return list(keys)
        raise SSHFailure(AUTH_FAILED, f"the ssh-agent at {target.agent_path} holds no key")
    raise SSHFailure(AUTH_FAILED, f"{target.label} has no key and no ssh-agent is configured "
                                  "(FLEET_SSH_AUTH_SOCK)")


@contextlib.asynccontextmanager
async def _tunnel(jump: Target | None, timeout: float) -> AsyncIterator[asyncssh.SSHClientConnection | None]:
    if jump is None:
        yield None
        return
    async with connect(jump, timeout=timeout) as connection:
        yield connection


@contextlib.asynccontextmanager
async def connect(target: Target, *, timeout: float = 15.0) -> AsyncIterator[asyncssh.SSHClientConnection]:
    """A connection that accepts only the pinned host key (through the jump host, itself pinned, if any)."""
    if not target.host_key:
        raise SSHFailure(HOST_KEY_UNCONFIRMED, f"{target.label}: no confirmed host key; an operator must confirm "
                                               "the fingerprint first")
    try:
        pinned = asyncssh.import_public_key(target.host_key)
    except (asyncssh.KeyImportError, ValueError) as exc:
        raise SSHFailure(HOST_KEY_UNCONFIRMED, f"{target.label}: the pinned host key is unreadable: {exc}") from None
    keys = await _client_keys(target)
    async with _tunnel(target.jump, timeout) as tunnel:
        try:
            connection = await asyncssh.connect(
                target.address, target.port, tunnel=tunnel or (), username=target.username,
                client_keys=keys, agent_path=None, known_hosts=([pinned], [], []), config=None,
                preferred_auth="publickey", agent_forwarding=False, connect_timeout=timeout,
                login_timeout=timeout, keepalive_interval=30)
        except asyncssh.HostKeyNotVerifiable:
            offered, offered_fp = "", "?"
            with contextlib.suppress(SSHFailure):
                offered, offered_fp = await scan(target.address, target.port, jump=target.jump, timeout=timeout)
            raise SSHFailure(
                HOST_KEY_CHANGED,
                f"{target.label}: host key changed — pinned {pinned.get_fingerprint('sha256')}, the host offered "
                f"{offered_fp}. Nothing was run. If the change is expected (reinstall), confirm the new "
                "fingerprint; otherwise treat the host as compromised or spoofed.",
                offered_key=offered, offered_fingerprint=offered_fp) from None
        except asyncssh.PermissionDenied:
            shown = keys[0].get_fingerprint("sha256") if keys and hasattr(keys[0], "get_fingerprint") else "?"
            raise SSHFailure(AUTH_FAILED, f"{target.label}: the host refused the key {shown} (is its public key "
                                          f"in ~{target.username}/.ssh/authorized_keys?)") from None
        except TimeoutError:
            raise SSHFailure(TIMEOUT, f"{target.label}: no answer within {timeout:.0f} s") from None
        except (OSError, UnicodeError, asyncssh.Error) as exc:
            raise SSHFailure(UNREACHABLE, f"{target.label}: {_reason(exc)}") from None
        try:
            yield connection
        finally:
            connection.close()
            with contextlib.suppress(Exception):
                await connection.wait_closed()


async def run(connection: asyncssh.SSHClientConnection, command: str, *, stdin: str | None = None,
              timeout: float = 60.0) -> CommandResult:
    started = time.monotonic()
    try:
        result = await asyncio.wait_for(connection.run(command, input=stdin, check=False), timeout)
    except TimeoutError:
        raise SSHFailure(TIMEOUT, f"`{_short(command)}` did not finish within {timeout:.0f} s") from None
    except (OSError, asyncssh.Error) as exc:
        raise SSHFailure(UNREACHABLE, f"`{_short(command)}`: {_reason(exc)}") from None
    return CommandResult(result.exit_status, _text(result.stdout), _text(result.stderr),
                         round(time.monotonic() - started, 3))


async def run_on(target: Target, command: str, *, stdin: str | None = None, timeout: float = 60.0,
                 connect_timeout: float = 15.0) -> CommandResult:
    async with connect(target, timeout=connect_timeout) as connection:
        return await run(connection, command, stdin=stdin, timeout=timeout)


def _text(value) -> str:
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _short(command: str) -> str:
    first = command.strip().splitlines()[0] if command.strip() else ""
    return first[:80] + ("…" if len(first) > 80 or "\n" in command.strip() else "")


def _reason(exc: BaseException) -> str:
    text = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text != type(exc).__name__ else text
