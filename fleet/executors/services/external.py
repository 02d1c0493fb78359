"""Requests executors make outside the fleet, recorded under the step's idempotency key before they are sent."""

from __future__ import annotations

from django.db import IntegrityError, transaction

from ..models import ExternalRequest


def external_request_record(*, executor: str, kind: str, node, incident_key: str,
                            idempotency_key: str) -> ExternalRequest:
    """The request for this step attempt: the one recorded before, or a new one (committed before any call)."""
    existing = ExternalRequest.objects.filter(idempotency_key=idempotency_key).first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            return ExternalRequest.objects.create(executor=executor, kind=kind, node=node,
                                                  pool_id=getattr(node, "pool_id", None), incident_key=incident_key,
                                                  idempotency_key=idempotency_key)
    except IntegrityError:
        return ExternalRequest.objects.get(idempotency_key=idempotency_key)
