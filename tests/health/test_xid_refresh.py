"""A table seeded from the earlier catalog (27 codes) is brought up to NVIDIA's whole catalog by migration 0008:
missing codes are added, rows still as they were seeded take the new entry, rows an operator changed stay."""

import importlib

import pytest

from fleet.health.models import XidPolicy
from fleet.health.xid_seed import refresh_xid_policies
from fleet_agent.xid import XID_CATALOG

pytestmark = pytest.mark.django_db

PREVIOUS = importlib.import_module("fleet.health.migrations.0008_xid_catalog_complete").PREVIOUS


def test_the_earlier_seed_is_brought_up_to_the_catalog_and_operators_edits_stay():
    XidPolicy.objects.all().delete()
    for code, fields in PREVIOUS.items():
        XidPolicy.objects.create(code=code, changed_in_version=1, **fields)
    XidPolicy.objects.filter(code=92).update(severity="critical", action="reset_gpu", changed_in_version=2)

    written = refresh_xid_policies(XidPolicy, PREVIOUS)

    assert set(XidPolicy.objects.values_list("code", flat=True)) == set(XID_CATALOG)
    xid63 = XidPolicy.objects.get(code=63)  # was "reset the GPU" (seeded, unchanged): now NVIDIA's IGNORE
    assert (xid63.action, xid63.severity, xid63.changed_in_version) == ("ignore", "info", 3)
    assert XidPolicy.objects.get(code=143).action == "reset_gpu"
    xid92 = XidPolicy.objects.get(code=92)  # the operator's edit stays
    assert (xid92.severity, xid92.action, xid92.changed_in_version) == ("critical", "reset_gpu", 2)
    assert XidPolicy.objects.get(code=109).changed_in_version == 3  # new codes arrive in the new version
    assert XidPolicy.objects.get(code=79).changed_in_version == 1  # unchanged entries keep theirs
    assert written == len(XID_CATALOG) - len(PREVIOUS) + sum(
        1 for code, fields in PREVIOUS.items() if code != 92 and any(
            fields[name] != XID_CATALOG[code][name] for name in fields))
    assert refresh_xid_policies(XidPolicy, PREVIOUS) == 0  # a second run changes nothing
