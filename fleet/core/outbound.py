"""The one way the control plane reaches out: every request to an address an admin typed (ticketing and chat
connectors, SMTP relays, the executors' webhooks, the Kubernetes API, an AWS endpoint override) goes through
here, so no setting can aim the server at its own network.

The policy (docs/security.md, "Outbound connections"):

* refused always: loopback, link-local (cloud metadata services live there), unspecified, multicast, broadcast
  and reserved addresses, and the control plane's own database, Redis and broker (host and port, as the
  settings name them);
* private ranges (RFC 1918, carrier-grade NAT, IPv6 unique-local) and loopback only when they fall in
  ``OUTBOUND_ALLOWED_NETWORKS`` (an on-premises Jira or ServiceNow lives there; a lab may allow-list a loopback
  sink); link-local, unspecified and multicast cannot be allow-listed;
* everything else (public addresses) is allowed.

A name is resolved once, every address it resolves to is checked (one bad address refuses the name: no
round-robin way in), and the connection goes to an address that was checked, so a DNS answer that changes
between the check and the connection (rebinding) changes nothing. TLS still verifies the certificate against
the name. Redirects are never followed; connect and read times are capped; so is the size of an answer.

The same check runs when an address is saved (a 400 naming the field: :func:`validate_url`, :func:`validate_host`)
and when a message is sent (:class:`OutboundRefused`). Its messages never say whether a port is open.
"""

from __future__ import annotations

import ipaddress
import smtplib
import socket
from functools import lru_cache
from urllib.parse import urlsplit

import urllib3
from django.conf import settings
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import NewConnectionError

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# Ranges that may hold the control plane's own neighbours: allowed only when allow-listed.
_PRIVATE = [ipaddress.ip_network(n) for n in (
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "198.18.0.0/15", "fc00::/7")]
MAX_RESPONSE_BYTES = 1024 * 1024


class OutboundRefused(Exception):
    """The destination is not one the control plane may connect to. The message says why in words an admin can
    act on, and is safe to show (it names the policy, not the state of the port)."""


def _allowed_networks() -> list[Network]:
    return _parse_networks(tuple(getattr(settings, "OUTBOUND_ALLOWED_NETWORKS", ())))


@lru_cache(maxsize=8)
def _parse_networks(entries: tuple[str, ...]) -> list[Network]:
    return [ipaddress.ip_network(entry, strict=False) for entry in entries]


def _own_services() -> set[tuple[str, int]]:
    """(host, port) of the database, Redis and the broker as configured; their addresses are resolved at check time."""
    found = set()
    db = settings.DATABASES.get("default", {})
    if db.get("HOST"):
        found.add((db["HOST"], int(db.get("PORT") or 5432)))
    for url in {getattr(settings, "REDIS_URL", ""), getattr(settings, "CELERY_BROKER_URL", ""),
                getattr(settings, "INGEST_QUEUE_URL", "")}:
        parts = urlsplit(url or "")
        if parts.scheme.startswith(("redis", "rediss", "amqp", "amqps")) and parts.hostname:
            default = 5672 if parts.scheme.startswith("amqp") else 6379
            try:
                found.add((parts.hostname, parts.port or default))
            except ValueError:
                continue
    return found


def _own_addresses() -> set[tuple[Address, int]]:
    addresses = set()
    for host, port in _own_services():
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError:
            continue
        for info in infos:
            addresses.add((_plain(ipaddress.ip_address(info[4][0])), port))
    return addresses


def _plain(address: Address) -> Address:
    """An IPv4 address hidden in IPv6 (::ffff:127.0.0.1, 64:ff9b::/96 is left to the public rules) as itself."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def address_refusal(address: Address | str, port: int | None = None) -> str:
    """'' when the control plane may connect to `address` (on `port`); otherwise why not."""
    address = _plain(ipaddress.ip_address(address) if isinstance(address, str) else address)
    allowed = any(address in network for network in _allowed_networks())
    if address.is_unspecified:
        return "an unspecified address (0.0.0.0 or ::)"
    if address.is_link_local:
        return "a link-local address (where cloud metadata services answer)"
    if address.is_multicast:
        return "a multicast address"
    if isinstance(address, ipaddress.IPv4Address) and address == ipaddress.IPv4Address("255.255.255.255"):
        return "the broadcast address"
    if port is not None and (address, port) in _own_addresses():
        return "the control plane's own database, Redis or broker"
    if address.is_loopback:
        return "" if allowed else "a loopback address (this server itself)"
    if any(address in network for network in _PRIVATE) or address.is_private:
        return "" if allowed else "a private address (allow its network in OUTBOUND_ALLOWED_NETWORKS)"
    if address.is_reserved:
        return "a reserved address"
    return ""


def allowed_addresses(host: str, port: int) -> list[str]:
    """Resolve `host` and return the addresses to connect to, each checked; raise OutboundRefused otherwise."""
    host = (host or "").strip().strip("[]").rstrip(".")
    if not host:
        raise OutboundRefused("no host given")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise OutboundRefused(f"{host} does not resolve") from None
    addresses = []
    for info in infos:
        literal = info[4][0].split("%", 1)[0]
        why = address_refusal(literal, port)
        if why:
            raise OutboundRefused(f"{host} is {why}; the control plane does not connect there"
                                  if literal == host else
                                  f"{host} resolves to {why}; the control plane does not connect there")
        if literal not in addresses:
            addresses.append(literal)
    return addresses


def _literal(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def check_host(host: str, port: int, *, resolve: bool = True) -> None:
    """Raise OutboundRefused when `host`:`port` is not allowed. An IP literal is always judged; a name is judged on
    what it resolves to, and one that does not resolve (yet) passes when `resolve` is False (a save: the send
    checks again)."""
    literal = _literal(host)
    if literal is not None:
        why = address_refusal(literal, port)
        if why:
            raise OutboundRefused(f"{host} is {why}; the control plane does not connect there")
        return
    if host.strip().rstrip(".").lower() == "localhost" or host.strip().lower().endswith(".localhost"):
        if address_refusal("127.0.0.1", port):
            raise OutboundRefused(f"{host} is a loopback address (this server itself); the control plane does not "
                                  "connect there")
        return
    try:
        allowed_addresses(host, port)
    except OutboundRefused as exc:
        if resolve or "does not resolve" not in str(exc):
            raise


def check_url(url: str) -> tuple[str, int]:
    """Raise OutboundRefused unless `url` is an http(s) URL the control plane may call; return its (host, port)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise OutboundRefused("not a valid URL") from None
    if parts.scheme not in ("http", "https"):
        raise OutboundRefused("only http and https URLs are allowed")
    if not parts.hostname:
        raise OutboundRefused("the URL has no host")
    return parts.hostname, port or (443 if parts.scheme == "https" else 80)


def validate_url(url: str) -> None:
    """For a save: raise OutboundRefused for a URL that points where the control plane may not connect."""
    host, port = check_url(url)
    check_host(host, port, resolve=False)


def validate_host(host: str, port: int) -> None:
    check_host(host, port, resolve=False)


# --- HTTP -------------------------------------------------------------------------------------------------------


class _GuardedConnectionMixin:
    def _new_conn(self):
        name = self._dns_host
        try:
            addresses = allowed_addresses(name, self.port)
        except OutboundRefused as exc:
            raise NewConnectionError(self, f"refused by the outbound policy: {exc}") from None
        failure = None
        for address in addresses:
            # urllib3 connects to _dns_host; TLS (after this returns) verifies the certificate against `name`.
            self._dns_host = address
            try:
                return super()._new_conn()
            except NewConnectionError as exc:
                failure = exc
            finally:
                self._dns_host = name
        raise failure


class GuardedHTTPConnection(_GuardedConnectionMixin, HTTPConnection):
    pass


class GuardedHTTPSConnection(_GuardedConnectionMixin, HTTPSConnection):
    pass


class _GuardedHTTPPool(HTTPConnectionPool):
    ConnectionCls = GuardedHTTPConnection


class _GuardedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = GuardedHTTPSConnection


class GuardedPoolManager(urllib3.PoolManager):
    """urllib3's PoolManager whose every connection passes the outbound policy. Callers pass redirect=False."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.pool_classes_by_scheme = {"http": _GuardedHTTPPool, "https": _GuardedHTTPSPool}


def guard_pool_manager(manager: urllib3.PoolManager) -> urllib3.PoolManager:
    """Put a client library's own PoolManager (its TLS settings kept) under the outbound policy: every new
    connection, a redirect's included, goes to an address that was checked."""
    manager.clear()
    manager.pool_classes_by_scheme = {"http": _GuardedHTTPPool, "https": _GuardedHTTPSPool}
    return manager


def check_url_now(url: str) -> None:
    """For a send through a library whose connections cannot be guarded (boto3): resolve and check `url`'s host
    now. The library resolves the name again when it connects, so this narrows a rebinding to that instant."""
    host, port = check_url(url)
    check_host(host, port)


def is_policy_refusal(exc: BaseException) -> str:
    """The policy's reason when `exc` is (or wraps) a refusal by the outbound policy, else ''."""
    text = str(exc)
    marker = "refused by the outbound policy: "
    return text.split(marker, 1)[1].rstrip("')\"") if marker in text else ""


def read_capped(response, limit: int = MAX_RESPONSE_BYTES) -> bytes:
    """At most `limit` bytes of a streamed urllib3 response (the rest is dropped with the connection)."""
    chunks, size = [], 0
    for chunk in response.stream(64 * 1024):
        chunks.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    if size >= limit:
        response.close()  # the rest is not read: the connection cannot be reused
    else:
        response.release_conn()
    return b"".join(chunks)[:limit]


# --- SMTP -------------------------------------------------------------------------------------------------------


def _guarded_socket(host: str, port: int, timeout, source_address):
    failure: OSError | None = None
    for address in allowed_addresses(host, port):
        try:
            return socket.create_connection((address, port), timeout, source_address)
        except OSError as exc:
            failure = exc
    raise failure or OSError("no address to connect to")


class GuardedSMTP(smtplib.SMTP):
    def _get_socket(self, host, port, timeout):
        return _guarded_socket(host, port, timeout, self.source_address)


class GuardedSMTPSSL(smtplib.SMTP_SSL):
    def _get_socket(self, host, port, timeout):
        sock = _guarded_socket(host, port, timeout, self.source_address)
        return self.context.wrap_socket(sock, server_hostname=self._host)
