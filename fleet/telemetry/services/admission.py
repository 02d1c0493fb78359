"""The steady-state report in one Redis round trip and one fsync (the request path's fast lane).

A queued steady-state report (services/stream.py) used to cost three round trips to the same Redis: the
credential cache GET, the rate-limit INCR (a write, so with `appendfsync always` Redis fsynced before answering
it) and the XADD script (fsynced again). When the credential cache, the rate-limit counters and the ingest stream
live on one Redis server (the default: all three come from `REDIS_URL`), the request instead parses and validates
the body, then makes one script call that

1. reads the cached credential (none: the general path authenticates the request, from the database);
2. refuses if a report names another node than the credential's, or if the stream is full;
3. reads the node's count in the current rate-limit window (the key `fleet.core.ratelimit` counts under) and
   refuses, without counting, when it is at the limit;
4. counts the request and XADDs the entry, remembered under the node.

One fsync covers the count and the entry, and the acknowledgement still leaves only once the entry is durable.

Whatever the script refuses, and anything else this lane does not decide (a body that is not a valid steady-state
batch, a Redis error), the caller hands to the general path, which answers it exactly as before (and counts it
then). So this lane only ever answers a 200 that the general path would have answered, and every request is
counted once, on one path or the other. The body is validated before the credential is known: an unauthenticated
request costs the validation (about a tenth of a millisecond with jsonschema-rs) before the general path refuses
it with 401.

The script reads and writes keys it builds from the credential's node id, which it does not declare to Redis:
fine for one Redis server (or a replicated pair), not for Redis Cluster, where `INGEST_QUEUE_URL` must differ
from the cache's location to leave this lane off.
"""

import time
from dataclasses import dataclass
from datetime import datetime

import orjson
from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.base import default_key_func
from django.core.cache.backends.redis import RedisCache

from fleet.core import ratelimit

from .credentials import cache_health, credential_key
from .stream import STREAM_ERRORS, lua, node_key, queue_enabled, stream_health, stream_name

RATE_SCOPE = "agent"

# KEYS: the cached credential, the stream. ARGV: the node the reports name ('' when none does), the stream's
# bound, the rate-limit key's prefix ('' when the limit is off) and suffix, the limit, the window's expiry, the
# entry's time and reports, the prefix of the node's set of entries. Returns false (no cached credential) or
# {credential row, outcome}: the entry id, -2 another node's reports, -1 stream full, 0 at the rate limit.
_ADMIT_ENQUEUE_LUA = """
local row = redis.call('GET', KEYS[1])
if not row then return false end
local node = tostring(cjson.decode(row)[2])
if ARGV[1] ~= '' and ARGV[1] ~= node then return {row, -2} end
if redis.call('XLEN', KEYS[2]) >= tonumber(ARGV[2]) then return {row, -1} end
if ARGV[3] ~= '' then
  local key = ARGV[3] .. node .. ARGV[4]
  if tonumber(redis.call('GET', key) or '0') >= tonumber(ARGV[5]) then return {row, 0} end
  if redis.call('INCR', key) == 1 then redis.call('EXPIRE', key, ARGV[6]) end
end
local id = redis.call('XADD', KEYS[2], '*', 'n', node, 't', ARGV[7], 'r', ARGV[8])
redis.call('SADD', ARGV[9] .. node, id)
return {row, id}
"""


@dataclass(frozen=True)
class Admission:
    """The cached live credential a queued batch was admitted under."""

    credential_id: int
    node_id: int
    action_key: str
    actions_open: bool


def available() -> bool:
    """The lane is on when the queue, the credential cache and the rate-limit store are one Redis, all healthy."""
    if not (settings.INGEST_FAST_LANE and queue_enabled() and settings.AGENT_CREDENTIAL_CACHE_S):
        return False
    if not (stream_health.available() and cache_health.available() and ratelimit.store_health.available()):
        return False
    backend = caches["default"]
    return (isinstance(backend, RedisCache) and backend.key_func is default_key_func
            and settings.CACHES["default"].get("LOCATION") == settings.INGEST_QUEUE_URL)


def admit_and_enqueue(key_hash: str, reports: list[dict], now: datetime, *, claimed: int | None,
                      limit: int | None, window_s: int) -> Admission | None:
    """Queue a validated steady-state batch under the cached credential `key_hash`, counted in the node's window;
    None when nothing was queued (the general path takes the request). `claimed`: the node the reports name."""
    if limit is None:
        prefix = suffix = ""
    else:
        # `fleet.core.ratelimit` counts under make_key(f"ratelimit:agent:{node}:{window}"); with Django's default
        # key function (checked in `available`) that is prefix + node + suffix.
        prefix = caches["default"].make_and_validate_key(f"ratelimit:{RATE_SCOPE}:")
        suffix = f":{int(time.time() // window_s)}"
    try:
        found = lua(_ADMIT_ENQUEUE_LUA)(
            keys=[credential_key(key_hash), stream_name()],
            args=["" if claimed is None else str(claimed), settings.INGEST_QUEUE_MAX_ENTRIES, prefix, suffix,
                  limit or 0, window_s + 1, now.isoformat(), orjson.dumps(reports), node_key("")])
    except STREAM_ERRORS as exc:
        # The entry may have been appended without the answer reaching us; the general path then writes the
        # batch in the request, which is safe (the writer finds it stored), as in services/stream.py.
        _redis_failed(exc)
        return None
    if not found or isinstance(found[1], int):  # no credential cached, or refused
        return None
    credential_id, node_id, action_key, actions_open = orjson.loads(found[0])
    return Admission(credential_id=credential_id, node_id=node_id, action_key=action_key,
                     actions_open=bool(actions_open))


def _redis_failed(exc: BaseException) -> None:
    """One Redis serves all three: the general path must not wait on it three more times for this request."""
    for dependency, label in ((stream_health, "unavailable"), (cache_health, "get"),
                              (ratelimit.store_health, RATE_SCOPE)):
        dependency.failed(label, exc)
