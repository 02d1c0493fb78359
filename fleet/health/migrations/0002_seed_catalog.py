"""Seed the rule catalog from the code definitions and the Xid policy table from `xid_seed` (version 1)."""

from django.db import migrations


def seed(apps, schema_editor):
    from fleet.health.rules.catalog import sync_rule_rows
    from fleet.health.xid_seed import seed_xid_policies

    sync_rule_rows(apps.get_model("health", "Rule"))
    seed_xid_policies(apps.get_model("health", "XidPolicy"))


class Migration(migrations.Migration):
    dependencies = [("health", "0001_initial")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
