"""Redis down must not take the request path with it: flood-protection counters and task messages fail open
(counted, logged), against a real redis-server that the test stops and starts again, not a mock."""

import time

import pytest
from celery import Celery
from django.test import override_settings
from prometheus_client import REGISTRY

from fleet.core import failopen, ratelimit
from tests.processes import RedisServer


def _cache_on(url: str) -> dict:
    return {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url,
                        "OPTIONS": {"socket_connect_timeout": 0.25, "socket_timeout": 0.25}}}


def _count(name: str, **labels) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
def redis_server(tmp_path):
    with RedisServer(tmp_path / "redis") as server:
        yield server


def test_rate_limit_counts_then_fails_open_while_redis_is_down_then_counts_again(redis_server, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(ratelimit.time, "monotonic", lambda: clock[0])  # the failopen module shares `time`
    with override_settings(CACHES=_cache_on(redis_server.url)):
        assert [ratelimit.hit("agent:7", 60) for _ in range(2)] == [1, 2]
        before = _count("fleet_rate_limit_unavailable_total", scope="agent")

        redis_server.stop()
        started = time.perf_counter()
        assert ratelimit.hit("agent:7", 60) is None  # the store failed: the request goes on unchecked
        assert ratelimit.hit("agent:8", 60) is None  # skipped without another connection attempt
        assert time.perf_counter() - started < 1.0
        assert _count("fleet_rate_limit_unavailable_total", scope="agent") == before + 2

        redis_server.start()  # a fresh, empty Redis on the same port
        assert ratelimit.hit("agent:7", 60) is None  # still within the back-off after the failure
        clock[0] += failopen.RETRY_AFTER_FAILURE_S
        assert ratelimit.hit("agent:7", 60) == 1
        assert _count("fleet_rate_limit_unavailable_total", scope="agent") == before + 3


def test_hung_redis_costs_a_bounded_wait(redis_server):
    redis_server.proc.send_signal(19)  # SIGSTOP: connections are accepted by the kernel but never answered
    try:
        with override_settings(CACHES=_cache_on(redis_server.url)):
            started = time.perf_counter()
            assert ratelimit.hit("agent:1", 60) is None
            assert time.perf_counter() - started < 1.0
    finally:
        redis_server.proc.send_signal(18)  # SIGCONT


@pytest.fixture
def celery_app_on(monkeypatch):
    """Make a Celery app on the given broker the current one (what `current_app` means) for the test."""
    from celery import current_app

    previous = current_app._get_current_object()
    apps = []

    def make(url: str) -> Celery:
        app = Celery("failopen-test", broker=url, backend=url, set_as_current=True)
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.close()
    previous.set_current()


def test_enqueue_gives_up_quickly_on_a_dead_broker_and_recovers_after_a_restart(redis_server, celery_app_on,
                                                                               monkeypatch):
    import redis

    clock = [1000.0]
    monkeypatch.setattr(failopen.time, "monotonic", lambda: clock[0])
    celery_app_on(redis_server.url)
    queue = redis.Redis.from_url(redis_server.url)
    assert failopen.enqueue("health.evaluate_nodes", node_ids=[1]) is True
    assert queue.llen("celery") == 1
    before = _count("fleet_tasks_not_enqueued_total", task="health.evaluate_nodes")

    redis_server.stop()
    started = time.perf_counter()
    assert failopen.enqueue("health.evaluate_nodes", node_ids=[2]) is False
    assert failopen.enqueue("health.evaluate_nodes", node_ids=[3]) is False  # skipped: no second attempt
    # Celery's defaults (publish retries, the result backend reconnecting) took about 20 s here.
    assert time.perf_counter() - started < 2.0
    assert _count("fleet_tasks_not_enqueued_total", task="health.evaluate_nodes") == before + 2

    redis_server.start()
    clock[0] += failopen.RETRY_AFTER_FAILURE_S
    # The pooled connection died with the old server; the one quick retry opens a new one.
    assert failopen.enqueue("health.evaluate_nodes", node_ids=[4]) is True
    assert queue.llen("celery") == 1
