"""Silent nodes: no report for more than 2 report intervals. Separate from the lifecycle state.

Silence is a node's fault only while the server was receiving. When the control plane itself stops receiving
(web tier frozen or down, database down, the network in front of it cut), every node goes quiet at once, and
flagging them would open a "likely preempted" finding for every spot node. So the sweep watches the server's own
receiving (`ReceivingState`) and judges a node's silence only against time in which the server was demonstrably
receiving:

* a **gap in receiving** is a stretch without any report while at least three reporting nodes were each due
  (longer than 1.5 × their interval); the sweep finds it from the arrival times it sees, also after the fact
  (a gap that began and ended between two sweeps, or while the sweep itself was not running);
* while a gap lasts, nobody is newly marked silent;
* after a gap, silence counts from its end plus the time agents need to come back (their retry back-off,
  which grows with the length of the outage, capped at 300 s), so nodes still in back-off are not flagged;
* a node is marked silent only if the server received another node's report after this node missed one
  (1.5 of its intervals after its last report), when the fleet has at least two other reporting nodes; smaller
  fleets cannot tell the server's silence from the node's and are judged as before.

A node whose last report carried a reclaim notice is judged alone: its silence is explained (billing then
confirms the preemption), even when a whole spot pool is reclaimed at once.

With the ingest queue, a report the server received may still wait in the stream for a writer. The sweep then
judges as of the arrival of the oldest report still queued (`stream.written_through`): everything before that is
stored, so a writer that lags makes silence late by its lag, never false.
"""

import logging
from datetime import datetime, timedelta

from django.db import transaction

from fleet_agent.protocol import RECLAIM_NOTICE_KINDS

from ..models import NodeStatus, ReceivingState
from ..signals import nodes_went_silent
from .stream import written_through

logger = logging.getLogger(__name__)
SILENT_AFTER_INTERVALS = 2
MIN_INTERVAL_S = 1
# A node has missed a report once this many of its intervals passed since its last one (slack for jitter).
MISSED_AFTER_INTERVALS = 1.5
# Receiving counts as stopped only when at least this many reporting nodes were due and none got through.
GAP_MIN_NODES = 3
# The agent's retry back-off is capped at 300 s (fleet_agent.sender.BACKOFF_CAP_S); after an outage of that
# length or more, an agent may take that long to try again.
AGENT_BACKOFF_CAP_S = 300


def mark_silent_nodes(*, now: datetime) -> dict:
    """Flag nodes whose last report is older than 2× their interval, counted only while the server was receiving;
    ingestion clears the flag. Judged as of the time up to which every received report is stored."""
    judged_at = written_through(now)
    if now - judged_at > timedelta(seconds=60):
        logger.warning("the ingest writers are %.0f s behind: silence is judged as of %s", (now - judged_at)
                       .total_seconds(), judged_at.isoformat())
    with transaction.atomic():
        state, _ = ReceivingState.objects.select_for_update().get_or_create(pk=1)
        rows = list(NodeStatus.objects.values_list("node_id", "received_at", "interval_s", "silent", "notice_kind"))
        _track_receiving(state, rows, judged_at)
        newly_silent = _newly_silent(state, rows, judged_at)
        state.swept_at = now
        state.save()
        if newly_silent:
            NodeStatus.objects.filter(node_id__in=newly_silent, silent=False).update(silent=True, silent_since=now)
    if newly_silent:
        # A silent spot node may have been reclaimed: billing records the preemption when the cloud confirms.
        nodes_went_silent.send(sender=NodeStatus, node_ids=newly_silent, now=now)
    return {"silent": len(newly_silent), "node_ids": newly_silent}


def _interval(value) -> timedelta:
    return timedelta(seconds=max(value or 0, MIN_INTERVAL_S))


def _track_receiving(state: ReceivingState, rows: list, now: datetime) -> None:
    """Find the latest gap in receiving among the arrivals since the previous sweep and record it in `state`.

    A node's `received_at` holds only its latest arrival, but every node that reported since the previous sweep
    shows one arrival in that span, so a stretch with none of them is a stretch in which nothing arrived. The
    end of a gap found this way is the earliest arrival still visible after it: never earlier than the real
    first report after the gap, so the grace that follows is never too short.
    """
    reporting = [(at, _interval(interval)) for _, at, interval, silent, _ in rows if not silent]
    since = state.newest_report_at
    arrivals = sorted(at for at, _ in reporting if since is None or at > since)
    open_gap = state.gap_started_at is not None and state.gap_ended_at is None
    if len(reporting) >= GAP_MIN_NODES:
        longest_quiet = sorted(interval for _, interval in reporting)[GAP_MIN_NODES - 1] * MISSED_AFTER_INTERVALS
        points = ([since] if since else []) + arrivals + [now]
        holes = [(a, b) for a, b in zip(points, points[1:], strict=False) if b - a > longest_quiet]
        if holes:
            start, end = holes[-1]
            if end == now:  # nothing has arrived since `start`: the gap lasts
                if not open_gap:
                    state.gap_started_at, state.gap_ended_at = start, None
                    logger.warning("no report from any of %d nodes since %s: the server is not receiving (web "
                                   "tier, database or network); nodes are not marked silent meanwhile",
                                   len(reporting), start.isoformat())
            else:
                _close_gap(state, start=state.gap_started_at if open_gap else start, end=end)
            open_gap = state.gap_ended_at is None
    if open_gap and arrivals:  # reports arrive again, but the fleet is now too small to size the gap
        _close_gap(state, start=state.gap_started_at, end=arrivals[0])
    if arrivals:
        state.newest_report_at = max(arrivals[-1], since) if since else arrivals[-1]


def _close_gap(state: ReceivingState, *, start: datetime, end: datetime) -> None:
    state.gap_started_at, state.gap_ended_at = start, end
    logger.warning("the server received no report from %s to %s (%.0f s); silence is counted from the end",
                   start.isoformat(), end.isoformat(), (end - start).total_seconds())


def _newly_silent(state: ReceivingState, rows: list, now: datetime) -> list[int]:
    receiving = state.gap_started_at is None or state.gap_ended_at is not None
    grace_end = None
    if state.gap_ended_at is not None:
        length = state.gap_ended_at - state.gap_started_at
        grace_end = state.gap_ended_at + min(length, timedelta(seconds=AGENT_BACKOFF_CAP_S))
    reporting = [(node_id, at) for node_id, at, _, silent, _ in rows if not silent]
    # The two newest arrivals: for any node, the newest arrival from another node is one of them.
    newest = sorted(reporting, key=lambda r: r[1], reverse=True)[:2]
    newly_silent = []
    for node_id, received_at, interval_s, silent, notice_kind in rows:
        if silent:
            continue
        interval = _interval(interval_s)
        if notice_kind in RECLAIM_NOTICE_KINDS:  # its silence is explained: judged alone, as always
            if received_at < now - SILENT_AFTER_INTERVALS * interval:
                newly_silent.append(node_id)
            continue
        if not receiving:
            continue
        quiet_from = max(received_at, grace_end) if grace_end else received_at
        if quiet_from >= now - SILENT_AFTER_INTERVALS * interval:
            continue
        if len(reporting) >= GAP_MIN_NODES:
            others = [at for other, at in newest if other != node_id]
            if not others or others[0] < received_at + MISSED_AFTER_INTERVALS * interval:
                continue  # nothing got through since this node missed its report: no evidence against it
        newly_silent.append(node_id)
    return newly_silent
