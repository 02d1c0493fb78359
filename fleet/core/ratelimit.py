"""Fixed-window request counters in the shared cache, for limits checked on every agent request.

DRF's SimpleRateThrottle keeps a list of timestamps per client and reads and rewrites it (pickled) on every
request. A fixed window needs one atomic increment: on Redis one INCR (plus an EXPIRE for the window's first
request), on other caches add/incr. The price is that a client can burst up to twice its limit across a
window edge, which is acceptable for flood protection.

Flood protection fails open (`fleet.core.failopen`): if the counter store (Redis) is down or hangs, the request
goes on unchecked, counted in `fleet_rate_limit_unavailable_total{scope}`. A limit that raised would turn every
agent request into a 500 and stop ingest, which needs only the database.
"""

import time

from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import RedisError

from . import metrics
from .failopen import Dependency

# What a cache backend raises when its server is unreachable, hung or refusing writes: redis-py's errors
# (connection refused or reset, timeout, READONLY, OOM), socket errors from other backends.
STORE_ERRORS = (RedisError, OSError)

store_health = Dependency("rate-limit store", metrics.RATE_LIMIT_UNAVAILABLE)


def hit(key: str, window_s: int) -> int | None:
    """Count one request for `key` in the current window and return the window's count so far, or None when
    the store is unavailable (the caller lets the request through). The key's prefix names the scope."""
    scope = key.partition(":")[0]
    if not store_health.available():
        store_health.failed(scope, None)
        return None
    try:
        return _hit(key, window_s)
    except STORE_ERRORS as exc:
        store_health.failed(scope, exc)
        return None


def _hit(key: str, window_s: int) -> int:
    name = f"ratelimit:{key}:{int(time.time() // window_s)}"
    backend = caches["default"]
    if isinstance(backend, RedisCache):
        redis_key = backend.make_and_validate_key(name)
        client = _redis_client(backend, redis_key)
        count = client.incr(redis_key)
        if count == 1:  # the window's first request sets its expiry; a key is never reused after its window
            client.expire(redis_key, window_s + 1)
        return int(count)
    if backend.add(name, 1, timeout=window_s + 1):
        return 1
    try:
        return backend.incr(name)
    except ValueError:  # expired between add and incr
        backend.add(name, 1, timeout=window_s + 1)
        return 1


def _redis_client(backend: RedisCache, key: str):
    """Django builds a new client object (and its table of reply parsers) per call; keep one per backend. It
    shares the backend's connection pool, so it is as thread- and fork-safe as the cache itself."""
    client = getattr(backend, "_fleet_ratelimit_client", None)
    if client is None:
        client = backend._cache.get_client(key, write=True)
        backend._fleet_ratelimit_client = client
    return client


def seconds_left(window_s: int) -> float:
    return window_s - time.time() % window_s
