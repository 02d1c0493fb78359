import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from fleet.health.models import Rule

from .factories import EventFactory, healthy_node
from .harness import open_findings

pytestmark = pytest.mark.django_db


def test_health_evaluate_command_runs_one_cycle():
    node = healthy_node(at=timezone.now())
    EventFactory(node=node, kind="xid", code=79, at=timezone.now())
    Rule.objects.filter(slug="tcp_retransmits").delete()
    out = StringIO()
    call_command("health_evaluate", "--node", str(node.pk), "--sync-catalog", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0] == "rule catalog: 1 created, 0 refreshed"
    result = json.loads(lines[1])
    assert (result["nodes"], result["opened"]) == (1, 1)
    assert open_findings("xid", node).exists()
