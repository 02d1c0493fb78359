"""Overload shedding: a request that waited too long for a worker gets 503 + Retry-After unprocessed."""

import json
import socket
import struct
import time

import pytest
from prometheus_client import REGISTRY

from fleet.core import overload
from fleet.core.overload import ShedWhenQueued, header_wait_s, socket_wait_s


class _TcpInfo:
    """A connection whose kernel says the request arrived `waited` seconds ago (tcp_info as Linux lays it out)."""

    def __init__(self, waited: float):
        self.waited = waited

    def getsockopt(self, level, option, size):
        info = bytearray(size)
        struct.pack_into("=I", info, 52, int(self.waited * 1000))
        return bytes(info)


def _app_calls():
    calls = []

    def app(environ, start_response):
        calls.append(environ["PATH_INFO"])
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"processed"]

    return app, calls


def _call(middleware, *, path="/api/v1/agent/reports", sock=None, **environ):
    captured = {}

    def start_response(status, headers):
        captured["status"], captured["headers"] = status, dict(headers)

    body = b"".join(middleware({"PATH_INFO": path, "REQUEST_METHOD": "POST", "gunicorn.socket": sock, **environ},
                               start_response))
    return captured["status"], captured["headers"], body


def _shed(kind: str) -> float:
    return REGISTRY.get_sample_value("fleet_requests_shed_total", {"kind": kind}) or 0.0


def test_kernel_reports_how_long_a_request_waited_before_accept():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        with socket.create_connection(listener.getsockname()) as client:
            client.sendall(b"POST /api/v1/agent/reports HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
            time.sleep(0.3)  # queued in the accept queue, like a request no sync worker is free for
            conn, _ = listener.accept()
            with conn:
                waited = socket_wait_s(conn)
    assert waited is not None and 0.25 <= waited < 1.0


def test_a_request_that_waited_too_long_is_answered_503_without_being_processed():
    app, calls = _app_calls()
    middleware = ShedWhenQueued(app, max_wait_s=5.0, target_wait_s=0.5, retry_after_s=15)
    before = _shed("agent")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        with socket.create_connection(listener.getsockname()) as client:
            client.sendall(b"x" * 10)
            conn, _ = listener.accept()
            assert _call(middleware, sock=conn)[0] == "200 OK"  # waited ~0 s: processed
    status, headers, body = _call(middleware, sock=_TcpInfo(6.0), CONTENT_LENGTH="0")
    assert status == "503 Service Unavailable"
    assert headers["Retry-After"] == "15"
    error = json.loads(body)["error"]
    assert error["code"] == "overloaded" and "waited 6.0 s" in error["message"] and error["fields"] == {}
    assert calls == ["/api/v1/agent/reports"]  # only the first one reached the application
    assert _shed("agent") == before + 1


def test_a_standing_queue_lowers_the_bound_to_the_target(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(overload.time, "monotonic", lambda: clock[0])
    app, calls = _app_calls()
    middleware = ShedWhenQueued(app, max_wait_s=5.0, target_wait_s=0.5, retry_after_s=15)
    # A burst: the queue was empty a moment ago, so 2 s of waiting is tolerated.
    assert _call(middleware, sock=_TcpInfo(0.0))[0] == "200 OK"
    clock[0] += 0.5
    assert _call(middleware, sock=_TcpInfo(2.0))[0] == "200 OK"
    # No request has found the queue empty for over a second: overload. Now 0.5 s is the most.
    clock[0] += 1.0
    assert _call(middleware, sock=_TcpInfo(2.0))[0].startswith("503")
    assert _call(middleware, sock=_TcpInfo(0.4))[0] == "200 OK"
    # The queue drains: a request finds it empty, and bursts are tolerated again.
    assert _call(middleware, sock=_TcpInfo(0.0))[0] == "200 OK"
    assert _call(middleware, sock=_TcpInfo(2.0))[0] == "200 OK"
    assert len(calls) == 5


def test_a_process_idle_for_a_second_was_not_behind_a_standing_queue(monkeypatch):
    """The first burst after a quiet second (or after a worker's boot) gets the burst bound, not the target."""
    clock = [100.0]
    monkeypatch.setattr(overload.time, "monotonic", lambda: clock[0])
    app, calls = _app_calls()
    middleware = ShedWhenQueued(app, max_wait_s=5.0, target_wait_s=0.5, retry_after_s=15)
    clock[0] += 3.0  # booted, nothing to do for 3 s
    assert _call(middleware, sock=_TcpInfo(2.0))[0] == "200 OK"
    # Busy without a break (each request arrives as the last finishes, none found the queue empty): standing.
    for _ in range(3):
        clock[0] += 0.6
        assert _call(middleware, sock=_TcpInfo(0.4))[0] == "200 OK"
    assert _call(middleware, sock=_TcpInfo(2.0))[0].startswith("503")
    # A request in flight keeps the process busy however long it takes: still standing.
    inner = {}

    def slow(environ, start_response):
        clock[0] += 1.5
        inner["answer"] = _call(middleware, sock=_TcpInfo(2.0))[0]
        start_response("200 OK", [])
        return [b""]

    middleware.app = slow
    _call(middleware, sock=_TcpInfo(0.1))
    assert inner["answer"].startswith("503")
    middleware.app = app
    assert len(calls) == 4

@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics"])
def test_probes_and_scrapes_are_never_shed(path):
    app, calls = _app_calls()
    middleware = ShedWhenQueued(app, max_wait_s=1.0, target_wait_s=0.5, retry_after_s=15)
    assert _call(middleware, path=path, sock=_TcpInfo(30.0))[0] == "200 OK"
    assert calls == [path]


def test_zero_turns_shedding_off_and_unknown_waits_are_served():
    app, calls = _app_calls()
    assert _call(ShedWhenQueued(app, max_wait_s=0, target_wait_s=0, retry_after_s=15), sock=_TcpInfo(60.0))[0] \
        == "200 OK"
    middleware = ShedWhenQueued(app, max_wait_s=1.0, target_wait_s=0.5, retry_after_s=15)
    assert _call(middleware, sock=None)[0] == "200 OK"  # not behind gunicorn (runserver, tests): no measure
    assert len(calls) == 2


def test_a_trusted_proxys_request_start_header_counts_only_when_configured():
    app, calls = _app_calls()
    started = f"t={time.time() - 8:.3f}"
    plain = ShedWhenQueued(app, max_wait_s=5.0, target_wait_s=5.0, retry_after_s=15)
    assert _call(plain, sock=_TcpInfo(0.0), HTTP_X_REQUEST_START=started)[0] == "200 OK"
    behind_proxy = ShedWhenQueued(app, max_wait_s=5.0, target_wait_s=5.0, retry_after_s=15,
                                  request_start_header="X-Request-Start")
    assert _call(behind_proxy, sock=_TcpInfo(0.0), HTTP_X_REQUEST_START=started)[0].startswith("503")
    assert _call(behind_proxy, sock=_TcpInfo(0.0), HTTP_X_REQUEST_START="t=garbage")[0] == "200 OK"


@pytest.mark.parametrize(("value", "expected"), [
    ("t=1800000000.5", 2.0), ("1800000000500", 2.0), ("t=1800000000500000", 2.0),  # seconds, ms, µs
    ("t=1800000003", None), ("t=1700000000", None), ("", None),  # the future, a day or more ago, nothing
])
def test_request_start_header_units(value, expected):
    waited = header_wait_s(value, 1800000002.5)
    assert waited == (pytest.approx(expected) if expected is not None else None)


def test_a_worker_compiles_the_report_validator_before_it_accepts():
    """Loading the WSGI application (what each gunicorn worker does before accepting) compiles what the first
    agent report would otherwise compile while the requests behind it wait long enough to be shed."""
    import importlib

    import config.wsgi
    from fleet.telemetry import validation

    validation._report_validator.cache_clear()
    validation._report_is_valid.cache_clear()
    importlib.reload(config.wsgi)
    assert validation._report_validator.cache_info().currsize == 1
    assert validation._report_is_valid.cache_info().currsize == 1
