"""Bulk actions from the lists: acknowledge / snooze many findings, cordon many nodes."""

from datetime import timedelta

import pytest
from django.utils import timezone

from fleet.remediation.models import Incident, Override
from tests.factories import NodeFactory
from tests.inventory.test_node_list import finding

pytestmark = pytest.mark.django_db


def test_bulk_snooze_is_all_or_nothing(operator_api, viewer_api):
    node = NodeFactory()
    findings = [finding(node, "xid"), finding(node, "cpu_steal")]
    body = {"findings": [f.pk for f in findings], "kind": "snooze", "reason": "provider is on it",
            "until": (timezone.now() + timedelta(hours=4)).isoformat()}
    assert viewer_api.post("/api/v1/overrides/bulk/", body, format="json").status_code == 403
    response = operator_api.post("/api/v1/overrides/bulk/", body, format="json")
    assert response.status_code == 201, response.content
    assert sorted(o["finding"] for o in response.json()) == sorted(f.pk for f in findings)
    too_late = {**body, "until": (timezone.now() + timedelta(days=90)).isoformat()}
    assert operator_api.post("/api/v1/overrides/bulk/", too_late, format="json").status_code == 400
    missing = operator_api.post("/api/v1/overrides/bulk/", {**body, "findings": [findings[0].pk, 999999]},
                                format="json")
    assert missing.status_code == 400 and "findings" in missing.json()["error"]["fields"]
    assert Override.objects.count() == 2


def test_bulk_acknowledge(operator_api):
    node = NodeFactory()
    findings = [finding(node, "xid"), finding(node, "sxid_fatal")]
    response = operator_api.post("/api/v1/overrides/bulk/", {"findings": [f.pk for f in findings],
                                                             "kind": "acknowledge", "reason": "seen"}, format="json")
    assert response.status_code == 201, response.content
    assert {o["kind"] for o in response.json()} == {"acknowledge"}


def test_bulk_cordon_opens_one_incident_per_node_and_lists_refusals(operator_api):
    first, second, retired = NodeFactory(hostname="a"), NodeFactory(hostname="b"), NodeFactory(hostname="r",
                                                                                              state="retired")
    body = {"nodes": [first.pk, second.pk, retired.pk], "workflow": "operator-cordon", "note": "bad rack"}
    response = operator_api.post("/api/v1/incidents/bulk/", body, format="json")
    assert response.status_code == 200, response.content
    result = response.json()
    assert sorted(i["node"] for i in result["opened"]) == [first.pk, second.pk]
    assert [(r["hostname"], r["code"]) for r in result["refused"]] == [("r", "node_retired")]
    again = operator_api.post("/api/v1/incidents/bulk/", {**body, "nodes": [first.pk]}, format="json").json()
    assert again["opened"] == [] and again["refused"][0]["code"] == "incident_exists"
    assert Incident.objects.count() == 2
