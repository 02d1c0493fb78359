"""Add the host rules (rules/host.py) to the catalog: memory and data path, clock sync, peer memory, D state.

The same idempotent sync as 0002: rows for new definitions are created, operators' values on existing ones stay.
"""

from django.db import migrations


def seed(apps, schema_editor):
    from fleet.health.rules.catalog import sync_rule_rows

    sync_rule_rows(apps.get_model("health", "Rule"))


class Migration(migrations.Migration):
    dependencies = [("health", "0002_seed_catalog")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
