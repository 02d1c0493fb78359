from django.db import models, transaction
from django.utils import timezone

from .audit import actor_fields, audit_context, current_actor, current_note, jsonable
from .models import AuditEntry


def audit_record(*, actor, action: str, instance: models.Model | None = None, object_type: str = "",
                 object_id: str = "", before: dict | None = None, after: dict | None = None,
                 note: str = "") -> AuditEntry:
    """Record an action that no audited row's save describes (docs/architecture.md, "Auditing").

    Creates, updates and deletes of audited models are recorded by the model hooks (`fleet.core.audit`); call
    this for what they cannot see: a set-based state change (`QuerySet.update`), a decision recorded on another
    object (a re-enrolment allowed on its node). `actor=None` means the current request's user, else `system`.
    """
    if instance is not None:
        object_type = object_type or instance._meta.label_lower
        object_id = object_id or str(instance.pk)
    return AuditEntry.objects.create(
        **actor_fields(actor if actor is not None else current_actor()),
        action=action,
        object_type=object_type,
        object_id=object_id,
        object_repr=str(instance)[:200] if instance is not None else "",
        before=jsonable(before),
        after=jsonable(after),
        note=(note or current_note())[:200],
    )


def revoke(*, instance: models.Model, actor) -> models.Model:
    """Stamp `revoked_at` on a token-like row once (audited as an update noted "revoked"); revoking twice
    changes nothing."""
    if instance.revoked_at is None:
        with transaction.atomic(), audit_context(actor=actor, note="revoked"):
            instance.revoked_at = timezone.now()
            instance.save(update_fields=["revoked_at"])
    return instance
