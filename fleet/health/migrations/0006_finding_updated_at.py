"""Findings get a real `updated_at` for incremental sync; existing rows take their latest known change."""

from django.db import migrations, models
from django.db.models import Case, F, When


def backfill(apps, schema_editor):
    # The best the old rows can say: resolved_at for a resolved finding, else last_seen (when the cycle last wrote
    # it). QuerySet.update() does not apply auto_now, so these values stay.
    Finding = apps.get_model("health", "Finding")
    Finding.objects.update(updated_at=Case(
        When(resolved_at__isnull=False, resolved_at__gt=F("last_seen"), then=F("resolved_at")),
        default=F("last_seen")))


class Migration(migrations.Migration):

    dependencies = [
        ('health', '0005_dcgm_diag_rule'),
    ]

    operations = [
        migrations.AddField(
            model_name='finding',
            name='updated_at',
            field=models.DateTimeField(auto_now=True, db_index=True, help_text='When the finding was opened, changed or resolved (not seen again)'),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=True),
    ]
