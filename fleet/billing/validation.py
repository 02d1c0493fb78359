"""Business rules for prices, checked the same way by the API, the admin and the services.

Each function raises django.core.exceptions.ValidationError with a dict naming the offending field, which
the API's exception handler turns into a 400 in the one error shape.
"""

from datetime import date
from decimal import Decimal

from django.core.exceptions import ValidationError

from fleet.inventory.choices import BillingMode
from fleet.inventory.models import Node, Pool

from .choices import RateUnit
from .currencies import is_known_currency


class _Errors(dict):
    def add(self, field: str, message: str) -> None:
        self.setdefault(field, []).append(message)

    def raise_if_any(self) -> None:
        if self:
            raise ValidationError(dict(self))


def _check_currency(errors: _Errors, currency: str | None) -> None:
    if not currency or not is_known_currency(currency):
        errors.add("currency", f"{currency!r} is not a known ISO 4217 currency code (e.g. USD, EUR, CNY).")


def _check_mode_pricing(errors: _Errors, *, billing_mode: str, rate: Decimal | None, rate_unit: str,
                        upfront_cost: Decimal | None) -> None:
    upfront = upfront_cost or Decimal(0)
    if billing_mode == BillingMode.SPOT and rate_unit != RateUnit.HOUR:
        errors.add("rate_unit", "Spot capacity is priced per hour.")
    if billing_mode != BillingMode.RESERVED:
        if rate is None:
            errors.add("rate", f"A {billing_mode} price needs a rate.")
        if upfront > 0:
            errors.add("upfront_cost", "Only reserved capacity has an upfront cost.")
    elif (rate is None or rate == 0) and upfront == 0:
        errors.add("rate", "A reserved price needs a recurring rate, an upfront cost, or both.")


def validate_billing_plan(*, pool: Pool | None, node: Node | None, billing_mode: str, rate: Decimal | None,
                          rate_unit: str, currency: str, upfront_cost: Decimal | None, term_start: date | None,
                          term_end: date | None, auto_renew: bool) -> None:
    errors = _Errors()
    if bool(pool) == bool(node):
        errors.add("pool", "Set exactly one of pool or node.")
    _check_currency(errors, currency)
    scope_mode = node.billing_mode if node else (pool.billing_mode if pool else "")
    if scope_mode and billing_mode and billing_mode != scope_mode:
        what = f"node {node.hostname}" if node else f"pool {pool.name}"
        errors.add("billing_mode", f"The {what} is billed as {scope_mode}; a {billing_mode} price cannot apply "
                                   f"to it. Change its billing mode in the inventory first.")
    _check_mode_pricing(errors, billing_mode=billing_mode, rate=rate, rate_unit=rate_unit, upfront_cost=upfront_cost)
    if billing_mode == BillingMode.RESERVED:
        if term_start is None:
            errors.add("term_start", "A reserved plan needs the start of its term.")
        if term_end is None:
            errors.add("term_end", "A reserved plan needs the end of its term.")
        if term_start and term_end and term_end <= term_start:
            errors.add("term_end", "The term must end after it starts.")
    else:
        for field, value in (("term_start", term_start), ("term_end", term_end)):
            if value is not None:
                errors.add(field, "Only reserved plans have a term.")
        if auto_renew:
            errors.add("auto_renew", "Only reserved plans renew.")
    errors.raise_if_any()


def validate_price_list_entry(*, billing_mode: str, term_months: int, rate: Decimal | None, rate_unit: str,
                              upfront_cost: Decimal | None, currency: str) -> None:
    errors = _Errors()
    _check_currency(errors, currency)
    _check_mode_pricing(errors, billing_mode=billing_mode, rate=rate, rate_unit=rate_unit, upfront_cost=upfront_cost)
    if billing_mode == BillingMode.RESERVED and not term_months:
        errors.add("term_months", "A reserved offer has a term in months (e.g. 12 or 36).")
    if billing_mode != BillingMode.RESERVED and term_months:
        errors.add("term_months", "Only reserved offers have a term; use 0.")
    errors.raise_if_any()


def validate_cost_profile(*, provider, site, currency: str) -> None:
    errors = _Errors()
    if bool(provider) == bool(site):
        errors.add("provider", "Set exactly one of provider or site.")
    _check_currency(errors, currency)
    errors.raise_if_any()
