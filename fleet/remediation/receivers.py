"""Signal receivers: findings opened by the health engine, nodes enrolling, pools and sites created."""

from functools import partial

from django.db import transaction
from django.db.models.signals import post_save
from django.dispatch import receiver

from fleet.health.signals import findings_opened
from fleet.inventory.models import Node, Pool, Site


def _enqueue_intake(finding_ids: list[int]) -> None:
    from .tasks import intake

    intake.delay(finding_ids)


@receiver(findings_opened, dispatch_uid="remediation-intake")
def on_findings_opened(sender, finding_ids, **kwargs):
    if finding_ids:
        # The sweep decides for anything this misses (a broker hiccup): robust, not fatal.
        transaction.on_commit(partial(_enqueue_intake, list(finding_ids)), robust=True)


@receiver(post_save, sender=Node, dispatch_uid="remediation-replacement-link")
def on_node_created(sender, instance, created, raw=False, **kwargs):
    if created and not raw and instance.pool_id is not None:
        from .services.replacement import replacement_link

        transaction.on_commit(partial(replacement_link, node_id=instance.pk), robust=True)


@receiver(post_save, sender=Pool, dispatch_uid="remediation-pool-settings")
def on_pool_created(sender, instance, created, raw=False, **kwargs):
    if created and not raw:
        from .models import CircuitBreaker, PoolRemediationSettings

        PoolRemediationSettings.objects.get_or_create(pool=instance)
        CircuitBreaker.objects.get_or_create(pool=instance, defaults={"scope": "pool"})


@receiver(post_save, sender=Site, dispatch_uid="remediation-site-breaker")
def on_site_created(sender, instance, created, raw=False, **kwargs):
    if created and not raw:
        from .models import CircuitBreaker

        CircuitBreaker.objects.get_or_create(site=instance, defaults={"scope": "site"})
