"""What each day cost, recorded at the prices of the time: the daily close (idempotent, safe to rerun), the
backfill of days nobody recorded (estimated at today's prices), and the cost history reading them."""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.utils import timezone

from fleet.billing.models import BillingPlan, CostDay, DailyCostSnapshot
from fleet.billing.selectors.cost_history import cost_history
from fleet.billing.services import cost_day_close, cost_days_backfill, cost_yesterday_close
from fleet.billing.tasks import close_cost_day
from fleet.inventory.models import Node
from tests.billing.factories import BillingPlanFactory
from tests.factories import NodeFactory, PoolFactory

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 12, 3, 6, 0, tzinfo=UTC)


def _node(pool, *, created, rate="10", currency="USD", unit="hour", **kwargs):
    node = NodeFactory(pool=pool, provider=pool.provider, billing_mode="on_demand", **kwargs)
    Node.objects.filter(pk=node.pk).update(created_at=created)
    if not BillingPlan.objects.filter(pool=pool).exists():
        BillingPlanFactory(pool=pool, node=None, billing_mode="on_demand", rate=Decimal(rate), currency=currency,
                           rate_unit=unit)
    return node


def test_the_close_records_each_pool_and_currency_once_at_the_prices_of_the_time():
    pool, other = PoolFactory(name="a"), PoolFactory(name="b")
    _node(pool, created=datetime(2026, 11, 1, tzinfo=UTC))
    _node(pool, created=datetime(2026, 12, 2, 12, 0, tzinfo=UTC))  # half of Dec 2
    _node(other, created=datetime(2026, 11, 1, tzinfo=UTC), rate="45000", currency="CNY", unit="month")
    Node.objects.filter(pk=NodeFactory(pool=pool, provider=pool.provider, billing_mode="on_demand").pk).update(
        created_at=datetime(2026, 11, 1, tzinfo=UTC), state="retired",
        updated_at=datetime(2026, 12, 2, 6, 0, tzinfo=UTC))  # retired at 06:00: a quarter of the day

    assert cost_yesterday_close(now=NOW) == {"day": "2026-12-02", "closed": True, "snapshots": 2}
    day = CostDay.objects.get(day=date(2026, 12, 2))
    assert not day.estimated
    usd = DailyCostSnapshot.objects.get(cost_day=day, currency="USD")
    # 10 an hour per node: 24 h + 12 h + 6 h = 42 node-hours = 420.
    assert (usd.pool_id, usd.pool_name, usd.nodes, usd.total) == (pool.pk, "a", 3, Decimal("420.0000"))
    assert usd.gpu_hours == Decimal("336.0000")  # 8 GPUs each
    cny = DailyCostSnapshot.objects.get(cost_day=day, currency="CNY")
    assert cny.pool_id == other.pk and cny.total == Decimal("1479.4521")  # 45000 a month × 24 / 730

    # Rerunning (the task is hourly) writes nothing, even after a price change: the day keeps its prices.
    BillingPlan.objects.filter(pool=pool).update(rate=Decimal("20"))
    assert cost_yesterday_close(now=NOW + timedelta(hours=1))["closed"] is False
    assert cost_day_close(day=date(2026, 12, 2), now=NOW) is None
    assert DailyCostSnapshot.objects.filter(cost_day=day).count() == 2
    assert DailyCostSnapshot.objects.get(cost_day=day, currency="USD").total == Decimal("420.0000")
    with pytest.raises(ValueError):
        cost_day_close(day=date(2026, 12, 3), now=NOW)  # today is not over


def test_the_beat_task_closes_yesterday():
    pool = PoolFactory()
    _node(pool, created=timezone.now() - timedelta(days=3))
    result = close_cost_day()
    yesterday = timezone.now().astimezone(UTC).date() - timedelta(days=1)
    assert result["day"] == yesterday.isoformat() and result["closed"] is True
    assert close_cost_day()["closed"] is False
    assert DailyCostSnapshot.objects.get(cost_day__day=yesterday).total == Decimal("240.0000")


def test_the_backfill_fills_only_missing_days_as_estimated():
    pool = PoolFactory()
    _node(pool, created=datetime(2026, 11, 28, tzinfo=UTC))
    cost_day_close(day=date(2026, 11, 30), now=NOW)
    closed = cost_days_backfill(now=NOW, days=10)
    # From the first node's day, without the day already recorded.
    assert closed == [date(2026, 11, 28), date(2026, 11, 29), date(2026, 12, 1), date(2026, 12, 2)]
    assert set(CostDay.objects.filter(estimated=True).values_list("day", flat=True)) == set(closed)
    assert not CostDay.objects.get(day=date(2026, 11, 30)).estimated
    assert cost_days_backfill(now=NOW, days=10) == []


def test_the_backfill_command(capsys):
    pool = PoolFactory()
    _node(pool, created=timezone.now() - timedelta(days=2))
    call_command("billing_backfill_costs", "--days", "5")
    assert "recorded 2 day(s) as estimated" in capsys.readouterr().out
    call_command("billing_backfill_costs", "--days", "5")
    assert "nothing to record" in capsys.readouterr().out


def test_cost_history_reads_the_snapshots_and_says_which_months_are_estimated():
    pool = PoolFactory()
    _node(pool, created=datetime(2026, 10, 31, tzinfo=UTC))
    # October's only day was backfilled; every November day closed at 10 an hour; nothing recorded for Dec 1-2.
    cost_day_close(day=date(2026, 10, 31), now=NOW, estimated=True)
    for n in range(30):
        cost_day_close(day=date(2026, 11, 1) + timedelta(days=n), now=NOW)
    BillingPlan.objects.filter(pool=pool).update(rate=Decimal("20"))  # the price doubles today
    rows = {row.month: row for row in cost_history(months=3, now=NOW)}
    assert (rows["2026-10"].total, rows["2026-10"].estimated) == (Decimal("240.00"), True)
    # November at the prices of the time (10 an hour), not today's 20.
    assert (rows["2026-11"].total, rows["2026-11"].estimated, rows["2026-11"].nodes) == (Decimal("7200.00"), False, 1)
    # December: Dec 1-2 not recorded (estimated, today's price) + today's 6 h: 54 h × 20.
    assert (rows["2026-12"].total, rows["2026-12"].estimated) == (Decimal("1080.00"), True)
    cost_days_backfill(now=NOW, days=3)
    assert cost_history(months=1, now=NOW)[0].estimated is True  # backfilled days are still estimates
    CostDay.objects.filter(day__gte=date(2026, 12, 1)).update(estimated=False)  # as if closed on time
    december = cost_history(months=1, now=NOW)[0]
    assert december.estimated is False and december.total == Decimal("1080.00")


def test_the_api_says_which_months_are_estimated(viewer_api):
    pool = PoolFactory()
    _node(pool, created=timezone.now() - timedelta(days=70))
    rows = viewer_api.get("/api/v1/cost-history/", {"months": 3}).json()
    assert [row["estimated"] for row in rows][:2] == [True, True]  # nothing recorded yet: today's prices
    call_command("billing_backfill_costs", "--days", "100")
    rows = viewer_api.get("/api/v1/cost-history/", {"months": 3}).json()
    assert all(row["estimated"] for row in rows[:2])
