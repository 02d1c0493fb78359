"""DCGM diagnostics as gates: the `run_diagnostics` step goes into the shipped workflows an operator never edited
(level 1 after a reboot / GPU reset and on a replacement at enrolment, level 3 before an RMA or a provider's repair
closes), and the `job-failed-diagnostics` (level 2) and `enrolment-diagnostics` (level 1) workflows are added."""

from django.db import migrations


def gates(apps, schema_editor):
    from fleet.remediation.seed import add_diagnostic_gates

    add_diagnostic_gates(apps.get_model("remediation", "Workflow"))


class Migration(migrations.Migration):
    dependencies = [("remediation", "0002_seed")]

    operations = [migrations.RunPython(gates, migrations.RunPython.noop)]
