"""Overload protection for the web tier: a request that waited too long for a worker is answered 503 at once.

Past capacity, requests queue in front of gunicorn's workers: in the kernel's accept queue for sync workers,
in the thread pool's queue for gthread. Served in order, each waits for everything ahead of it: at 3× capacity
agents got their 200 after up to 37 s, long after their own 10-s timeout had fired, so the server spent its
capacity on answers nobody read while the agents sent everything again. This middleware bounds that wait:

* It measures how long the request waited before a worker took it: the kernel's `tcpi_last_data_recv` for the
  connection (how long ago the request's last bytes arrived; Linux, TCP, any gunicorn worker class), or a
  request-start header set by a trusted front proxy (`WEB_REQUEST_START_HEADER`, e.g. nginx
  `proxy_set_header X-Request-Start "t=${msec}"`, which also counts the proxy's own queue); the larger wins.
* A request that waited longer than `WEB_QUEUE_MAX_MS` (5 s: half the agent's timeout, leaving the rest for
  the work) is not processed: it gets `503` with `Retry-After` and the API's error shape, for a fraction of a
  millisecond of CPU instead of several milliseconds of ingest.
* When the queue stays up — no request found it empty for a second: overload, not a burst — the bound drops
  to `WEB_QUEUE_TARGET_MS` (500 ms), so the queue drains to that instead of sitting at 5 s for every
  request (the "controlled delay" idea from CoDel: tolerate bursts, not a standing queue). Served requests
  then wait at most about that long and the rest learn quickly to come back later. A process that had no
  request in flight for that second was idle, not behind a queue: it counts as having found the queue empty
  (otherwise the first burst after a quiet second, or after a worker's boot, met the lower bound).

`/healthz`, `/readyz` and `/metrics` are never shed: probes and scrapes must see the server as it is.
`WEB_QUEUE_MAX_MS=0` turns the middleware off.
"""

import logging
import socket
import struct
import threading
import time

import orjson

from . import metrics

logger = logging.getLogger(__name__)

EXEMPT_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
# A request that waited less than this found the queue empty (kernel clock ticks and header parsing included).
EMPTY_BELOW_S = 0.025
# The queue counts as standing once no request found it empty for this long.
STANDING_AFTER_S = 1.0
LOG_EVERY_S = 10.0
_DRAIN_LIMIT = 1 << 20
# struct tcp_info (linux/tcp.h): eight u8 fields, then u32s; tcpi_last_data_recv (ms) is the 14th u32.
_TCP_INFO_SIZE = 104
_LAST_DATA_RECV = struct.Struct("=I")
_LAST_DATA_RECV_OFFSET = 8 + 4 * 11


def socket_wait_s(sock) -> float | None:
    """How long ago the connection's last request bytes arrived, from the kernel; None where that is unknown
    (not Linux, not TCP)."""
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_SIZE)
    except (AttributeError, OSError):
        return None
    if len(info) < _LAST_DATA_RECV_OFFSET + 4:
        return None
    return _LAST_DATA_RECV.unpack_from(info, _LAST_DATA_RECV_OFFSET)[0] / 1000


def header_wait_s(value: str, now: float) -> float | None:
    """Seconds since a request-start header's time: `t=1700000000.123` (seconds), or ms or µs since the epoch, as
    nginx, HAProxy and the Heroku router write it. None for a value that is not a plausible recent time."""
    try:
        stamp = float(value.strip().removeprefix("t="))
    except ValueError:
        return None
    if stamp > 1e14:
        stamp /= 1e6
    elif stamp > 1e11:
        stamp /= 1e3
    waited = now - stamp
    return waited if 0 <= waited < 86400 else None


class ShedWhenQueued:
    """WSGI middleware around the Django application (config/wsgi.py)."""

    def __init__(self, app, *, max_wait_s: float, target_wait_s: float, retry_after_s: int,
                 request_start_header: str = ""):
        self.app = app
        self.max_wait_s = max_wait_s
        self.target_wait_s = min(target_wait_s, max_wait_s)
        self.retry_after = str(max(1, int(retry_after_s)))
        self.header_key = ("HTTP_" + request_start_header.upper().replace("-", "_")) if request_start_header else ""
        self._empty_at = time.monotonic()  # the last time a request found the queue empty
        self._in_flight = 0  # requests this process is handling (gthread: several)
        self._idle_since = self._empty_at  # when the last one finished, while none is in flight
        self._lock = threading.Lock()
        self._logged_at = float("-inf")
        self._shed = 0

    def __call__(self, environ, start_response):
        if self.max_wait_s <= 0 or environ.get("PATH_INFO", "") in EXEMPT_PATHS:
            return self.app(environ, start_response)
        waited = self.waited_s(environ)
        if waited is None:
            return self.app(environ, start_response)
        metrics.QUEUE_SECONDS.observe(waited)
        now = time.monotonic()
        with self._lock:
            if waited < EMPTY_BELOW_S or (not self._in_flight and now - self._idle_since > STANDING_AFTER_S):
                self._empty_at = now
            standing = now - self._empty_at > STANDING_AFTER_S
            serve = waited <= (self.target_wait_s if standing else self.max_wait_s)
            if serve:
                self._in_flight += 1
        if not serve:
            return self._shed_response(environ, start_response, waited, standing)
        try:
            return self.app(environ, start_response)
        finally:
            with self._lock:
                self._in_flight -= 1
                if not self._in_flight:
                    self._idle_since = time.monotonic()

    def waited_s(self, environ) -> float | None:
        sock = environ.get("gunicorn.socket")
        waits = [socket_wait_s(sock) if sock is not None else None]
        if self.header_key and environ.get(self.header_key):
            waits.append(header_wait_s(environ[self.header_key], time.time()))
        known = [w for w in waits if w is not None]
        return max(known) if known else None

    def _shed_response(self, environ, start_response, waited: float, standing: bool):
        path = environ.get("PATH_INFO", "")
        kind = "agent" if path.startswith("/api/v1/agent/") else "api" if path.startswith("/api/") else "other"
        metrics.REQUESTS_SHED.labels(kind).inc()
        self._log(waited, standing)
        _drain(environ)
        body = orjson.dumps({"error": {
            "code": "overloaded",
            "message": f"The server is overloaded: this request waited {waited:.1f} s for a worker and was not "
                       f"processed. Retry after {self.retry_after} s.",
            "fields": {}}})
        start_response("503 Service Unavailable", [
            ("Content-Type", "application/json"), ("Content-Length", str(len(body))),
            ("Retry-After", self.retry_after), ("Cache-Control", "no-store")])
        return [body]

    def _log(self, waited: float, standing: bool) -> None:
        now = time.monotonic()
        with self._lock:
            self._shed += 1
            if now - self._logged_at < LOG_EVERY_S:
                return
            self._logged_at, count, self._shed = now, self._shed, 0
        bound = self.target_wait_s if standing else self.max_wait_s
        logger.warning("overloaded: shed %d request(s) that waited longer than %.1f s for a worker (latest %.1f s)",
                       count, bound, waited)


def _drain(environ) -> None:
    """Read a small unread body so that closing the connection does not reset it before the client has read the
    503 (a socket closed with unread input sends RST)."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return
    stream = environ.get("wsgi.input")
    if stream is None or not 0 < length <= _DRAIN_LIMIT:
        return
    try:
        while length > 0:
            chunk = stream.read(min(length, 65536))
            if not chunk:
                break
            length -= len(chunk)
    except OSError:
        pass


def wrap(app):
    """The Django WSGI application behind the shedding middleware, configured from settings."""
    from django.conf import settings

    return ShedWhenQueued(app, max_wait_s=settings.WEB_QUEUE_MAX_S, target_wait_s=settings.WEB_QUEUE_TARGET_S,
                          retry_after_s=settings.WEB_SHED_RETRY_AFTER_S,
                          request_start_header=settings.WEB_REQUEST_START_HEADER)
