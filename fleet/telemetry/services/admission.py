"""The steady-state report in two Redis round trips and one fsync (the request path's fast lane).

A queued steady-state report (services/stream.py) used to cost three round trips to the same Redis: the
credential cache GET, the rate-limit INCR (a write, so with `appendfsync always` Redis fsynced before answering
it) and the XADD script (fsynced again). When the credential cache, the rate-limit counters and the ingest stream
live on one Redis server (the default: all three come from `REDIS_URL`), the request instead makes:

1. `admit`, one read-only script: the cached credential and the node's rate-limit count in the current window
   (read, not counted). Nothing is written, so Redis does not fsync for it.
2. After validation, `enqueue_counted`, one script: refuse if the stream is full, count the request in the
   node's window (the same key `fleet.core.ratelimit` counts under), refuse if that puts the node over its limit,
   else XADD the entry and remember it under the node. One fsync covers the count and the entry, and the
   acknowledgement still leaves only once the entry is durable.

Anything else (no cached credential, a count at the limit, a body that is not a valid steady-state batch, a full
stream, a Redis error) is not decided here: the caller hands the request to the general path, which answers it
exactly as before (and counts it then). So this lane only ever answers a 200 that the general path would have
answered, and a request is counted once on either path (a request refused for its rate after the second script
is counted again by the general path: only ever a node already over its limit).

The first script reads the counter under a key it builds from the credential's node id, which it does not declare
to Redis: fine for one Redis server (or a replicated pair), not for Redis Cluster, where `INGEST_QUEUE_URL` must
differ from the cache's location to leave this lane off.
"""

import time
from dataclasses import dataclass
from datetime import datetime
from functools import cache

import orjson
from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.base import default_key_func
from django.core.cache.backends.redis import RedisCache

from fleet.core import ratelimit

from .credentials import cache_health
from .stream import STREAM_ERRORS, node_key, queue_enabled, redis_client, stream_health, stream_name

RATE_SCOPE = "agent"

# The cached credential (KEYS[1]) and the count so far of the node's current window (ARGV[1] .. node .. ARGV[2]).
_ADMIT_LUA = """
local row = redis.call('GET', KEYS[1])
if not row then return false end
local count = 0
if ARGV[1] ~= '' then
  count = tonumber(redis.call('GET', ARGV[1] .. tostring(cjson.decode(row)[2]) .. ARGV[2]) or '0')
end
return {row, count}
"""

# As services/stream.py's enqueue script, counting the request in its rate-limit window first (KEYS[3]).
# false: the stream is full (nothing counted); 0: over the limit (counted, nothing queued); else the entry id.
_ENQUEUE_COUNTED_LUA = """
if redis.call('XLEN', KEYS[1]) >= tonumber(ARGV[4]) then return false end
if KEYS[3] then
  local count = redis.call('INCR', KEYS[3])
  if count == 1 then redis.call('EXPIRE', KEYS[3], ARGV[6]) end
  if count > tonumber(ARGV[5]) then return 0 end
end
local id = redis.call('XADD', KEYS[1], '*', 'n', ARGV[1], 't', ARGV[2], 'r', ARGV[3])
redis.call('SADD', KEYS[2], id)
return id
"""


@dataclass(frozen=True)
class Admission:
    """A cached live credential, and the rate-limit window it was read in."""

    credential_id: int
    node_id: int
    action_key: str
    actions_open: bool
    rate_key: str  # "" when the agent rate limit is off
    limit: int
    window_s: int


def available() -> bool:
    """The lane is on when the queue, the credential cache and the rate-limit store are one Redis, all healthy."""
    if not (settings.INGEST_FAST_LANE and queue_enabled() and settings.AGENT_CREDENTIAL_CACHE_S):
        return False
    if not (stream_health.available() and cache_health.available() and ratelimit.store_health.available()):
        return False
    backend = caches["default"]
    return (isinstance(backend, RedisCache) and backend.key_func is default_key_func
            and settings.CACHES["default"].get("LOCATION") == settings.INGEST_QUEUE_URL)


def admit(key_hash: str, *, limit: int | None, window_s: int) -> Admission | None:
    """The cached credential if the node is under its limit; None: the general path decides."""
    if limit is None:
        prefix = suffix = ""
    else:
        # `fleet.core.ratelimit` counts under make_key(f"ratelimit:agent:{node}:{window}"); with Django's default
        # key function (checked in `available`) that is prefix + node + suffix.
        window = int(time.time() // window_s)
        prefix = caches["default"].make_and_validate_key(f"ratelimit:{RATE_SCOPE}:")
        suffix = f":{window}"
    try:
        found = _script(_ADMIT_LUA)(keys=[f"fleet:credential:{key_hash}"], args=[prefix, suffix])
    except STREAM_ERRORS as exc:
        _redis_failed(exc)
        return None
    if not found:
        return None
    row, count = found
    credential_id, node_id, action_key, actions_open = orjson.loads(row)
    if limit is not None and int(count) >= limit:
        return None
    return Admission(credential_id=credential_id, node_id=node_id, action_key=action_key,
                     actions_open=bool(actions_open), rate_key=f"{prefix}{node_id}{suffix}" if prefix else "",
                     limit=limit or 0, window_s=window_s)


def enqueue_counted(admission: Admission, reports: list[dict], now: datetime) -> bool:
    """Count the request and queue its validated steady-state batch in one script; False: nothing queued (the
    general path takes the request: the stream is full, the node went over its limit, or Redis failed)."""
    keys = [stream_name(), node_key(admission.node_id)]
    if admission.rate_key:
        keys.append(admission.rate_key)
    try:
        entry_id = _script(_ENQUEUE_COUNTED_LUA)(
            keys=keys, args=[admission.node_id, now.isoformat(), orjson.dumps(reports),
                             settings.INGEST_QUEUE_MAX_ENTRIES, admission.limit, admission.window_s + 1])
    except STREAM_ERRORS as exc:
        # The entry may have been appended without the answer reaching us; the general path then writes the
        # batch in the request, which is safe (the writer finds it stored), as in services/stream.py.
        _redis_failed(exc)
        return False
    return bool(entry_id)


def _redis_failed(exc: BaseException) -> None:
    """One Redis serves all three: the general path must not wait on it three more times for this request."""
    for dependency, label in ((stream_health, "unavailable"), (cache_health, "get"),
                              (ratelimit.store_health, RATE_SCOPE)):
        dependency.failed(label, exc)


def _script(source: str):
    return _registered(redis_client(), source)


@cache
def _registered(client, source: str):
    # Keyed on the client too: tests (and a settings change) replace `redis_client`'s cached client.
    return client.register_script(source)
