from django.db import models


class RateUnit(models.TextChoices):
    HOUR = "hour", "Per hour"
    MONTH = "month", "Per month"


class PlanScope(models.TextChoices):
    POOL = "pool", "Pool"
    NODE = "node", "Node"


class RateSource(models.TextChoices):
    """Where a node's price came from, most specific first."""

    NODE_PLAN = "node_plan", "Node billing plan"
    POOL_PLAN = "pool_plan", "Pool billing plan"
    PRICE_LIST = "price_list", "Price list"
    COST_PROFILE = "cost_profile", "Cost profile"
    NONE = "none", "No price known"


class TermStatus(models.TextChoices):
    NOT_STARTED = "not_started", "Not started"
    ACTIVE = "active", "Active"
    EXPIRING = "expiring", "Expiring within 30 days"
    EXPIRED = "expired", "Expired"


class PreemptionSource(models.TextChoices):
    """How we know the node was taken away, strongest evidence last."""

    AGENT_NOTICE = "agent_notice", "Agent saw the cloud's notice"
    CLOUD_RECLAIM = "cloud_reclaim", "Reclaim confirmed: notice, then the node went silent"
    OPERATOR = "operator", "Marked by an operator"


class ComplianceFlag(models.TextChoices):
    ICP_FILING_REQUIRED = "icp_filing_required", "ICP filing required"
    DDOS_PROTECTION_RECOMMENDED = "ddos_protection_recommended", "DDoS protection recommended"


class WhatIfScenario(models.TextChoices):
    CURRENT = "current", "As billed today"
    ON_DEMAND = "on_demand", "On-demand"
    RESERVED = "reserved", "Reserved"
    SPOT = "spot", "Spot"
    BARE_METAL = "bare_metal", "Bare metal"


class RateScope(models.TextChoices):
    POOL = "pool", "Pool"
    SITE = "site", "Region / site"
    INSTANCE_TYPE = "instance_type", "Instance type"

