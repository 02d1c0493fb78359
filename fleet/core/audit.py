"""Change logging attached to the write itself, whatever the entry point (API, admin, service, task, shell).

Each app registers, in its `AppConfig.ready()`, the models whose writes are audited (`audit_register`) and the
ones that are not (`audit_exempt`: hot-path tables, and rows recorded as actions on another object). A
registered model gets `pre_save` / `post_save` / `post_delete` receivers: creates and deletes store the whole
row, updates the fields that changed (an update that changes nothing is not recorded unless a service gave it a
note). Entries are written in the same transaction as the row, so a write that rolls back leaves none.

Who did it comes from a request-scoped context: `AuditActorMiddleware` puts the request there and the actor is
read from `request.user` when the entry is written (DRF authenticates lazily and sets the user on the Django
request, so API tokens and node credentials count as well as sessions). Outside a request — Celery tasks,
management commands, the shell — the actor is `system`. A service that knows better (an enrolment token, the
user it acts for) or has something to say about the write wraps it in `audit_context(actor=..., note=...)`.

Secrets never reach an entry: fields named `password` or ending in `_hash` are stored as `MASK` (still showing
that they changed). `QuerySet.update()`, `bulk_create` and raw SQL send no signals: set-based writes on the hot
path stay unaudited by design, and a service that changes audited rows that way records an action entry itself
(docs/architecture.md, "Auditing").
"""

import contextvars
import json
from contextlib import contextmanager

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models.signals import post_delete, post_save, pre_save

MASK = "********"
# A secret that changed shows as this pair, so the entry says it changed without storing either value.
SECRET_BEFORE, SECRET_AFTER = "[previous]", "[changed]"
SYSTEM = "system"

_UNSET = object()
_request: contextvars.ContextVar = contextvars.ContextVar("audit_request", default=None)
_actor: contextvars.ContextVar = contextvars.ContextVar("audit_actor", default=_UNSET)
_note: contextvars.ContextVar = contextvars.ContextVar("audit_note", default="")

_audited: dict[type[models.Model], frozenset[str]] = {}
_exempt: set[type[models.Model]] = set()
_encoder = DjangoJSONEncoder()


def jsonable(data):
    """Round-trip through Django's encoder so Decimals, datetimes and UUIDs store as JSON."""
    if data is None:
        return None
    return json.loads(_encoder.encode(data))


# --- who and why ---------------------------------------------------------------------------------------------

@contextmanager
def audit_context(*, actor=_UNSET, note: str | None = None):
    """Record the writes in this block as done by `actor` (a user, a node principal or a label) with `note`."""
    tokens = []
    if actor is not _UNSET:
        tokens.append((_actor, _actor.set(actor)))
    if note is not None:
        tokens.append((_note, _note.set(note)))
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


def current_actor():
    """The actor of the write being made: the block's (`audit_context`), else the request's user, else None."""
    actor = _actor.get()
    if actor is not _UNSET:
        return actor
    request = _request.get()
    if request is None:
        return None
    user = getattr(request, "user", None)
    return user if getattr(user, "is_authenticated", False) else None


def current_note() -> str:
    return _note.get()


def actor_fields(actor) -> dict:
    """The entry's `actor` (a user row, kept only for real users) and `actor_label` (survives the user)."""
    user = actor if getattr(actor, "is_authenticated", False) and isinstance(actor, models.Model) else None
    label = getattr(actor, "username", "") or (str(actor) if actor is not None else "") or SYSTEM
    return {"actor": user, "actor_label": label[:150]}


class AuditActorMiddleware:
    """Makes the request the audit context for everything written while it is handled."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        token = _request.set(request)
        try:
            return self.get_response(request)
        finally:
            _request.reset(token)


# --- which models --------------------------------------------------------------------------------------------

def audit_register(model: type[models.Model], *, ignore: tuple[str, ...] = ()) -> None:
    """Audit every save and delete of `model`. `ignore` names fields whose change alone is not worth an entry
    (bookkeeping such as `last_login`); `auto_now` timestamps are always left out."""
    auto_now = {f.name for f in model._meta.concrete_fields if getattr(f, "auto_now", False)}
    _audited[model] = frozenset(ignore) | auto_now
    uid = f"audit:{model._meta.label_lower}"
    pre_save.connect(_before_save, sender=model, dispatch_uid=uid, weak=False)
    post_save.connect(_after_save, sender=model, dispatch_uid=uid, weak=False)
    post_delete.connect(_after_delete, sender=model, dispatch_uid=uid, weak=False)


def audit_exempt(*exempt: type[models.Model]) -> None:
    """Declare models deliberately not audited (hot-path tables, or rows recorded as actions elsewhere)."""
    _exempt.update(exempt)


def audited_models() -> set[type[models.Model]]:
    return set(_audited)


def exempt_models() -> set[type[models.Model]]:
    return set(_exempt)


def _is_secret(name: str) -> bool:
    return name == "password" or name.endswith("_hash")


def _row(instance: models.Model) -> dict:
    """The row as JSON, secrets included (kept in memory only, to see whether they changed)."""
    skip = _audited.get(type(instance), frozenset())
    return jsonable({field.name: getattr(instance, field.attname)
                     for field in instance._meta.concrete_fields if field.name not in skip})


def _masked(row: dict, mask: str = MASK) -> dict:
    return {name: mask if _is_secret(name) and value else value for name, value in row.items()}


def snapshot(instance: models.Model) -> dict:
    """The row as an entry stores it: foreign keys by id under the field's name, secrets masked, bookkeeping
    left out."""
    return _masked(_row(instance))


# --- the receivers -------------------------------------------------------------------------------------------

def _before_save(sender, instance, raw=False, **kwargs):
    instance._audit_before = None
    if raw or instance._state.adding or instance.pk is None:
        return
    old = sender._base_manager.filter(pk=instance.pk).first()
    instance._audit_before = _row(old) if old is not None else None


def _after_save(sender, instance, created, raw=False, **kwargs):
    if raw:  # loaddata
        return
    from .models import AuditEntry

    after = _row(instance)
    before = getattr(instance, "_audit_before", None)
    instance._audit_before = None
    if created or before is None:
        _write(AuditEntry.Action.CREATE, instance, before=None, after=_masked(after))
        return
    changed = sorted(name for name in after if before.get(name) != after[name])
    if not changed and not current_note():
        return
    _write(AuditEntry.Action.UPDATE, instance,
           before=_masked({name: before.get(name) for name in changed}, SECRET_BEFORE),
           after=_masked({name: after[name] for name in changed}, SECRET_AFTER))


def _after_delete(sender, instance, **kwargs):
    from .models import AuditEntry

    _write(AuditEntry.Action.DELETE, instance, before=snapshot(instance), after=None)


def _write(action: str, instance: models.Model, *, before, after) -> None:
    from .models import AuditEntry

    AuditEntry.objects.create(
        **actor_fields(current_actor()), action=action, object_type=instance._meta.label_lower,
        object_id=str(instance.pk), object_repr=str(instance)[:200], before=before, after=after,
        note=current_note()[:200])
