"""Factories for billing rows; inventory and users come from tests/factories.py."""

from datetime import date
from decimal import Decimal

import factory

from fleet.billing.models import BillingPlan, CheckpointPolicy, CostProfile, PreemptionRecord, PriceListEntry
from fleet.inventory.choices import BillingMode
from tests.factories import NodeFactory, PoolFactory, ProviderFactory


class BillingPlanFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = BillingPlan

    pool = factory.SubFactory(PoolFactory)
    billing_mode = BillingMode.ON_DEMAND
    rate = Decimal("10.00")
    rate_unit = "hour"
    currency = "USD"


class ReservedPlanFactory(BillingPlanFactory):
    billing_mode = BillingMode.RESERVED
    pool = factory.SubFactory(PoolFactory, billing_mode=BillingMode.RESERVED)
    rate = None
    upfront_cost = Decimal("120000.00")
    term_start = date(2025, 1, 1)
    term_end = date(2026, 1, 1)


class PriceListEntryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = PriceListEntry

    provider = factory.SubFactory(ProviderFactory)
    instance_type = "p5.48xlarge"
    billing_mode = BillingMode.ON_DEMAND
    rate = Decimal("98.32")
    currency = "USD"


class CostProfileFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = CostProfile

    provider = factory.SubFactory(ProviderFactory)
    currency = "USD"


class CheckpointPolicyFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = CheckpointPolicy

    pool = factory.SubFactory(PoolFactory)
    max_checkpoint_age_s = 3600


class PreemptionRecordFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = PreemptionRecord

    node = factory.SubFactory(NodeFactory, billing_mode=BillingMode.SPOT)
    pool = factory.LazyAttribute(lambda o: o.node.pool)
    billing_mode = BillingMode.SPOT
    episode_key = factory.Sequence(lambda n: f"operator:{n}")
    source = "operator"
    gpu_count = 8
