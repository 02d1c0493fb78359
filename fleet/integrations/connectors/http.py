"""The one HTTP client every connector uses: the outbound policy (fleet.core.outbound: no loopback, metadata or
private address unless allowed, no redirects, capped answers), timeouts, TLS (an optional CA bundle and client
certificate for mTLS), response classification, Retry-After, and a redacted record of each exchange for the
delivery log."""

from __future__ import annotations

import json as jsonlib
import os
import ssl
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import urllib3

from fleet.core import outbound

from .base import DeliveryError

BODY_EXCERPT = 4000
REDACTED = "***"
_SENSITIVE_HEADERS = {"authorization", "x-api-key", "proxy-authorization", "cookie"}
_MAX_RETRY_AFTER_S = 24 * 3600
# Statuses a later try can fix; every other 4xx means the request itself is wrong.
_RETRYABLE = {408, 409, 425, 429}


@dataclass
class HttpResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self):
        try:
            return jsonlib.loads(self.body or b"null")
        except ValueError:
            return None

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


def retry_after_seconds(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date), capped at a day."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    return min(max(seconds, 0.0), _MAX_RETRY_AFTER_S)


def _tls_context(ca_bundle: str, client_cert: str, client_key: str) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if ca_bundle:
        context.load_verify_locations(cadata=ca_bundle)
    if client_cert:
        # The ssl module loads a certificate chain from files only: write it to a private temporary directory for
        # the one call, then remove it (the context keeps the key in memory).
        with tempfile.TemporaryDirectory() as folder:
            cert_path, key_path = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
            for path, pem in ((cert_path, client_cert), (key_path, client_key or client_cert)):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w") as handle:
                    handle.write(pem)
            context.load_cert_chain(cert_path, key_path)
    return context


class Http:
    """A pool for one delivery. `secrets` are scrubbed from everything recorded in `exchanges`."""

    def __init__(self, *, timeout: float, secrets: list[str] | None = None, ca_bundle: str = "",
                 client_cert: str = "", client_key: str = ""):
        self.timeout = timeout
        self.secrets = sorted({s for s in (secrets or []) if s and len(s) >= 4}, key=len, reverse=True)
        self.exchanges: list[dict] = []
        self.last_status: int | None = None
        context = _tls_context(ca_bundle, client_cert, client_key) if (ca_bundle or client_cert) else None
        self._pool = outbound.GuardedPoolManager(ssl_context=context) if context else outbound.GuardedPoolManager()

    def _scrub(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        return text

    def _record(self, method: str, url: str, headers: dict, body: bytes | None, started: float,
                response: HttpResponse | None, error: str = "") -> None:
        shown = {k: (REDACTED if k.lower() in _SENSITIVE_HEADERS else self._scrub(str(v))) for k, v in headers.items()}
        excerpt = (body or b"")[:BODY_EXCERPT].decode("utf-8", "replace")
        entry = {"method": method, "url": self._scrub(url), "headers": shown, "body": self._scrub(excerpt),
                 "body_bytes": len(body or b""), "duration_ms": round((time.monotonic() - started) * 1000, 1)}
        if response is not None:
            entry["status"] = response.status
            entry["response"] = self._scrub(response.body[:BODY_EXCERPT].decode("utf-8", "replace"))
        if error:
            entry["error"] = self._scrub(error)
        self.exchanges.append(entry)

    def request(self, method: str, url: str, *, json=None, body: bytes | None = None, headers: dict | None = None,
                accept: tuple[int, ...] = ()) -> HttpResponse:
        """Send one request. 2xx (and any status in `accept`) returns the response; anything else raises a
        `DeliveryError` that says whether a retry can help."""
        headers = dict(headers or {})
        if json is not None:
            body = jsonlib.dumps(json, default=str, ensure_ascii=False).encode()
            headers.setdefault("Content-Type", "application/json")
        headers.setdefault("User-Agent", "gpu-fleet-integrations/1")
        started = time.monotonic()
        try:
            outbound.check_url(url)
            raw = self._pool.request(method, url, body=body, headers=headers, redirect=False, retries=False,
                                     timeout=urllib3.Timeout(connect=min(self.timeout, 10), read=self.timeout),
                                     preload_content=False)
            data = outbound.read_capped(raw)
        except outbound.OutboundRefused as exc:
            reason = f"refused by the outbound policy: {exc}"
            self._record(method, url, headers, body, started, None, reason)
            self.last_status = None
            raise DeliveryError(self._scrub(f"{method} {url}: {reason}"), retryable=False) from None
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            reason = _transport_reason(exc)
            self._record(method, url, headers, body, started, None, reason)
            self.last_status = None
            # A destination the policy refuses stays refused until an admin changes it: dead-lettered, not retried.
            raise DeliveryError(self._scrub(f"{method} {url}: {reason}"),
                                retryable=not outbound.is_policy_refusal(exc)) from None
        response = HttpResponse(raw.status, {k.lower(): v for k, v in raw.headers.items()}, data or b"")
        self._record(method, url, headers, body, started, response)
        self.last_status = response.status
        if 200 <= response.status < 300 or response.status in accept:
            return response
        raise self.error_for(response, f"{method} {self._scrub(url)}")

    def error_for(self, response: HttpResponse, what: str) -> DeliveryError:
        status = response.status
        detail = self._scrub(response.text.strip().replace("\n", " ")[:300])
        retryable = status >= 500 or status in _RETRYABLE
        return DeliveryError(f"{what} answered {status}" + (f": {detail}" if detail else ""), retryable=retryable,
                             status_code=status, retry_after=retry_after_seconds(response.headers.get("retry-after")))


def _transport_reason(exc: Exception) -> str:
    refusal = outbound.is_policy_refusal(exc)
    if refusal:
        return f"refused by the outbound policy: {refusal}"
    # One wording for refused, unreachable and a connect that timed out, so the log cannot be used to tell a
    # closed port from a filtered one. urllib3's NewConnectionError is also a ConnectTimeoutError: ask first.
    if isinstance(exc, urllib3.exceptions.NewConnectionError | urllib3.exceptions.ConnectTimeoutError
                  | ConnectionError):
        return "could not connect (refused, unreachable or timed out)"
    if isinstance(exc, urllib3.exceptions.TimeoutError | TimeoutError):
        return "timed out waiting for the answer"
    if isinstance(exc, urllib3.exceptions.SSLError | ssl.SSLError):
        return f"TLS error ({exc})"
    if isinstance(exc, urllib3.exceptions.ProtocolError):
        return f"connection broken ({exc})"
    return f"{type(exc).__name__}: {exc}"
