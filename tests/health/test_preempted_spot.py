"""A spot node the cloud reclaimed: the notice opens a critical finding; once the node went silent after the
deadline and the preemption is recorded, that finding closes itself and the preemption record stays."""

from datetime import timedelta

import pytest
from django.utils import timezone

from fleet.billing.models import PreemptionRecord
from fleet.billing.services import preemption_on_node_silent, preemption_record_by_operator
from fleet.health.models import Finding
from fleet.health.services.evaluation import evaluate
from fleet.inventory.models import Node
from fleet.telemetry.models import NodeStatus
from tests.billing.test_services_preemptions import (
    DEADLINE,
    NOTICE_AT,
    _notice_event,
    _status,
    spot_node,  # noqa: F401 — the fixture
)
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _notice_findings(node, state="open"):
    return Finding.objects.filter(node=node, rule__slug="preemption_notice", state=state)


def test_reclaimed_spot_node_closes_its_deadline_finding(spot_node):  # noqa: F811
    _notice_event(spot_node)
    _status(spot_node, silent=False)
    evaluate(now=NOTICE_AT + timedelta(seconds=70))
    assert _notice_findings(spot_node).count() == 1

    # The node stops reporting; past the deadline the finding says so.
    NodeStatus.objects.filter(node=spot_node).update(silent=True, silent_since=NOTICE_AT + timedelta(seconds=90))
    after_deadline = DEADLINE + timedelta(seconds=60)
    evaluate(now=after_deadline)
    finding = _notice_findings(spot_node).get()
    assert "deadline passed" in finding.summary

    (record,) = preemption_on_node_silent(node_ids=[spot_node.pk], now=after_deadline)
    finding.refresh_from_db()
    assert finding.state == "resolved"
    assert finding.resolved_at == after_deadline
    assert f"preemption recorded (#{record.pk})" in finding.resolution
    # Later cycles, still inside the notice's window, do not open it again; the record stays.
    evaluate(now=after_deadline + timedelta(seconds=15))
    evaluate(now=after_deadline + timedelta(seconds=30))
    assert not _notice_findings(spot_node).exists()
    assert PreemptionRecord.objects.filter(node=spot_node).count() == 1
    assert Node.objects.get(pk=spot_node.pk).state == "preempted"


def test_operator_marking_preempted_closes_the_finding(spot_node):  # noqa: F811
    _notice_event(spot_node)
    _status(spot_node, silent=False)
    evaluate(now=NOTICE_AT + timedelta(seconds=70))
    assert _notice_findings(spot_node).count() == 1
    preemption_record_by_operator(node=spot_node, actor=UserFactory(), now=timezone.now())
    assert not _notice_findings(spot_node).exists()
    assert _notice_findings(spot_node, "resolved").count() == 1
