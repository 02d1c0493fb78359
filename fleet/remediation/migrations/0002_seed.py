"""Seed the shipped workflows and policies (policy table version 1), give every pool its settings and every pool
and site its circuit breaker, and record findings already open as seen (installing remediation must not act on
old findings)."""

from django.db import migrations
from django.utils import timezone


def seed(apps, schema_editor):
    from fleet.remediation.seed import seed_remediation

    seed_remediation(apps.get_model("remediation", "Workflow"), apps.get_model("remediation", "RemediationPolicy"))
    Pool = apps.get_model("inventory", "Pool")
    Site = apps.get_model("inventory", "Site")
    Settings = apps.get_model("remediation", "PoolRemediationSettings")
    Breaker = apps.get_model("remediation", "CircuitBreaker")
    for pool in Pool.objects.all():
        Settings.objects.get_or_create(pool=pool)
        Breaker.objects.get_or_create(pool=pool, defaults={"scope": "pool"})
    for site in Site.objects.all():
        Breaker.objects.get_or_create(site=site, defaults={"scope": "site"})
    Finding = apps.get_model("health", "Finding")
    Intake = apps.get_model("remediation", "FindingIntake")
    now = timezone.now()
    Intake.objects.bulk_create(
        [Intake(finding_id=pk, decided_at=now, outcome="pre_existing", message="open before remediation was installed")
         for pk in Finding.objects.filter(state="open").values_list("pk", flat=True)], ignore_conflicts=True)


class Migration(migrations.Migration):
    dependencies = [("remediation", "0001_initial"), ("health", "0002_seed_catalog")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
