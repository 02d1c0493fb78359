"""Signal receivers: the outbox rows for findings opened and resolved, written in the health cycle's transaction."""

import logging

from django.db import transaction
from django.dispatch import receiver

from fleet.health.signals import findings_changed

logger = logging.getLogger(__name__)


@receiver(findings_changed, dispatch_uid="integrations-findings-outbox")
def on_findings_changed(sender, opened, resolved, now, **kwargs):
    from .services.outbox import findings_outbox_write

    # A savepoint: a fault here loses these notifications (logged) but never rolls back the health cycle.
    try:
        with transaction.atomic():
            findings_outbox_write(opened=opened, resolved=resolved, now=now)
    except Exception:
        logger.exception("integrations: outbox rows for findings %s / %s could not be written", opened, resolved)
