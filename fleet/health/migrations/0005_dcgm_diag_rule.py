"""Add the `dcgm_diag_failed` rule (DCGM active diagnostics) to the catalog; operators' values stay."""

from django.db import migrations


def sync(apps, schema_editor):
    from fleet.health.rules.catalog import sync_rule_rows

    sync_rule_rows(apps.get_model("health", "Rule"))


class Migration(migrations.Migration):
    dependencies = [("health", "0004_seed_fabric_rules")]

    operations = [migrations.RunPython(sync, migrations.RunPython.noop)]
