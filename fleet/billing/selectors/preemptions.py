"""Preemption history and rates per pool, region (site) and instance type, for the API and /metrics."""

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal

from django.db.models import QuerySet
from django.utils import timezone

from fleet.inventory.choices import BillingMode, NodeState
from fleet.inventory.models import Node

from ..choices import RateScope
from ..costing import ZERO
from ..models import PreemptionRecord

WINDOW_DAYS = (7, 30)
RATE_PLACES = Decimal("0.000001")
SECONDS_PER_DAY = Decimal(86400)


@dataclass
class RateWindow:
    days: int
    preemptions: int = 0
    node_days: Decimal = ZERO
    lost_gpu_hours: Decimal = ZERO
    preemptions_with_lost_work: int = 0

    @property
    def rate_per_node_day(self) -> Decimal | None:
        """Preemptions per node-day; None when no node ran in the window."""
        if self.node_days <= 0:
            return None
        return (Decimal(self.preemptions) / self.node_days).quantize(RATE_PLACES)

    @property
    def mean_lost_gpu_hours(self) -> Decimal | None:
        if not self.preemptions_with_lost_work:
            return None
        return self.lost_gpu_hours / self.preemptions_with_lost_work


@dataclass
class PreemptionRate:
    scope: str
    key: str
    name: str
    windows: dict[int, RateWindow] = field(default_factory=lambda: {d: RateWindow(d) for d in WINDOW_DAYS})

    @property
    def last_7d(self) -> RateWindow:
        return self.windows[7]

    @property
    def last_30d(self) -> RateWindow:
        return self.windows[30]


def _node_group(scope: str, row: dict) -> tuple[str, str] | None:
    if scope == RateScope.POOL:
        return (str(row["pool_id"]), row["pool__name"]) if row["pool_id"] else None
    if scope == RateScope.SITE:
        if row["site_id"]:
            return str(row["site_id"]), row["site__name"]
        return (str(row["pool__site_id"]), row["pool__site__name"]) if row["pool__site_id"] else None
    instance_type = row["instance_type"] or row["pool__instance_type"]
    return (instance_type, instance_type) if instance_type else None


def _record_group(scope: str, row: dict) -> tuple[str, str] | None:
    if scope == RateScope.POOL:
        return (str(row["pool_id"]), row["pool__name"]) if row["pool_id"] else None
    if scope == RateScope.SITE:
        return (str(row["site_id"]), row["site__name"]) if row["site_id"] else None
    return (row["instance_type"], row["instance_type"]) if row["instance_type"] else None


def _node_days(row: dict, start: datetime, end: datetime) -> Decimal:
    """Days the node existed inside [start, end). A retired node is taken to have left at its last update."""
    until = min(end, row["updated_at"]) if row["state"] == NodeState.RETIRED else end
    since = max(start, row["created_at"])
    if until <= since:
        return ZERO
    return Decimal(str((until - since).total_seconds())) / SECONDS_PER_DAY


def preemption_rates(*, now: datetime, scope: str, billing_mode: str | None = None,
                     key: str | None = None) -> list[PreemptionRate]:
    """Preemptions, node-days, rate per node-day and lost GPU-hours over the last 7 and 30 days, per group.

    Node-days come from the nodes grouped where they are now; preemptions are grouped where the node was
    when it happened (the record keeps its pool, site and instance type). Two queries in all.
    """
    longest = now - timedelta(days=max(WINDOW_DAYS))
    nodes = Node.objects.filter(created_at__lt=now)
    records = PreemptionRecord.objects.filter(at__gte=longest, at__lte=now)
    if billing_mode:
        nodes, records = nodes.filter(billing_mode=billing_mode), records.filter(billing_mode=billing_mode)
    groups: dict[str, PreemptionRate] = {}

    def group(found: tuple[str, str] | None) -> PreemptionRate | None:
        if found is None or (key is not None and found[0] != key):
            return None
        if found[0] not in groups:
            groups[found[0]] = PreemptionRate(scope, found[0], found[1] or "")
        return groups[found[0]]

    for row in nodes.values("created_at", "updated_at", "state", "pool_id", "pool__name", "site_id", "site__name",
                            "pool__site_id", "pool__site__name", "instance_type", "pool__instance_type"):
        rate = group(_node_group(scope, row))
        if rate is not None:
            for days, window in rate.windows.items():
                window.node_days += _node_days(row, now - timedelta(days=days), now)
    for row in records.values("at", "lost_gpu_hours", "pool_id", "pool__name", "site_id", "site__name",
                              "instance_type"):
        rate = group(_record_group(scope, row))
        if rate is None:
            continue
        for days, window in rate.windows.items():
            if row["at"] >= now - timedelta(days=days):
                window.preemptions += 1
                if row["lost_gpu_hours"] is not None:
                    window.lost_gpu_hours += row["lost_gpu_hours"]
                    window.preemptions_with_lost_work += 1
    return sorted(groups.values(), key=lambda r: (r.name, r.key))


SECONDS_PER_HOUR = Decimal(3600)
HOURS_PLACES = Decimal("0.01")
# A node in one of these states is taken to have left at its last update (it does not run on, unseen).
_GONE_STATES = (NodeState.RETIRED, NodeState.PREEMPTED)


@dataclass
class PoolPreemptionDays:
    """One spot pool's day-by-day preemptions and node-hours (UTC days, oldest first)."""

    pool_id: int
    name: str
    preemptions: list[int]
    node_hours: list[Decimal]

    @property
    def rate_per_node_day(self) -> list[Decimal | None]:
        """Preemptions per node-day of each day; None for a day no spot node of the pool ran."""
        return [(Decimal(count) * 24 / hours).quantize(RATE_PLACES) if hours > 0 else None
                for count, hours in zip(self.preemptions, self.node_hours, strict=True)]


def pool_preemptions_daily(*, now: datetime, days: int = 30) -> tuple[list[date], list[PoolPreemptionDays]]:
    """Per spot pool and UTC day over the last `days` days (today so far included): preemptions, node-hours of
    the pool's spot nodes, and the rate per node-day.

    Node-hours are each spot node's hours inside the day from its creation until now, or until its last update
    when it is retired or preempted; grouped by the node's pool now. Preemptions of spot nodes are grouped by
    the pool the record kept. A pool appears when it has node-hours or preemptions in the window. Two queries.
    """
    first = now.astimezone(UTC).date() - timedelta(days=days - 1)
    start = datetime.combine(first, time.min, tzinfo=UTC)
    labels = [first + timedelta(days=i) for i in range(days)]
    pools: dict[int, PoolPreemptionDays] = {}

    def pool(pool_id: int, name: str) -> PoolPreemptionDays:
        if pool_id not in pools:
            pools[pool_id] = PoolPreemptionDays(pool_id, name or "", [0] * days, [ZERO] * days)
        return pools[pool_id]

    nodes = Node.objects.filter(billing_mode=BillingMode.SPOT, pool__isnull=False, created_at__lt=now)
    for row in nodes.values("created_at", "updated_at", "state", "pool_id", "pool__name").order_by():
        until = min(now, row["updated_at"]) if row["state"] in _GONE_STATES else now
        since = max(start, row["created_at"])
        if until <= since:
            continue
        entry = pool(row["pool_id"], row["pool__name"])
        index = (since.astimezone(UTC).date() - first).days
        while index < days:
            day_start = start + timedelta(days=index)
            overlap = min(until, day_start + timedelta(days=1)) - max(since, day_start)
            if overlap.total_seconds() <= 0:
                break
            entry.node_hours[index] += Decimal(str(overlap.total_seconds())) / SECONDS_PER_HOUR
            index += 1
    records = PreemptionRecord.objects.filter(billing_mode=BillingMode.SPOT, pool__isnull=False, at__gte=start,
                                              at__lte=now)
    for row in records.values("at", "pool_id", "pool__name").order_by():
        index = (row["at"].astimezone(UTC).date() - first).days
        if 0 <= index < days:
            pool(row["pool_id"], row["pool__name"]).preemptions[index] += 1
    for entry in pools.values():
        entry.node_hours = [hours.quantize(HOURS_PLACES) for hours in entry.node_hours]
    return labels, sorted(pools.values(), key=lambda p: (p.name, p.pool_id))


def node_preemptions(*, node: Node, limit: int = 50) -> QuerySet[PreemptionRecord]:
    return PreemptionRecord.objects.filter(node=node).select_related("node", "pool", "site")[:limit]


@dataclass(frozen=True)
class GaugeFamily:
    """One Prometheus gauge family: add each sample with `GaugeMetricFamily.add_metric(labels, value)`."""

    name: str
    documentation: str
    labels: tuple[str, ...]
    samples: list[tuple[tuple[str, ...], float]]


def preemption_rates_for_metrics(*, now: datetime | None = None) -> list[GaugeFamily]:
    """Preemption gauges per pool, site and instance type over 7 and 30 days, ready for /metrics.

    Labels: scope (pool | site | instance_type), key (id or instance type), name, window (7d | 30d).
    A group with no node-days has no rate sample (the rate is unknown, not zero).
    """
    now = now or timezone.now()
    labels = ("scope", "key", "name", "window")
    count, rate, node_days, lost = [], [], [], []
    for scope in RateScope:
        for row in preemption_rates(now=now, scope=scope):
            for days, window in row.windows.items():
                values = (str(scope), row.key, row.name, f"{days}d")
                count.append((values, float(window.preemptions)))
                node_days.append((values, float(window.node_days)))
                lost.append((values, float(window.lost_gpu_hours)))
                if window.rate_per_node_day is not None:
                    rate.append((values, float(window.rate_per_node_day)))
    return [
        GaugeFamily("fleet_preemptions", "Preemptions recorded in the window", labels, count),
        GaugeFamily("fleet_preemption_rate_per_node_day", "Preemptions per node-day in the window", labels, rate),
        GaugeFamily("fleet_preemption_node_days", "Node-days observed in the window", labels, node_days),
        GaugeFamily("fleet_preemption_lost_gpu_hours", "Estimated GPU-hours of work lost to preemptions",
                    labels, lost),
    ]
