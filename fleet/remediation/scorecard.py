"""The provider scorecard: findings and incidents per provider per 1,000 GPU-days, over a window.

GPU-days are counted from the inventory: every present GPU on a node that is not retired, from when it was
first seen (or the window's start) to now. Findings count when they opened in the window; "provider's" are
those whose responsible party is the provider (hardware or platform faults it must fix). Incidents count when
they opened in the window, by the provider of their node (or their own provider for pool-wide ones).
Remediation owns the scorecard because it is the app that sees both findings (health) and incidents.

A rate needs exposure to mean anything: below `MIN_GPU_DAYS` (one GPU-day) the rates are null, not "one
finding in an hour of one GPU = 24,000 per 1,000 GPU-days"; the counts are still there.
"""

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.db.models import Count, Q
from django.db.models.functions import Coalesce

from fleet.health.models import Finding
from fleet.inventory.choices import Owner
from fleet.inventory.models import GPU, Provider

from .models import Incident


@dataclass
class ProviderScore:
    provider_id: int
    provider: str
    kind: str
    support_contact: str
    gpu_days: Decimal
    findings: int
    provider_findings: int
    incidents: int
    findings_per_1k_gpu_days: Decimal | None
    provider_findings_per_1k_gpu_days: Decimal | None
    incidents_per_1k_gpu_days: Decimal | None


MIN_GPU_DAYS = Decimal(1)


def _rate(count: int, gpu_days: Decimal) -> Decimal | None:
    if gpu_days < MIN_GPU_DAYS:
        return None
    return (Decimal(count) * 1000 / gpu_days).quantize(Decimal("0.01"), ROUND_HALF_UP)


def provider_scorecard(*, days: int, now: datetime) -> list[ProviderScore]:
    start = now - timedelta(days=days)
    gpu_seconds: dict[int, float] = defaultdict(float)
    for row in (GPU.objects.filter(present=True, first_seen__lt=now).exclude(node__state="retired")
                .values("node__provider_id", "first_seen")):
        gpu_seconds[row["node__provider_id"]] += (now - max(row["first_seen"], start)).total_seconds()
    window = Q(opened_at__gte=start, opened_at__lt=now)
    findings = {row["node__provider_id"]: row for row in Finding.objects.filter(window)
                .values("node__provider_id").annotate(
                    n=Count("id"), mine=Count("id", filter=Q(responsible_party=Owner.PROVIDER))).order_by()}
    incidents = {row["pid"]: row["n"] for row in Incident.objects.filter(window)
                 .annotate(pid=Coalesce("node__provider_id", "provider_id")).values("pid")
                 .annotate(n=Count("id")).order_by()}
    out = []
    for provider in Provider.objects.order_by("name"):
        gpu_days = Decimal(gpu_seconds.get(provider.pk, 0) / 86400).quantize(Decimal("0.01"), ROUND_HALF_UP)
        found = findings.get(provider.pk, {"n": 0, "mine": 0})
        incident_count = incidents.get(provider.pk, 0)
        if not gpu_days and not found["n"] and not incident_count:
            continue
        out.append(ProviderScore(
            provider_id=provider.pk, provider=provider.name, kind=provider.kind,
            support_contact=provider.support_contact, gpu_days=gpu_days, findings=found["n"],
            provider_findings=found["mine"], incidents=incident_count,
            findings_per_1k_gpu_days=_rate(found["n"], gpu_days),
            provider_findings_per_1k_gpu_days=_rate(found["mine"], gpu_days),
            incidents_per_1k_gpu_days=_rate(incident_count, gpu_days)))
    return out
