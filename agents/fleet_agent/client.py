"""HTTP client for the control plane (urllib only): enrolment, report batches, health check.

TLS certificates are always verified; ``ca_file`` adds a private CA instead of turning checks off.
"""

from __future__ import annotations

import gzip
import http.client
import json
import logging
import math
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime

from fleet_agent import __version__

log = logging.getLogger(__name__)

ENROLL_PATH = "/api/v1/agent/enroll"
REPORTS_PATH = "/api/v1/agent/reports"
HEALTH_PATH = "/healthz"
DEFAULT_TIMEOUT_S = 10.0
_MAX_RESPONSE_BYTES = 1024 * 1024


class DeliveryError(Exception):
    """A request that did not succeed; ``status`` is None for network-level failures."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        retry_after: float | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.code = code
        self.retry_after = retry_after


@dataclass(frozen=True)
class Response:
    status: int
    body: dict


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (RFC 9110: delay-seconds or an HTTP-date).

    None when absent or unreadable (the caller then uses its own back-off); a date in the past is 0.
    """
    if not value or not value.strip():
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            moment = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if moment.tzinfo is None:  # RFC 9110 dates are GMT
            moment = moment.replace(tzinfo=UTC)
        return max(0.0, moment.timestamp() - (time.time() if now is None else now))
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def join_url(server: str, path: str) -> str:
    if path.startswith(("http://", "https://")):
        return path
    return server.rstrip("/") + "/" + path.lstrip("/")


def validate_server_url(server: str) -> str:
    parsed = urllib.parse.urlsplit(server)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"expected an http(s) URL like https://fleet.example.com, got {server!r}")
    return server.rstrip("/")


class ControlPlaneClient:
    def __init__(
        self,
        server: str,
        *,
        credential: str | None = None,
        ca_file: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
    ):
        self.server = validate_server_url(server)
        self.credential = credential
        self.timeout = timeout
        context = ssl.create_default_context(cafile=ca_file)  # verification on, always
        self._opener = urllib.request.build_opener(urllib.request.HTTPSHandler(context=context))
        host = urllib.parse.urlsplit(self.server).hostname or ""
        if self.server.startswith("http://") and host not in ("localhost", "127.0.0.1", "::1"):
            log.warning("server %s is plain HTTP: credentials and reports travel unencrypted", self.server)

    # -- calls ----------------------------------------------------------------------------------

    def enroll(self, token: str, facts: dict, *, credential: str | None = None) -> dict:
        """``credential``: the node's current one, which a known machine needs to enrol again."""
        request = {"token": token, "facts": facts}
        if credential:
            request["credential"] = credential
        body = json.dumps(request).encode("utf-8")
        return self._request("POST", ENROLL_PATH, body, authenticated=False).body

    def post_reports(self, batch_body: bytes, *, reports_url: str = REPORTS_PATH) -> dict:
        """POST a ``{"reports": [...]}`` body, gzip-compressed; returns the server's ack."""
        compressed = gzip.compress(batch_body, compresslevel=6, mtime=0)
        return self._request("POST", reports_url, compressed, headers={"Content-Encoding": "gzip"}).body

    def healthz(self) -> int:
        return self._request("GET", HEALTH_PATH, None, authenticated=False, expect_json=False).status

    # -- plumbing -------------------------------------------------------------------------------

    def _request(
        self,
        method: str,
        path: str,
        body: bytes | None,
        *,
        authenticated: bool = True,
        headers: dict | None = None,
        expect_json: bool = True,
    ) -> Response:
        url = join_url(self.server, path)
        request = urllib.request.Request(url, data=body, method=method)  # noqa: S310 - scheme validated
        request.add_header("User-Agent", f"fleet-agent/{__version__}")
        request.add_header("Accept", "application/json")
        if body is not None:
            request.add_header("Content-Type", "application/json")
        for key, value in (headers or {}).items():
            request.add_header(key, value)
        if authenticated:
            if not self.credential:
                raise DeliveryError("not enrolled: no node credential (run `fleet-agent enroll`)")
            request.add_header("Authorization", f"Node {self.credential}")
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                raw = response.read(_MAX_RESPONSE_BYTES)
                status = response.status
        except urllib.error.HTTPError as err:
            raise _http_error(err) from None
        except (OSError, http.client.HTTPException) as err:  # refused, reset, TLS, timeout, truncated
            reason = getattr(err, "reason", None) or err
            raise DeliveryError(f"{method} {url}: {type(err).__name__}: {reason}") from None
        if not expect_json:
            return Response(status, {})
        try:
            return Response(status, json.loads(raw or b"{}"))
        except ValueError:
            raise DeliveryError(
                f"{method} {url}: response is not JSON: {raw[:200]!r}", status=status
            ) from None


def _http_error(err: urllib.error.HTTPError) -> DeliveryError:
    try:
        raw = err.read(_MAX_RESPONSE_BYTES)
    except (OSError, http.client.HTTPException):
        raw = b""
    code = message = None
    try:
        error = json.loads(raw).get("error") or {}
        code, message = error.get("code"), error.get("message")
        if error.get("fields"):
            message = f"{message} {json.dumps(error['fields'])[:1000]}"
    except (ValueError, AttributeError):
        message = raw[:300].decode("utf-8", "replace") or None
    retry_after = parse_retry_after(err.headers.get("Retry-After") if err.headers else None)
    return DeliveryError(
        f"HTTP {err.code} from {err.url}: {message or err.reason}",
        status=err.code,
        code=code,
        retry_after=retry_after,
    )
