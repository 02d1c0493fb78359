"""A short-lived cache of agent credentials, so that a report does not pay a database round trip to authenticate.

Kept in Redis (shared by every web process, so a revocation is seen by all of them at once) for
`AGENT_CREDENTIAL_CACHE_S` seconds (default 30) under the credential's hash; only live credentials are cached,
never an unknown or revoked one. Whatever changes the answer drops the entry at once: a credential saved or
deleted (admin revocation; node deletion cascades to its credentials), re-enrolment (which revokes the node's
credentials in one UPDATE and calls `credentials_invalidate`), and a new agent action for the node (the
executors register their model with `pending_for_node_sql_register`). The drop happens both when the change is
made and again after its transaction commits. One race remains, bounded by the TTL: a lookup that read the row
before the commit and writes the cache after the second drop keeps the old answer until it expires. Without
Redis, or with the cache off (`AGENT_CREDENTIAL_CACHE_S=0`), and whenever Redis fails (`fleet.core.failopen`),
every request reads the database as before.
"""

import orjson
from django.conf import settings
from django.db import transaction

from fleet.core.failopen import Dependency

from .. import metrics
from .stream import STREAM_ERRORS, redis_client

cache_health = Dependency("credential cache", metrics.CREDENTIAL_CACHE_UNAVAILABLE)


def _enabled() -> bool:
    return bool(settings.AGENT_CREDENTIAL_CACHE_S and settings.INGEST_QUEUE_URL)


def _key(key_hash: str) -> str:
    return f"fleet:credential:{key_hash}"


def credential_cached(key_hash: str) -> tuple | None:
    """The cached row (credential id, node id, revoked_at (None), action key, actions open) or None."""
    if not _enabled():
        return None
    if not cache_health.available():
        cache_health.failed("get", None)
        return None
    try:
        raw = redis_client().get(_key(key_hash))
    except STREAM_ERRORS as exc:
        cache_health.failed("get", exc)
        return None
    if raw is None:
        return None
    credential_id, node_id, action_key, actions_open = orjson.loads(raw)
    return credential_id, node_id, None, action_key, actions_open


def credential_cache_put(key_hash: str, row: tuple) -> None:
    if not _enabled() or row[2] is not None or not cache_health.available():
        return
    try:
        redis_client().set(_key(key_hash), orjson.dumps([row[0], row[1], row[3], bool(row[4])]),
                           ex=settings.AGENT_CREDENTIAL_CACHE_S)
    except STREAM_ERRORS as exc:
        cache_health.failed("set", exc)


def credentials_invalidate(*, key_hashes: list[str] | None = None, node_id: int | None = None) -> None:
    """Drop cached credentials (the given hashes, or every credential of `node_id`) now and after commit."""
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
            redis_client().delete(*(_key(h) for h in hashes))
        except STREAM_ERRORS as exc:
            # Not fail-open: a revocation must not be ignored silently. The entry expires within the TTL anyway.
            cache_health.failed("delete", exc)

    drop()
    transaction.on_commit(drop)
