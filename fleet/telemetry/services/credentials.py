"""A short-lived cache of agent credentials, so that a report does not pay a database round trip to authenticate.

Kept in Redis (shared by every web process, so a revocation is seen by all of them at once) for
between half of and all of `AGENT_CREDENTIAL_CACHE_S` seconds (default 300; spread so that entries written
together do not expire together) under the credential's hash; only live credentials are cached,
never an unknown or revoked one. Whatever changes the answer drops the entry at once and bumps the credential's
generation: a credential saved or deleted (admin revocation; node deletion cascades to its credentials),
re-enrolment (which revokes the node's credentials in one UPDATE and calls `credentials_invalidate`), and a new
agent action for the node (the executors register their model with `pending_for_node_sql_register`). This happens
both when the change is made and again after its transaction commits. A lookup reads the generation with the
entry, and writes the row it then read from the database only if the generation is still the one it saw: so a
lookup that read the row before the commit cannot put the old answer back after it. That race is closed, so the
TTL no longer bounds it and can outlive several report intervals (at 30 s it had expired before each node's next
report, and nearly every report paid the database and the general path). What the TTL still bounds: a revocation
made while Redis could not be reached (the drop fails, is counted in `fleet_credential_cache_unavailable_total`,
and the old entry answers until it expires). Without Redis, or with the cache off (`AGENT_CREDENTIAL_CACHE_S=0`),
and whenever Redis fails (`fleet.core.failopen`), every request reads the database as before.
"""

import random

import orjson
from django.conf import settings
from django.db import transaction

from fleet.core import rowsets
from fleet.core.failopen import Dependency

from .. import metrics
from .stream import STREAM_ERRORS, lua, redis_client

cache_health = Dependency("credential cache", metrics.CREDENTIAL_CACHE_UNAVAILABLE)
# A credential's generation outlives any lookup between its read of the generation and its write of the entry.
GENERATION_S = 86_400
# The entry, if the generation is still the one the lookup read with it (a missing generation reads as 0).
_PUT_LUA = """
if (redis.call('GET', KEYS[2]) or '0') ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
return 1
"""


def _enabled() -> bool:
    return bool(settings.AGENT_CREDENTIAL_CACHE_S and settings.INGEST_QUEUE_URL)


def credential_key(key_hash: str) -> str:
    return f"fleet:credential:{key_hash}"


def _generation_key(key_hash: str) -> str:
    return f"fleet:credential-generation:{key_hash}"


def credential_cached(key_hash: str) -> tuple[tuple | None, str]:
    """The cached row (credential id, node id, revoked_at (None), action key, actions open) or None, and the
    credential's generation as read with it (what `credential_cache_put` must find unchanged)."""
    if not _enabled():
        return None, ""
    if not cache_health.available():
        cache_health.failed("get", None)
        return None, ""
    try:
        raw, generation = redis_client().mget(credential_key(key_hash), _generation_key(key_hash))
    except STREAM_ERRORS as exc:
        cache_health.failed("get", exc)
        return None, ""
    generation = (generation or b"0").decode()
    if raw is None:
        return None, generation
    credential_id, node_id, action_key, actions_open = orjson.loads(raw)
    return (credential_id, node_id, None, action_key, actions_open), generation


def credential_cache_put(key_hash: str, row: tuple, generation: str) -> None:
    """Cache a live row read after `credential_cached` returned `generation`, unless the credential changed since."""
    if not _enabled() or not generation or row[2] is not None or not cache_health.available():
        return
    try:
        lua(_PUT_LUA)(**_put_arguments(key_hash, row, generation))
    except STREAM_ERRORS as exc:
        cache_health.failed("set", exc)


def credential_cache_warm(*, chunk: int = 1000) -> int:
    """Cache every live credential; returns how many. For a cold cache (the queue's first start, a Redis that lost
    its data): otherwise every node's next report pays the database and the general path at once, and a large
    fleet's first minute is shed. Race-safe as a lookup is: each chunk's generations are read before its rows."""
    if not _enabled() or not cache_health.available():
        return 0
    from ..authentication import credential_rows_sql  # the one credential statement (authentication imports us)
    from ..models import NodeCredential

    cached, after = 0, 0
    while True:
        chunk_ids = list(NodeCredential.objects.filter(revoked_at__isnull=True, pk__gt=after).order_by("pk")
                         .values_list("pk", "key_hash")[:chunk])
        if not chunk_ids:
            return cached
        try:
            values = redis_client().mget([_generation_key(key_hash) for _, key_hash in chunk_ids])
            generations = {key_hash: (value or b"0").decode() for (_, key_hash), value in zip(chunk_ids, values,
                                                                                           strict=True)}
            rows = rowsets.fetch_all(credential_rows_sql(), after, chunk_ids[-1][0])
            pipe = redis_client().pipeline(transaction=False)
            for row in rows:
                if row[2] is None and row[3] in generations:
                    lua(_PUT_LUA)(**_put_arguments(row[3], row, generations[row[3]]), client=pipe)
            cached += sum(pipe.execute())
        except STREAM_ERRORS as exc:
            cache_health.failed("set", exc)
            return cached
        after = chunk_ids[-1][0]


def _put_arguments(key_hash: str, row: tuple, generation: str) -> dict:
    # Each entry lives between half the TTL and the TTL: a fleet whose entries were all written at once (the web
    # tier's or Redis' restart) does not miss them all at once again a TTL later, and then every TTL after that.
    ttl = settings.AGENT_CREDENTIAL_CACHE_S
    return {"keys": [credential_key(key_hash), _generation_key(key_hash)],
            "args": [generation, orjson.dumps([row[0], row[1], row[3], bool(row[4])]),
                     random.randint(max(1, ttl // 2), ttl)]}


def credentials_invalidate(*, key_hashes: list[str] | None = None, node_id: int | None = None) -> None:
    """Drop cached credentials (the given hashes, or every credential of `node_id`) and bump their generations, now
    and after commit."""
    if not _enabled():
        return
    hashes = list(key_hashes or [])
    if node_id is not None:
        from ..models import NodeCredential

        hashes += list(NodeCredential.objects.filter(node_id=node_id).values_list("key_hash", flat=True))
    if not hashes:
        return

    def drop():
        try:
            pipe = redis_client().pipeline()
            for key_hash in hashes:
                pipe.incr(_generation_key(key_hash))
                pipe.expire(_generation_key(key_hash), GENERATION_S)
            pipe.delete(*(credential_key(h) for h in hashes))
            pipe.execute()
        except STREAM_ERRORS as exc:
            # Not fail-open: a revocation must not be ignored silently. The entry expires within the TTL anyway.
            cache_health.failed("delete", exc)

    drop()
    transaction.on_commit(drop)
