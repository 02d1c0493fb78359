"""Operator overrides on findings and GPUs: acknowledge, snooze until, mark healthy until. Audited."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from fleet.core.api.errors import DomainError
from fleet.core.models import AuditEntry
from fleet.core.services import audit_record

from ..choices import OverrideKind
from ..models import Override

MAX_OVERRIDE = timedelta(days=30)
# Overrides that keep a finding from opening an incident (and out of the circuit breaker's count).
SUPPRESSING = [OverrideKind.SNOOZE, OverrideKind.MARK_HEALTHY]


def _active(now: datetime) -> Q:
    return Q(revoked_at__isnull=True) & (Q(until__isnull=True) | Q(until__gt=now))


def override_snapshot(override: Override) -> dict:
    return {"kind": override.kind, "finding": override.finding_id, "gpu": override.gpu_id, "until": override.until,
            "reason": override.reason, "revoked_at": override.revoked_at}


def override_create(*, actor, kind: str, reason: str, finding=None, gpu=None, until: datetime | None = None,
                    now: datetime | None = None) -> Override:
    now = now or timezone.now()
    if (finding is None) == (gpu is None):
        raise DomainError("Give either a finding or a GPU.", code="invalid", status_code=400,
                          fields={"finding": ["Give either a finding or a GPU."]})
    if kind == OverrideKind.ACKNOWLEDGE and finding is None:
        raise DomainError("Only findings are acknowledged.", code="invalid", status_code=400,
                          fields={"kind": ["acknowledge applies to findings; snooze or mark a GPU healthy."]})
    if kind in SUPPRESSING:
        if until is None:
            raise DomainError("A snooze or mark-healthy needs an end.", code="invalid", status_code=400,
                              fields={"until": ["Required for snooze and mark_healthy."]})
        if until <= now or until - now > MAX_OVERRIDE:
            raise DomainError("The end must lie in the next 30 days.", code="invalid", status_code=400,
                              fields={"until": ["Must be in the future and at most 30 days ahead."]})
    with transaction.atomic():
        override = Override.objects.create(kind=kind, finding=finding, gpu=gpu, until=until, reason=reason,
                                           created_by=actor if getattr(actor, "is_authenticated", False) else None,
                                           created_by_label=getattr(actor, "username", "") or str(actor))
        audit_record(actor=actor, action=AuditEntry.Action.CREATE, instance=override,
                     after=override_snapshot(override), note=f"{kind}: {reason}")
    return override


def override_revoke(*, override: Override, actor, now: datetime | None = None) -> Override:
    if override.revoked_at is not None:
        return override
    with transaction.atomic():
        before = override_snapshot(override)
        override.revoked_at = now or timezone.now()
        override.save(update_fields=["revoked_at"])
        audit_record(actor=actor, action=AuditEntry.Action.ACTION, instance=override, before=before,
                     after=override_snapshot(override), note="override revoked")
    return override


def suppressing_override(finding, *, now: datetime) -> Override | None:
    """The snooze / mark-healthy in force for a finding (on the finding itself or its GPU), if any."""
    q = Q(finding_id=finding.pk)
    if finding.gpu_id is not None:
        q |= Q(gpu_id=finding.gpu_id)
    return (Override.objects.filter(q, _active(now), kind__in=SUPPRESSING)
            .order_by("-kind", "-until").first())


def suppressed_finding_ids(findings, *, now: datetime) -> set[int]:
    """Of `findings` (a list of Finding rows), the ones an operator snoozed or marked healthy."""
    findings = list(findings)
    if not findings:
        return set()
    ids = {f.pk for f in findings}
    gpu_ids = {f.gpu_id for f in findings if f.gpu_id is not None}
    rows = Override.objects.filter(_active(now), Q(finding_id__in=ids) | Q(gpu_id__in=gpu_ids),
                                   kind__in=SUPPRESSING).values_list("finding_id", "gpu_id")
    by_finding = {f for f, _ in rows if f is not None}
    by_gpu = {g for _, g in rows if g is not None}
    return {f.pk for f in findings if f.pk in by_finding or (f.gpu_id is not None and f.gpu_id in by_gpu)}
