"""Add the `storage_d_state` rule (GPU jobs stuck on storage, told apart from a wedged driver by their wait
channel) to the catalog; operators' values stay."""

from django.db import migrations


def sync(apps, schema_editor):
    from fleet.health.rules.catalog import sync_rule_rows

    sync_rule_rows(apps.get_model("health", "Rule"))


class Migration(migrations.Migration):
    dependencies = [("health", "0008_xid_catalog_complete")]

    operations = [migrations.RunPython(sync, migrations.RunPython.noop)]
