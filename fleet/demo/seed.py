"""The demo fleet behind `make run`: providers, sites, pools and baselines seeded to match the agent's
`demo-fleet` scenario, then simulated agents (the real agent code over a simulated NVML) reporting to the
running server — with live faults within the first minute: an Xid 79, a driver drift, a data-pipeline
bottleneck, host memory exhaustion, a spot notice (demo pools hold conditions for 30 s at most).
"""

import dataclasses
import logging
import threading
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from fleet.accounts.models import User
from fleet.health.services.catalog import rule_catalog_sync
from fleet.inventory.choices import Layer, Owner, ProviderKind
from fleet.inventory.models import Baseline, BoundaryOverride, Pool, Provider, Site
from fleet.telemetry.services.enrollment import enrollment_token_create

logger = logging.getLogger(__name__)

PROVIDERS = {
    "aws": ("AWS", ProviderKind.CLOUD, "aws"),
    "gcp": ("Google Cloud", ProviderKind.CLOUD, "gcp"),
    "azure": ("Microsoft Azure", ProviderKind.CLOUD, "azure"),
    "alibaba": ("Alibaba Cloud", ProviderKind.CLOUD, "alibaba"),
    "tencent": ("Tencent Cloud", ProviderKind.CLOUD, "tencent"),
    "idc": ("Hosted IDC (example)", ProviderKind.IDC, ""),
    "own": ("Own datacenter", ProviderKind.OWN, ""),
}
# The simulator speaks of "subscription" and "owned"; both are paid up front for a term here.
BILLING_MODE = {"on_demand": "on_demand", "spot": "spot", "reserved": "reserved", "subscription": "reserved",
                "owned": "reserved"}
# Demo prices per node (list-price ballparks for 8-GPU machines): (rate, unit, currency, upfront, term days,
# days the term has run). The Azure reservation ends within 30 days, so the expiring-term view has an entry.
DEMO_PRICES = {
    "aws": (Decimal("39.50"), "hour", "USD", Decimal("0"), None, None),
    "gcp": (Decimal("88.49"), "hour", "USD", Decimal("0"), None, None),
    "azure": (Decimal("63.20"), "hour", "USD", Decimal("0"), 365, 345),
    "alibaba": (Decimal("45000"), "month", "CNY", Decimal("0"), 365, 100),
    "idc": (Decimal("18000"), "month", "USD", Decimal("0"), 365, 200),
    "own": (Decimal("2500"), "month", "USD", Decimal("320000"), 3 * 365, 365),
}
REGION_COUNTRY = {"us-": "US", "eastus": "US", "cn-": "CN", "sh-": "CN", "ap-shanghai": "CN", "onprem": "DE"}


def _country(region: str) -> str:
    return next((c for prefix, c in REGION_COUNTRY.items() if region.startswith(prefix)), "US")


@dataclasses.dataclass
class DemoGroup:
    key: tuple[str, str, str, str]  # provider, delivery form, billing mode, instance type
    scenario: object  # fleet_agent.simulator.Scenario holding only this group's nodes
    token: str


def demo_seed(*, scenario, actor: User) -> list[DemoGroup]:
    """Create (idempotently) what the scenario's nodes enrol into; return one enrolment group per pool."""
    groups: dict[tuple, list] = {}
    for spec in scenario.nodes:
        key = (spec.provider, spec.delivery_form, BILLING_MODE[spec.billing_mode], spec.instance_type)
        groups.setdefault(key, []).append(spec)
    result = []
    with transaction.atomic():
        rule_catalog_sync()  # rows for rules added since the last migration, so their holds are shortened too
        for (provider_key, form, billing, instance_type), specs in groups.items():
            name, kind, cloud = PROVIDERS[provider_key]
            provider, _ = Provider.objects.get_or_create(slug=provider_key, defaults={
                "name": specs[0].provider_name or name, "kind": kind, "cloud": cloud})
            if kind == ProviderKind.OWN:
                BoundaryOverride.objects.get_or_create(provider=provider, delivery_form="", layer=Layer.FACILITY,
                                                       defaults={"owner": Owner.US, "note": "our own datacenter"})
            region = specs[0].region
            site, _ = Site.objects.get_or_create(provider=provider, name=region, defaults={
                "region_code": region, "country": _country(region)})
            spec = specs[0]
            pool, _ = Pool.objects.get_or_create(name=f"{provider_key}-{instance_type}-{billing}", defaults={
                "provider": provider, "site": site, "delivery_form": form, "billing_mode": billing,
                "instance_type": instance_type, "gpu_model": spec.gpu_model, "gpus_per_node": spec.gpu_count})
            stack = spec.stack
            Baseline.objects.get_or_create(pool=pool, defaults={
                "name": f"{pool.name} baseline", "driver_version": stack["driver_version"],
                "cuda_driver_version": stack["cuda_driver_version"],
                "frameworks": [{"name": f["name"], "version": f["version"], "cuda": f.get("cuda", "")}
                               for f in stack.get("frameworks", [])],
                "kernel": stack.get("kernel", "")})
            _demo_billing(pool, provider_key, billing)
            _demo_short_holds(pool)
            _, token = enrollment_token_create(actor=actor, name=f"demo {pool.name}", provider=provider, site=site,
                                               pool=pool, delivery_form=form, billing_mode=billing,
                                               labels={"demo": "true"}, max_uses=len(specs),
                                               expires_at=timezone.now() + timedelta(days=1))
            result.append(DemoGroup(key=(provider_key, form, billing, instance_type),
                                    scenario=dataclasses.replace(scenario, nodes=tuple(specs)), token=token))
    return result


# The demo's faults start within the first minute; holds of several minutes (a data-pipeline bottleneck must
# last 5 min before it opens in production) would keep them out of sight. Demo pools get pool overrides that cap
# every hold at this, so each fault shows within two minutes of `make run`. Production holds are untouched.
DEMO_HOLD_S = 30


def _demo_short_holds(pool: Pool) -> None:
    from fleet.health.models import Rule, RuleOverride

    for rule in Rule.objects.filter(duration_s__gt=DEMO_HOLD_S):
        RuleOverride.objects.get_or_create(rule=rule, pool=pool, defaults={
            "duration_s": DEMO_HOLD_S, "note": f"demo: hold shortened to {DEMO_HOLD_S} s so the fault shows at once"})


def _demo_billing(pool: Pool, provider_key: str, billing_mode: str) -> None:
    from fleet.billing.models import BillingPlan, CheckpointPolicy

    rate, unit, currency, upfront, term_days, elapsed = DEMO_PRICES[provider_key]
    today = timezone.now().date()
    term = {}
    if billing_mode == "reserved" and term_days:
        start = today - timedelta(days=elapsed)
        term = {"term_start": start, "term_end": start + timedelta(days=term_days), "upfront_cost": upfront}
    BillingPlan.objects.get_or_create(pool=pool, defaults={"billing_mode": billing_mode, "rate": rate,
                                                           "rate_unit": unit, "currency": currency, **term})
    if billing_mode == "spot":
        CheckpointPolicy.objects.get_or_create(pool=pool, defaults={"max_checkpoint_age_s": 1800})


def demo_run(*, groups: list[DemoGroup], server: str, state_dir: Path, interval_s: float | None,
             stop: threading.Event) -> None:
    """Run every group's simulated agents until `stop` is set (one thread per group)."""
    from fleet_agent.simulator import run_fleet

    def run(group: DemoGroup) -> None:
        folder = state_dir / "-".join(group.key)
        result = run_fleet(group.scenario, nodes=len(group.scenario.nodes), server=server, token=group.token,
                           interval_s=interval_s, state_dir=folder, workers=1, stop_event=stop)
        logger.info("demo group %s stopped: %s", "/".join(group.key), result.summary())

    threads = [threading.Thread(target=run, args=(g,), name=f"demo-{g.key[0]}", daemon=True) for g in groups]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
