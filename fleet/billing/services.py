"""Write-side billing: preemption records (from notices, silent nodes and operators), reserved-term upkeep, and the
daily cost close (what each day cost, at the prices of the time)."""

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from fleet.core.api.errors import DomainError
from fleet.core.audit import audit_context
from fleet.core.models import AuditEntry
from fleet.core.services import audit_record
from fleet.inventory.choices import BillingMode, NodeState
from fleet.inventory.models import Node
from fleet.inventory.selectors import node_expected_gpu_counts
from fleet.telemetry.choices import EventKind
from fleet.telemetry.models import Event, NodeStatus
from fleet_agent.protocol import RECLAIM_NOTICE_KINDS

from .choices import PreemptionSource
from .costing import add_months, term_months
from .models import BillingPlan, CostDay, DailyCostSnapshot, PreemptionRecord
from .selectors.daily_cost import nodes_in, pool_costs
from .selectors.facts import NODE_RELATED, effective_instance_type, effective_site_id
from .selectors.policies import checkpoint_policy_for_nodes
from .selectors.terms import ExpiringTerm, expiring_reserved_terms, today_at
from .signals import nodes_preempted

log = logging.getLogger(__name__)

# A silent node counts as reclaimed when its cloud's notice arrived at most this long before its last report.
# Clouds give 30 s (GCP, Azure) to 2 min (AWS) to 5 min (Alibaba); an hour allows for a node that kept
# reporting for a while after an early notice.
NOTICE_LOOKBACK = timedelta(hours=1)
# An operator's clock may run a little ahead of ours.
CLOCK_SKEW = timedelta(minutes=1)
GPU_HOURS = Decimal("0.0001")
UNTERMINATED = (NodeState.PREEMPTED, NodeState.RETIRED)


@dataclass(frozen=True)
class Notice:
    """A cloud's interruption notice as billing needs it; `key` names the preemption it announces."""

    key: str
    kind: str
    seen_at: datetime | None
    deadline: datetime | None
    event: Event | None = None



def _lead_time_s(seen_at: datetime | None, deadline: datetime | None) -> float | None:
    """Warning the node had: from seeing the notice to the deadline (0 when it came too late)."""
    if seen_at is None or deadline is None:
        return None
    return max(0.0, (deadline - seen_at).total_seconds())


def _as_datetime(value) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = parse_datetime(value)
    except ValueError:
        return None
    if parsed is not None and timezone.is_naive(parsed):
        parsed = timezone.make_aware(parsed, UTC)
    return parsed


def notice_from_event(event: Event) -> Notice:
    """Read a stored preemption_notice event: `detail.deadline` (RFC 3339), also accepted as
    `detail.notice_deadline` or `detail.notice.deadline`; the event's `at` is when the notice was seen."""
    detail = event.detail if isinstance(event.detail, dict) else {}
    nested = detail.get("notice") if isinstance(detail.get("notice"), dict) else {}
    deadline = _as_datetime(detail.get("deadline") or detail.get("notice_deadline") or nested.get("deadline"))
    kind = detail.get("kind") or detail.get("notice_kind") or nested.get("kind") or ""
    return Notice(f"event:{event.pk}", str(kind)[:24], event.at, deadline, event)


def _notice_from_status(status: NodeStatus) -> Notice | None:
    """The notice in the node's latest report, for when no notice event was stored."""
    if status.notice_kind not in RECLAIM_NOTICE_KINDS:
        return None
    stamp = status.notice_deadline or status.received_at
    return Notice(f"notice:{stamp.isoformat()}", status.notice_kind, None, status.notice_deadline)


def _status_deadline(status: NodeStatus | None) -> datetime | None:
    if status is not None and status.notice_kind in RECLAIM_NOTICE_KINDS:
        return status.notice_deadline
    return None


def _apply_outcome(record: PreemptionRecord, *, node: Node, status: NodeStatus | None, at: datetime,
                   max_age_s: int | None, gpu_counts: dict[int, int] | None = None) -> None:
    """Work lost when the node went at `at`: the newest checkpoint's age then × the GPUs it ran on (as last seen,
    else as expected; `gpu_counts` are expected counts read beforehand for many nodes)."""
    record.at = at
    if status is not None and status.gpu_count_seen:
        record.gpu_count = status.gpu_count_seen
    else:
        counts = gpu_counts if gpu_counts is not None else node_expected_gpu_counts(nodes=[node])
        record.gpu_count = counts[node.pk]
    age = None
    if status is not None and status.checkpoint_age_s is not None:
        # The age was measured when the report was collected; it kept growing until the node went away.
        age = status.checkpoint_age_s + max(0.0, (at - status.collected_at).total_seconds())
    record.checkpoint_age_s = age
    record.checkpoint_max_age_s = max_age_s
    record.checkpoint_fresh = None if age is None or max_age_s is None else age <= max_age_s
    record.lost_gpu_hours = None if age is None else (
        Decimal(str(age)) / Decimal(3600) * record.gpu_count).quantize(GPU_HOURS, rounding=ROUND_HALF_UP)


def _new_record(*, node: Node, key: str, source: str, notice: Notice | None, deadline: datetime | None
                ) -> PreemptionRecord:
    return PreemptionRecord(
        node=node, pool_id=node.pool_id, site_id=effective_site_id(node),
        instance_type=effective_instance_type(node), billing_mode=node.billing_mode, episode_key=key,
        source=source, notice_event=notice.event if notice else None, notice_kind=notice.kind if notice else "",
        notice_at=notice.seen_at if notice else None, notice_deadline=deadline,
        notice_lead_time_s=_lead_time_s(notice.seen_at, deadline) if notice else None)


def preemption_record_from_notice(*, node: Node, notice_event: Event) -> PreemptionRecord:
    """Record the preemption a cloud notice announces (not yet confirmed). Idempotent per notice event.

    The record's time is the notice's deadline (when the cloud will take the node), else when it was seen.
    Lost work is estimated from the latest status and estimated again when the reclaim is confirmed.
    """
    if notice_event.node_id != node.pk or notice_event.kind != EventKind.PREEMPTION_NOTICE:
        raise ValueError(f"event {notice_event.pk} is not a preemption notice of node {node.pk}")
    notice = notice_from_event(notice_event)
    existing = PreemptionRecord.objects.filter(node=node, episode_key=notice.key).first()
    if existing is not None:
        return existing
    status = NodeStatus.objects.filter(node=node).first()
    deadline = notice.deadline or _status_deadline(status)
    record = _new_record(node=node, key=notice.key, source=PreemptionSource.AGENT_NOTICE, notice=notice,
                         deadline=deadline)
    _apply_outcome(record, node=node, status=status, at=deadline or notice.seen_at,
                   max_age_s=checkpoint_policy_for_nodes([node.pk]).get(node.pk))
    try:
        with transaction.atomic():
            record.save()
    except IntegrityError:  # recorded meanwhile by another worker
        return PreemptionRecord.objects.get(node=node, episode_key=notice.key)
    return record


def _latest_notices(nodes: list[Node], *, now: datetime) -> dict[int, Notice]:
    """Each node's most recent preemption notice seen shortly before it fell silent (one query)."""
    anchors = {n.pk: n.status.received_at - NOTICE_LOOKBACK for n in nodes}
    events = (Event.objects.filter(node_id__in=anchors, kind=EventKind.PREEMPTION_NOTICE,
                                   at__gte=min(anchors.values()), at__lte=now).order_by("at", "id"))
    latest = {e.node_id: e for e in events if e.at >= anchors[e.node_id]}
    notices: dict[int, Notice] = {}
    for node in nodes:
        event = latest.get(node.pk)
        notice = notice_from_event(event) if event is not None else _notice_from_status(node.status)
        if notice is not None:
            notices[node.pk] = notice
    return notices


def preemption_on_node_silent(*, node_ids: Iterable[int], now: datetime) -> list[PreemptionRecord]:
    """Confirm the reclaim of silent spot nodes whose cloud's notice was seen; move them to `preempted`.

    For the silent-node task: give it the ids of silent nodes (any or all of them, every cycle). Nodes that
    are not silent, not spot (by billing mode or the cloud's own `spot` flag), already preempted or retired,
    or without a notice are skipped. One record per preemption: the notice's record is confirmed, or one is
    created. Returns the records confirmed by this call (none on a repeat). A fixed number of queries plus
    one audit entry per node moved.
    """
    ids = set(node_ids)
    if not ids:
        return []
    nodes = list(Node.objects.filter(pk__in=ids, status__silent=True)
                 .filter(Q(billing_mode=BillingMode.SPOT) | Q(status__cloud__spot=True))
                 .exclude(state__in=UNTERMINATED).select_related("status", *NODE_RELATED))
    notices = _latest_notices(nodes, now=now) if nodes else {}
    if not notices:
        return []
    policies = checkpoint_policy_for_nodes(notices)
    gpu_counts = node_expected_gpu_counts(nodes=[n for n in nodes if n.pk in notices and not n.status.gpu_count_seen])
    confirmed: list[PreemptionRecord] = []
    with transaction.atomic():
        states = dict(Node.objects.select_for_update().filter(pk__in=notices).values_list("pk", "state"))
        existing = {(r.node_id, r.episode_key): r for r in PreemptionRecord.objects.filter(
            node_id__in=notices, episode_key__in={n.key for n in notices.values()})}
        to_create, to_update = [], []
        for node in nodes:
            notice = notices.get(node.pk)
            if notice is None or states.get(node.pk) in UNTERMINATED:
                continue
            record = existing.get((node.pk, notice.key))
            if record is not None and record.confirmed_at is not None:
                continue  # this preemption was confirmed before; the node's state was changed since
            status = node.status
            deadline = notice.deadline or _status_deadline(status)
            if record is None:
                record = _new_record(node=node, key=notice.key, source=PreemptionSource.CLOUD_RECLAIM,
                                     notice=notice, deadline=deadline)
                to_create.append(record)
            else:
                to_update.append(record)
            record.source = PreemptionSource.CLOUD_RECLAIM
            record.confirmed_at = record.updated_at = now
            # The cloud takes the node at the deadline; without one (or if it went early), when we last heard it.
            at = deadline if deadline is not None and deadline <= now else status.received_at
            _apply_outcome(record, node=node, status=status, at=at, max_age_s=policies.get(node.pk),
                           gpu_counts=gpu_counts)
            confirmed.append(record)
        PreemptionRecord.objects.bulk_create(to_create, ignore_conflicts=True)
        PreemptionRecord.objects.bulk_update(to_update, fields=[
            "source", "confirmed_at", "updated_at", "at", "gpu_count", "checkpoint_age_s", "checkpoint_max_age_s",
            "checkpoint_fresh", "lost_gpu_hours"])
        moved = [r.node_id for r in confirmed]
        Node.objects.filter(pk__in=moved).update(state=NodeState.PREEMPTED, updated_at=now)
        for record in confirmed:
            audit_record(actor=None, action=AuditEntry.Action.ACTION, instance=record.node,
                         before={"state": states[record.node_id]}, after={"state": NodeState.PREEMPTED},
                         note="Preempted: the cloud's notice, then the node went silent")
    log.info("preemption confirmed for %d silent spot node(s)", len(confirmed))
    if not confirmed:
        return []
    pairs = Q()
    for record in confirmed:
        pairs |= Q(node_id=record.node_id, episode_key=record.episode_key)
    records = list(PreemptionRecord.objects.filter(pairs).select_related("node"))
    nodes_preempted.send(sender=PreemptionRecord, node_ids=[r.node_id for r in records],
                         record_ids=[r.pk for r in records], now=now)
    return records


def preemption_confirm_silent(*, node: Node, now: datetime) -> PreemptionRecord | None:
    """One node's version of `preemption_on_node_silent`: its confirmed record, or None if nothing to do."""
    records = preemption_on_node_silent(node_ids=[node.pk], now=now)
    return records[0] if records else None


def preemption_record_by_operator(*, node: Node, actor, at: datetime | None = None, note: str = "",
                                  now: datetime | None = None) -> PreemptionRecord:
    """An operator says the node was preempted: record it (or confirm its pending notice) and move it to
    `preempted`. Refused for a node already preempted or retired."""
    now = now or timezone.now()
    when = at or now
    if when > now + CLOCK_SKEW:
        raise ValidationError({"at": ["A preemption cannot be in the future."]})
    with transaction.atomic():
        state = Node.objects.select_for_update().filter(pk=node.pk).values_list("state", flat=True).first()
        if state == NodeState.RETIRED:
            raise DomainError("The node is retired; it cannot be preempted.", code="node_retired")
        if state == NodeState.PREEMPTED:
            raise DomainError("The node is already recorded as preempted.", code="already_preempted")
        status = NodeStatus.objects.filter(node=node).first()
        record = (PreemptionRecord.objects.filter(node=node, confirmed_at__isnull=True,
                                                  notice_at__gte=when - NOTICE_LOOKBACK)
                  .order_by("-notice_at", "-id").first())
        if record is None:
            record = _new_record(node=node, key=f"operator:{when.isoformat()}", source=PreemptionSource.OPERATOR,
                                 notice=None, deadline=None)
        elif at is None:
            when = min(record.at, now)  # the notice's deadline, unless the operator said when
        record.source = PreemptionSource.OPERATOR
        record.confirmed_at = now
        record.recorded_by = actor if getattr(actor, "is_authenticated", False) else None
        record.note = note[:200]
        _apply_outcome(record, node=node, status=status, at=when,
                       max_age_s=checkpoint_policy_for_nodes([node.pk]).get(node.pk))
        try:
            with transaction.atomic():
                record.save()
        except IntegrityError as exc:
            raise DomainError("A preemption at this time is already recorded for the node.",
                              code="already_recorded") from exc
        Node.objects.filter(pk=node.pk).update(state=NodeState.PREEMPTED, updated_at=now)
        audit_record(actor=actor, action=AuditEntry.Action.ACTION, instance=node, before={"state": state},
                     after={"state": NodeState.PREEMPTED}, note=f"Marked preempted (preemption {record.pk})")
        nodes_preempted.send(sender=PreemptionRecord, node_ids=[node.pk], record_ids=[record.pk], now=now)
    return record


def reserved_terms_expiring(*, now: datetime, within_days: int = 30) -> list[ExpiringTerm]:
    """Find reserved terms ending within `within_days` that do not renew, and stamp when each was first seen.

    Plans that left the window (extended, renewed, changed mode) lose their stamp, so a later expiry is
    noticed afresh. The health engine reads `expiring_reserved_terms` for its findings.
    """
    terms = expiring_reserved_terms(now=now, within_days=within_days)
    fresh = [t for t in terms if t.expiry_noticed_at is None]
    with transaction.atomic():
        BillingPlan.objects.filter(expiry_noticed_at__isnull=False).exclude(
            pk__in=[t.plan_id for t in terms]).update(expiry_noticed_at=None)
        BillingPlan.objects.filter(pk__in=[t.plan_id for t in fresh]).update(expiry_noticed_at=now)
    for term in fresh:
        term.expiry_noticed_at = now
        log.warning("reserved term of plan %s (%s) ends on %s, in %d days, and does not renew", term.plan_id,
                    term.pool_name or term.hostname, term.term_end, term.days_left)
    return terms


def _next_term_end(start, end):
    months = term_months(start, end)
    if months == months.to_integral_value():
        return add_months(end, int(months))
    return end + (end - start)


def reserved_terms_renew(*, now: datetime) -> list[BillingPlan]:
    """Roll auto-renewing reserved terms that have ended forward by their own length, audited as the system."""
    today = today_at(now)
    renewed = []
    plans = BillingPlan.objects.filter(billing_mode=BillingMode.RESERVED, auto_renew=True, term_end__lte=today,
                                       term_start__isnull=False, term_start__lt=F("term_end"))
    with transaction.atomic():
        for plan in plans.select_for_update():
            while plan.term_end <= today:
                plan.term_start, plan.term_end = plan.term_end, _next_term_end(plan.term_start, plan.term_end)
            plan.expiry_noticed_at = None
            with audit_context(actor=None, note="Reserved term renewed automatically"):
                plan.save(update_fields=["term_start", "term_end", "expiry_noticed_at", "updated_at"])
            renewed.append(plan)
    return renewed


def check_reserved_terms(*, now: datetime) -> dict:
    """The hourly term check: renew what renews by itself, then note the terms about to run out."""
    renewed = reserved_terms_renew(now=now)
    expiring = reserved_terms_expiring(now=now)
    return {"renewed": [p.pk for p in renewed], "expiring": [t.plan_id for t in expiring]}


# --- The daily cost close -------------------------------------------------------------------------------------

COST_PLACES = Decimal("0.0001")


def _day_bounds(day: date) -> tuple[datetime, datetime]:
    start = datetime.combine(day, time.min, tzinfo=UTC)
    return start, start + timedelta(days=1)


def cost_day_close(*, day: date, now: datetime, estimated: bool = False) -> CostDay | None:
    """Record what `day` (UTC) cost per pool and currency, at the prices in force now; once: a day already closed
    is left as it is and None returned (rerunning is safe, and two runs at once write it once). `estimated`
    marks a day closed long after it ended (the backfill), whose prices may not be the day's."""
    start, end = _day_bounds(day)
    if end > now:
        raise ValueError(f"{day} is not over yet")
    if CostDay.objects.filter(day=day).exists():
        return None
    nodes = nodes_in(start, end)
    costs = pool_costs(nodes=nodes, intervals=[(start, end)], utilisation_from=start, utilisation_to=end)
    try:
        with transaction.atomic():
            closed = CostDay.objects.create(day=day, estimated=estimated)
            DailyCostSnapshot.objects.bulk_create([DailyCostSnapshot(
                cost_day=closed, pool_id=c.pool_id, pool_name=c.pool_name[:100], currency=c.currency, nodes=c.nodes,
                gpu_count=c.gpu_count, total=c.total.quantize(COST_PLACES),
                gpu_hours=c.gpu_hours.quantize(COST_PLACES), measured_total=c.measured_total.quantize(COST_PLACES),
                measured_gpu_hours=c.measured_gpu_hours.quantize(COST_PLACES),
                utilised_gpu_hours=c.utilised_gpu_hours.quantize(COST_PLACES)) for c in costs])
    except IntegrityError:  # another run closed it meanwhile
        return None
    return closed


def cost_yesterday_close(*, now: datetime) -> dict:
    """The beat task's service: close yesterday (UTC) at today's prices, which are still the day's."""
    day = now.astimezone(UTC).date() - timedelta(days=1)
    closed = cost_day_close(day=day, now=now)
    return {"day": day.isoformat(), "closed": closed is not None,
            "snapshots": closed.snapshots.count() if closed is not None else 0}


def cost_days_backfill(*, now: datetime, days: int) -> list[date]:
    """Close, as estimated at today's prices, every day of the last `days` (yesterday back, from the first node's
    creation) not closed yet; returns the days closed."""
    today = now.astimezone(UTC).date()
    first_node = Node.objects.order_by("created_at").values_list("created_at", flat=True).first()
    if first_node is None:
        return []
    wanted = [day for day in (today - timedelta(days=n) for n in range(days, 0, -1))
              if day >= first_node.astimezone(UTC).date()]
    have = set(CostDay.objects.filter(day__in=wanted).values_list("day", flat=True))
    return [day for day in wanted if day not in have
            and cost_day_close(day=day, now=now, estimated=True) is not None]
