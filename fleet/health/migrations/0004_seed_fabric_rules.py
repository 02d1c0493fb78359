"""Add the GPU configuration and fabric rules (`fleet.health.rules.fabric`) to the catalog."""

from django.db import migrations


def seed(apps, schema_editor):
    from fleet.health.rules.catalog import sync_rule_rows

    sync_rule_rows(apps.get_model("health", "Rule"))


class Migration(migrations.Migration):
    dependencies = [("health", "0003_seed_host_rules")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
