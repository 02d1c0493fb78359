"""The Decimal arithmetic behind every cost figure, checked against sums done by hand."""

from datetime import date
from decimal import Decimal

import pytest

from fleet.billing.costing import (
    Price,
    add_months,
    expected_preemption_loss,
    money,
    per_gpu_hour,
    per_utilised_gpu_hour,
    term_months,
    unit_price,
)


@pytest.mark.parametrize(
    ("start", "end", "months"),
    [
        (date(2025, 1, 1), date(2026, 1, 1), Decimal(12)),
        (date(2024, 1, 1), date(2027, 1, 1), Decimal(36)),  # a leap year inside changes nothing
        (date(2025, 1, 1), date(2025, 2, 15), Decimal("1.5")),  # 1 month + 14 of February's 28 days
        (date(2025, 1, 31), date(2025, 2, 28), Decimal(1)),  # month ends clamp
    ],
)
def test_term_months_counts_calendar_months(start, end, months):
    assert term_months(start, end) == months


def test_term_must_end_after_start():
    with pytest.raises(ValueError):
        term_months(date(2025, 1, 1), date(2025, 1, 1))


def test_add_months_clamps_to_month_end():
    assert add_months(date(2024, 1, 31), 1) == date(2024, 2, 29)
    assert add_months(date(2025, 11, 30), 3) == date(2026, 2, 28)


def test_on_demand_hourly_is_rate_times_730_hours():
    # 32.77 × 730 = 23922.10
    price = Price(billing_mode="on_demand", rate=Decimal("32.77"), rate_unit="hour", currency="USD")
    assert price.monthly_compute() == Decimal("23922.10")


def test_on_demand_monthly_rate_is_taken_as_is():
    price = Price(billing_mode="on_demand", rate=Decimal("15000"), rate_unit="month", currency="EUR")
    assert price.monthly_compute() == Decimal("15000")


def test_spot_at_its_rate():
    # 9.83 × 730 = 7175.90
    price = Price(billing_mode="spot", rate=Decimal("9.83"), rate_unit="hour", currency="USD")
    assert price.monthly_compute() == Decimal("7175.90")


def test_reserved_all_upfront_is_amortised_over_the_term():
    # 150000 / 36 months = 4166.666… → 4166.67 a month
    price = Price(billing_mode="reserved", rate=None, rate_unit="hour", currency="USD",
                  upfront_cost=Decimal("150000"), term_months=Decimal(36))
    assert money(price.monthly_compute()) == Decimal("4166.67")


def test_reserved_partial_upfront_adds_the_recurring_rate():
    # 60000 / 12 = 5000.00, plus 2.50 × 730 = 1825.00 → 6825.00
    price = Price(billing_mode="reserved", rate=Decimal("2.50"), rate_unit="hour", currency="USD",
                  upfront_cost=Decimal("60000"), term_months=Decimal(12))
    assert price.monthly_compute() == Decimal("6825.00")


def test_reserved_monthly_rate_without_upfront():
    price = Price(billing_mode="reserved", rate=Decimal("12000"), rate_unit="month", currency="USD",
                  term_months=Decimal(12))
    assert price.monthly_compute() == Decimal("12000")


def test_upfront_without_term_cannot_be_spread():
    price = Price(billing_mode="reserved", rate=None, rate_unit="hour", currency="USD", upfront_cost=Decimal(1))
    assert price.monthly_compute() is None


def test_per_gpu_hour_and_per_utilised_gpu_hour():
    # 24197.10 / (730 × 8 = 5840) = 4.14333… → 4.1433
    assert unit_price(per_gpu_hour(Decimal("24197.10"), 8)) == Decimal("4.1433")
    # at 50 % utilisation only 2920 GPU-hours did work: 24197.10 / 2920 = 8.28667… → 8.2867
    assert unit_price(per_utilised_gpu_hour(Decimal("24197.10"), 8, Decimal("50"))) == Decimal("8.2867")


@pytest.mark.parametrize("utilisation", [None, Decimal(0)])
def test_per_utilised_gpu_hour_is_unknown_without_useful_measurements(utilisation):
    assert per_utilised_gpu_hour(Decimal("100"), 8, utilisation) is None


def test_expected_preemption_loss():
    # 0.05 preemptions/node-day × 30.4166… days × 4 GPU-h lost × 5.00 per GPU-h = 30.4166… → 30.42
    loss = expected_preemption_loss(preemptions_per_node_day=Decimal("0.05"),
                                    lost_gpu_hours_per_preemption=Decimal(4), cost_per_gpu_hour=Decimal(5))
    assert money(loss) == Decimal("30.42")
