import json

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models, transaction
from django.utils import timezone

from .models import AuditEntry

_encoder = DjangoJSONEncoder()


def _jsonable(data):
    """Round-trip through Django's encoder so Decimals, datetimes and UUIDs store as JSON."""
    if data is None:
        return None
    return json.loads(_encoder.encode(data))


def audit_record(*, actor, action: str, instance: models.Model | None = None, object_type: str = "",
                 object_id: str = "", before: dict | None = None, after: dict | None = None,
                 note: str = "") -> AuditEntry:
    if instance is not None:
        object_type = object_type or instance._meta.label_lower
        object_id = object_id or str(instance.pk)
    user = actor if getattr(actor, "is_authenticated", False) else None
    return AuditEntry.objects.create(
        actor=user,
        actor_label=getattr(actor, "username", "") or str(actor or "system"),
        action=action,
        object_type=object_type,
        object_id=object_id,
        object_repr=str(instance)[:200] if instance is not None else "",
        before=_jsonable(before),
        after=_jsonable(after),
        note=note[:200],
    )


def revoke(*, instance: models.Model, actor) -> models.Model:
    """Stamp `revoked_at` on a token-like row once, with an audit entry; revoking twice changes nothing."""
    if instance.revoked_at is None:
        with transaction.atomic():
            instance.revoked_at = timezone.now()
            instance.save(update_fields=["revoked_at"])
            audit_record(actor=actor, action=AuditEntry.Action.ACTION, instance=instance, note="revoked")
    return instance
