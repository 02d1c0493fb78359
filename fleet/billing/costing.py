"""The cost arithmetic, in Decimal and free of the database, so every figure can be checked by hand.

Conventions (docs/billing.md): a month is 730 hours (8760 / 12, the clouds' own convention); money is
rounded half-up to cents only when shown, per-GPU-hour prices to 1/10000.
"""

import calendar
from dataclasses import dataclass
from datetime import date
from decimal import ROUND_HALF_UP, Decimal

from fleet.inventory.choices import BillingMode

from .choices import RateUnit

HOURS_PER_MONTH = Decimal(730)
HOURS_PER_DAY = Decimal(24)
DAYS_PER_MONTH = HOURS_PER_MONTH / HOURS_PER_DAY
ZERO = Decimal(0)
CENT = Decimal("0.01")
UNIT_PRICE = Decimal("0.0001")


def money(value: Decimal | None) -> Decimal | None:
    return None if value is None else value.quantize(CENT, rounding=ROUND_HALF_UP)


def percent(value: Decimal | None) -> Decimal | None:
    return None if value is None else value.quantize(CENT, rounding=ROUND_HALF_UP)


def unit_price(value: Decimal | None) -> Decimal | None:
    return None if value is None else value.quantize(UNIT_PRICE, rounding=ROUND_HALF_UP)


def to_decimal(value) -> Decimal | None:
    """Floats from the database (utilisation, ages) become exact Decimals of their shortest repr."""
    if value is None:
        return None
    return value if isinstance(value, Decimal) else Decimal(str(value))


def add_months(day: date, months: int) -> date:
    month_index = day.month - 1 + months
    year, month = day.year + month_index // 12, month_index % 12 + 1
    return date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


def term_months(start: date, end: date) -> Decimal:
    """Calendar months from `start` to `end` (exclusive): whole months, then the rest as a share of the next.

    2025-01-01 → 2026-01-01 is 12; 2025-01-01 → 2025-02-15 is 1 + 14/28 = 1.5.
    """
    if end <= start:
        raise ValueError("a term must end after it starts")
    whole = (end.year - start.year) * 12 + end.month - start.month
    if add_months(start, whole) > end:
        whole -= 1
    anchor, following = add_months(start, whole), add_months(start, whole + 1)
    return Decimal(whole) + Decimal((end - anchor).days) / Decimal((following - anchor).days)


def recurring_monthly(rate: Decimal | None, rate_unit: str) -> Decimal | None:
    if rate is None:
        return None
    return rate * HOURS_PER_MONTH if rate_unit == RateUnit.HOUR else rate


@dataclass(frozen=True)
class Price:
    """One node's price, whatever it came from (a plan or a price-list entry)."""

    billing_mode: str
    rate: Decimal | None
    rate_unit: str
    currency: str
    upfront_cost: Decimal = ZERO
    term_months: Decimal | None = None

    def monthly_compute(self) -> Decimal | None:
        """Compute cost of one node for one month.

        On-demand and spot: the rate (× 730 h when hourly). Reserved: the upfront cost spread evenly over
        the months of the term, plus any recurring rate (partial-upfront and no-upfront reservations).
        """
        recurring = recurring_monthly(self.rate, self.rate_unit)
        if self.billing_mode != BillingMode.RESERVED:
            return recurring
        upfront = self.upfront_cost or ZERO
        if upfront and not self.term_months:
            return None  # an upfront payment without a term cannot be spread
        amortised = upfront / self.term_months if upfront else ZERO
        if recurring is None and not upfront:
            return None
        return amortised + (recurring or ZERO)


@dataclass(frozen=True)
class Overheads:
    """Running costs of one node per month beside compute, all in `currency`."""

    currency: str
    storage: Decimal = ZERO
    egress: Decimal = ZERO
    backup: Decimal = ZERO
    ops: Decimal = ZERO

    @property
    def total(self) -> Decimal:
        return self.storage + self.egress + self.backup + self.ops


def per_gpu_hour(monthly_total: Decimal | None, gpu_count: int) -> Decimal | None:
    if monthly_total is None or gpu_count <= 0:
        return None
    return monthly_total / (HOURS_PER_MONTH * gpu_count)


def per_utilised_gpu_hour(monthly_total: Decimal | None, gpu_count: int,
                          utilisation_pct: Decimal | None) -> Decimal | None:
    """Cost of one GPU-hour of useful work: the month's cost over the GPU-hours actually busy.

    No measurement (or a GPU that never did anything) has no such figure, rather than a zero or infinity.
    """
    if monthly_total is None or gpu_count <= 0 or utilisation_pct is None or utilisation_pct <= 0:
        return None
    return monthly_total / (HOURS_PER_MONTH * gpu_count * utilisation_pct / 100)


def expected_preemption_loss(*, preemptions_per_node_day: Decimal, lost_gpu_hours_per_preemption: Decimal,
                             cost_per_gpu_hour: Decimal) -> Decimal:
    """Expected monthly cost of redoing lost work on one node: preemptions a month × work lost × its price."""
    return preemptions_per_node_day * DAYS_PER_MONTH * lost_gpu_hours_per_preemption * cost_per_gpu_hour
