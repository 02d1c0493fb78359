"""The Xid policy table follows NVIDIA's whole catalog (fleet_agent.xid 2026.12-3): every code NVIDIA lists is
added, and the rows still as the previous catalog seeded them take the new entry (one new table version); rows an
operator changed stay as they are."""

from django.db import migrations

# The table as the previous catalog (2026.12-2) seeded it: rows still exactly like this take the new entry.
PREVIOUS = {
    13: {'meaning': 'graphics engine exception', 'severity': 'warning', 'action': 'restart_app', 'layer': 'application', 'escalation': 'check the application; repeated on one GPU → run diagnostics'},
    31: {'meaning': 'GPU memory page fault (MMU)', 'severity': 'warning', 'action': 'restart_app', 'layer': 'application', 'escalation': 'check the application; repeated → run diagnostics'},
    43: {'meaning': 'GPU stopped processing', 'severity': 'warning', 'action': 'restart_app', 'layer': 'application', 'escalation': 'usually the application; repeated → contact support'},
    45: {'meaning': 'preemptive cleanup after earlier errors', 'severity': 'info', 'action': 'ignore', 'layer': 'application', 'escalation': 'ignore on its own; act on the earlier Xid it follows'},
    46: {'meaning': 'GPU stopped processing (timeout)', 'severity': 'critical', 'action': 'reset_gpu', 'layer': 'gpu_driver', 'escalation': 'reset the GPU or reboot; repeated → hardware'},
    48: {'meaning': 'double-bit ECC error', 'severity': 'critical', 'action': 'reset_gpu', 'layer': 'hardware', 'escalation': 'reset the GPU or reboot; repeated → hardware'},
    61: {'meaning': 'internal micro-controller breakpoint', 'severity': 'critical', 'action': 'reset_gpu', 'layer': 'hardware', 'escalation': 'reset the GPU or reboot; repeated → contact support'},
    62: {'meaning': 'internal micro-controller halt', 'severity': 'critical', 'action': 'reset_gpu', 'layer': 'hardware', 'escalation': 'reset the GPU or reboot; repeated → contact support'},
    63: {'meaning': 'row-remap / page-retirement event', 'severity': 'warning', 'action': 'reset_gpu', 'layer': 'hardware', 'escalation': 'reset the GPU at a convenient time to activate the remap'},
    64: {'meaning': 'row-remap / page-retirement failure', 'severity': 'critical', 'action': 'reset_gpu', 'layer': 'hardware', 'escalation': 'reset the GPU; likely hardware'},
    74: {'meaning': 'NVLink error', 'severity': 'critical', 'action': 'reset_gpu', 'layer': 'hardware', 'escalation': 'reset the GPU; repeated → hardware'},
    79: {'meaning': 'GPU has fallen off the bus', 'severity': 'critical', 'action': 'reboot', 'layer': 'hardware', 'escalation': 'reboot the machine; repeated → hardware (RMA / replace the instance)'},
    92: {'meaning': 'high single-bit ECC error rate', 'severity': 'warning', 'action': 'watch', 'layer': 'hardware', 'escalation': 'watch the ECC counters'},
    94: {'meaning': 'contained ECC error', 'severity': 'warning', 'action': 'restart_app', 'layer': 'hardware', 'escalation': 'restart the application; the GPU stays usable'},
    95: {'meaning': 'uncontained ECC error', 'severity': 'critical', 'action': 'reset_gpu', 'layer': 'hardware', 'escalation': 'reset the GPU; repeated → hardware'},
    119: {'meaning': 'GSP RPC timeout', 'severity': 'critical', 'action': 'reset_gpu', 'layer': 'gpu_driver', 'escalation': 'reset the GPU; repeated → reboot, then hardware'},
    120: {'meaning': 'GSP error', 'severity': 'critical', 'action': 'reset_gpu', 'layer': 'gpu_driver', 'escalation': 'reset the GPU; repeated → reboot, then hardware'},
    136: {'meaning': 'link training failed', 'severity': 'critical', 'action': 'reset_gpu', 'layer': 'hardware', 'escalation': 'reset the GPU; investigate the link'},
    140: {'meaning': 'unrecovered ECC error', 'severity': 'critical', 'action': 'reset_gpu', 'layer': 'hardware', 'escalation': 'reset the GPU; repeated → contact support'},
    143: {'meaning': 'GPU initialisation failure', 'severity': 'critical', 'action': 'hardware', 'layer': 'hardware', 'escalation': 'take the GPU out of service for hardware inspection'},
    144: {'meaning': 'NVLink5 error', 'severity': 'critical', 'action': 'reset_gpu', 'layer': 'hardware', 'escalation': 'reset the GPU; repeated → hardware'},
    145: {'meaning': 'NVLink5 error', 'severity': 'critical', 'action': 'reset_gpu', 'layer': 'hardware', 'escalation': 'reset the GPU; repeated → hardware'},
    146: {'meaning': 'NVLink5 error', 'severity': 'critical', 'action': 'reset_gpu', 'layer': 'hardware', 'escalation': 'reset the GPU; repeated → hardware'},
    147: {'meaning': 'NVLink5 error', 'severity': 'critical', 'action': 'reset_gpu', 'layer': 'hardware', 'escalation': 'reset the GPU; repeated → hardware'},
    148: {'meaning': 'NVLink5 error', 'severity': 'critical', 'action': 'reset_gpu', 'layer': 'hardware', 'escalation': 'reset the GPU; repeated → hardware'},
    149: {'meaning': 'NVLink5 error', 'severity': 'critical', 'action': 'reset_gpu', 'layer': 'hardware', 'escalation': 'reset the GPU; repeated → hardware'},
    150: {'meaning': 'NVLink5 error', 'severity': 'critical', 'action': 'reset_gpu', 'layer': 'hardware', 'escalation': 'reset the GPU; repeated → hardware'},
    154: {'meaning': 'GPU recovery action changed (refers to another Xid)', 'severity': 'warning', 'action': 'follow_referenced', 'layer': 'hardware', 'escalation': 'follow the recovery action the message states'},
}


def forwards(apps, schema_editor):
    from fleet.health.xid_seed import refresh_xid_policies

    refresh_xid_policies(apps.get_model("health", "XidPolicy"), PREVIOUS)


class Migration(migrations.Migration):
    dependencies = [("health", "0007_finding_messages")]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
