"""The ingest queue: steady-state report batches acknowledged once durable in a Redis stream, written later in
batches by `manage.py fleet_writer` (`services/writer.py`).

Which batches: those without events and without an inventory (nearly all of them), when `INGEST_QUEUE` is on
(the default with Redis). A batch with events (every urgent event among them) or an inventory is written in the
request as before, so detection latency does not grow; so is every batch while the stream is unavailable
(`fleet.core.failopen`: Redis down, hung past `INGEST_QUEUE_TIMEOUT_S`, or the stream holding
`INGEST_QUEUE_MAX_ENTRIES` entries because no writer keeps up).

One entry per request: the node, the time the request arrived (it becomes the status's `received_at`, so the
silence sweep sees when the node spoke, not when a writer got to it) and the validated reports. The same script
that appends the entry adds its id to a per-node set (`<stream>:node:<id>`), which the writer empties after
commit. A batch that must be written in the request first writes the node's queued entries itself (they are
older), so a synchronous batch never overtakes queued ones and the exactly-once guard never mistakes them for
replays; the writer later finds them stored and only acknowledges them. While Redis does not answer, the
queued entries cannot be read: the synchronous batch then jumps past them, the agent epoch records the sequences
it jumped over, and the writer stores exactly those reports when Redis is back (sequence gaps, services/ingest.py).

The acknowledgement is safe because the entry is durable before the answer leaves: Redis runs with
`appendonly yes` and `appendfsync always` (docker-compose.yml, docs/deploy.md), so Redis fsyncs the append-only
file before it replies to XADD.
"""

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache

import orjson
from django.conf import settings
from django.utils.dateparse import parse_datetime
from redis.exceptions import RedisError

from fleet.core.failopen import Dependency

from .. import metrics
from .ingest import IngestResult, batch_instance, reports_ingest

logger = logging.getLogger(__name__)

GROUP = "writers"
STREAM_ERRORS = (RedisError, OSError)

stream_health = Dependency("ingest stream", metrics.QUEUE_UNAVAILABLE)

# XADD the entry and remember its id under the node, unless the stream is full (then nil: write in the request).
_ENQUEUE_LUA = """
if redis.call('XLEN', KEYS[1]) >= tonumber(ARGV[4]) then return false end
local id = redis.call('XADD', KEYS[1], '*', 'n', ARGV[1], 't', ARGV[2], 'r', ARGV[3])
redis.call('SADD', KEYS[2], id)
return id
"""


@dataclass
class Entry:
    """One queued request: `id` is the stream entry id."""

    id: str
    node_id: int
    received_at: datetime
    reports: list[dict]


@cache
def redis_client(*, blocking: bool = False):
    """One client (and connection pool) per process for the stream and the credential cache, with bounded waits:
    a hung Redis costs a request `INGEST_QUEUE_TIMEOUT_S`, then it writes synchronously. `blocking`: the writer's
    client, whose reads wait up to a second for new entries, so its socket timeout is longer."""
    import redis

    timeout = settings.INGEST_QUEUE_TIMEOUT_S
    return redis.Redis.from_url(settings.INGEST_QUEUE_URL, socket_timeout=max(timeout, 10.0) if blocking else timeout,
                                socket_connect_timeout=max(timeout, 2.0) if blocking else timeout,
                                health_check_interval=30)


def stream_name() -> str:
    return settings.INGEST_STREAM


def node_key(node_id: int) -> str:
    return f"{settings.INGEST_STREAM}:node:{node_id}"


def queue_enabled() -> bool:
    return bool(settings.INGEST_QUEUE and settings.INGEST_QUEUE_URL)


def is_steady(reports: list[dict]) -> bool:
    return not any(r.get("inventory") or r.get("events") for r in reports)


def reports_accept(*, node_id: int, reports: list[dict], now: datetime) -> IngestResult:
    """Store or durably queue a validated batch (sorted by sequence) for one node; the answer to the agent.

    A queued batch is answered with its last sequence as acknowledged: durable, and written exactly once by a
    writer (a replay in it is recognised there, by the same guard as in the request)."""
    instance_id = batch_instance(node_id, reports)
    if queue_enabled():
        if is_steady(reports) and _enqueue(node_id, reports, now):
            return queued_result(instance_id, reports)
        # Written here: the node's queued reports first, as they are older (unless Redis is down: then the epoch
        # records the sequences this batch jumps over, and the writer stores those reports when it gets to them,
        # services/ingest.py).
        _write_queued_first(node_id)
    return reports_ingest(node_id=node_id, reports=reports, now=now)


def queued_result(instance_id: str, reports: list[dict]) -> IngestResult:
    """The answer to a batch now durable in the stream (sorted by sequence)."""
    unique = len({r["sequence"] for r in reports})
    metrics.reports_queued(unique)
    return IngestResult(acked_sequence=reports[-1]["sequence"], agent_instance_id=instance_id,
                        accepted=unique, duplicates=len(reports) - unique, queued=True)


def _enqueue(node_id: int, reports: list[dict], now: datetime) -> bool:
    if not stream_health.available():
        stream_health.failed("unavailable", None)
        return False
    try:
        entry_id = lua(_ENQUEUE_LUA)(keys=[stream_name(), node_key(node_id)],
                                     args=[node_id, now.isoformat(), orjson.dumps(reports),
                                           settings.INGEST_QUEUE_MAX_ENTRIES])
    except STREAM_ERRORS as exc:
        # The append may have happened without its answer reaching us; writing in the request as well is safe,
        # the writer then finds the reports stored.
        stream_health.failed("unavailable", exc)
        return False
    if entry_id is None:
        metrics.ingest_queue_unavailable("full")
        logger.warning("ingest stream holds %d entries (INGEST_QUEUE_MAX_ENTRIES): writing in the request; is a "
                       "writer running?", settings.INGEST_QUEUE_MAX_ENTRIES)
        return False
    return True


def lua(source: str):
    """A Lua script on the stream's Redis, registered once per client (the enqueue, the fast lane's, the credential
    cache's)."""
    return _registered(redis_client(), source)


@cache
def _registered(client, source: str):
    # Keyed on the client too: tests (and a settings change) replace `redis_client`'s cached client.
    return client.register_script(source)


def _write_queued_first(node_id: int) -> None:
    """Before a synchronous batch: write this node's queued entries that no writer has finished yet."""
    if not stream_health.available():
        return
    try:
        ids = sorted(redis_client().smembers(node_key(node_id)), key=_id_order)
        if not ids:
            return
        pipe = redis_client().pipeline(transaction=False)
        for entry_id in ids:
            pipe.xrange(stream_name(), entry_id, entry_id)
        found = [rows[0] for rows in pipe.execute() if rows]
    except STREAM_ERRORS as exc:
        stream_health.failed("unavailable", exc)
        return
    for entry_id, fields in found:
        entry = entry_decode(entry_id, fields)
        if entry is None:
            continue
        for group in _by_instance(entry.reports):
            reports_ingest(node_id=node_id, reports=group, now=entry.received_at)


def entry_decode(entry_id, fields: dict) -> Entry | None:
    """The queued request, or None for an entry that is not one (logged; the writer moves it aside)."""
    try:
        received_at = parse_datetime(fields[b"t"].decode())
        reports = orjson.loads(fields[b"r"])
        if received_at is None or not isinstance(reports, list) or not reports:
            raise ValueError("no reception time or no reports")
        return Entry(id=_text(entry_id), node_id=int(fields[b"n"]), received_at=received_at, reports=reports)
    except (KeyError, ValueError, TypeError, orjson.JSONDecodeError) as exc:
        logger.error("ingest stream entry %s is malformed (%s)", _text(entry_id), exc)
        return None


def _by_instance(reports: list[dict]) -> list[list[dict]]:
    groups: dict[str, list[dict]] = {}
    for report in reports:
        groups.setdefault(report["agent"]["instance_id"], []).append(report)
    return [sorted(group, key=lambda r: r["sequence"]) for group in groups.values()]


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _id_order(entry_id) -> tuple[int, int]:
    ms, _, seq = _text(entry_id).partition("-")
    return int(ms), int(seq or 0)


def written_through(now: datetime) -> datetime:
    """Every report received before this time is stored: the arrival time of the oldest entry still in the
    stream (a writer deletes what it has stored), or `now` when the stream is empty, off or unreachable (then
    reports are written in the request). The silence sweep judges as of this time, so a writer that lags behind
    makes silence late, never false."""
    if not queue_enabled():
        return now
    try:
        oldest = redis_client().xrange(stream_name(), count=1)
    except STREAM_ERRORS:
        return now
    if not oldest:
        return now
    entry_id, fields = oldest[0]
    entry = entry_decode(entry_id, fields)
    if entry is not None:
        return min(now, entry.received_at)
    ms, _ = _id_order(entry_id)
    return min(now, datetime.fromtimestamp(ms / 1000, tz=UTC))


def stream_depth() -> tuple[int, int]:
    """(entries in the stream, entries read by a writer and not yet acknowledged)."""
    client = redis_client()
    length = client.xlen(stream_name())
    try:
        pending = client.xpending(stream_name(), GROUP)["pending"]
    except RedisError:  # no group yet: no writer has started
        pending = 0
    return int(length), int(pending)
