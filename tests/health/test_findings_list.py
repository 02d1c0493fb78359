"""The findings list for triage and for integrators: severity order, provider name and support contact,
provider filter, search, incremental sync (`updated_after`, `resolved_after`)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.factories import NodeFactory, ProviderFactory
from tests.inventory.test_node_list import finding

pytestmark = pytest.mark.django_db


def _ids(response):
    assert response.status_code == 200, response.content
    return [row["id"] for row in response.json()["results"]]


def test_ordering_severity_follows_severity_order_not_the_alphabet(viewer_api):
    node = NodeFactory()
    info = finding(node, "tcp_retransmits", severity="info")
    critical = finding(node, "xid")
    warning = finding(node, "cpu_steal")
    assert _ids(viewer_api.get("/api/v1/findings/", {"ordering": "severity"})) == [critical.pk, warning.pk, info.pk]
    assert _ids(viewer_api.get("/api/v1/findings/", {"ordering": "-severity"})) == [info.pk, warning.pk, critical.pk]
    # Ties break by the next field given.
    older_critical = finding(node, "sxid_fatal", opened=timezone.now() - timedelta(days=2))
    assert _ids(viewer_api.get("/api/v1/findings/", {"ordering": "severity,opened_at"}))[:2] == \
        [older_critical.pk, critical.pk]


def test_provider_name_contact_and_filter(viewer_api):
    acme = ProviderFactory(name="Acme Cloud", slug="acme", support_contact="support@acme.example, +1 555 0100")
    other = ProviderFactory(name="Other", slug="other")
    mine = finding(NodeFactory(provider=acme, hostname="acme-1"), "xid")
    theirs = finding(NodeFactory(provider=other), "xid")
    row = viewer_api.get(f"/api/v1/findings/{mine.pk}/").json()
    assert row["provider_name"] == "Acme Cloud"
    assert row["provider_support_contact"] == "support@acme.example, +1 555 0100"
    assert _ids(viewer_api.get("/api/v1/findings/", {"provider": acme.pk})) == [mine.pk]
    assert _ids(viewer_api.get("/api/v1/findings/", {"provider_slug": "other"})) == [theirs.pk]
    assert _ids(viewer_api.get("/api/v1/findings/", {"search": "Acme"})) == [mine.pk]


def test_incremental_sync(viewer_api):
    now = timezone.now()
    node = NodeFactory()
    stale = finding(node, "xid", opened=now - timedelta(days=3))
    fresh = finding(node, "cpu_steal", opened=now - timedelta(minutes=5))
    closed = finding(node, "tcp_retransmits", opened=now - timedelta(days=3))
    closed.state, closed.resolved_at = "resolved", now - timedelta(minutes=1)
    closed.save()
    since = (now - timedelta(hours=1)).isoformat()
    assert sorted(_ids(viewer_api.get("/api/v1/findings/", {"updated_after": since}))) == sorted([fresh.pk, closed.pk])
    assert _ids(viewer_api.get("/api/v1/findings/", {"resolved_after": since})) == [closed.pk]
    assert stale.pk not in _ids(viewer_api.get("/api/v1/findings/", {"updated_after": since}))
    bad = viewer_api.get("/api/v1/findings/", {"updated_after": "yesterday"})
    assert bad.status_code == 400 and "updated_after" in bad.json()["error"]["fields"]


def test_comma_lists_on_findings(viewer_api):
    node = NodeFactory()
    critical, warning = finding(node, "xid"), finding(node, "cpu_steal")
    finding(node, "tcp_retransmits", severity="info")
    assert sorted(_ids(viewer_api.get("/api/v1/findings/", {"severity": "critical,warning"}))) == \
        sorted([critical.pk, warning.pk])


def test_findings_metric_carries_routing_labels(db):
    from django.test import Client
    from prometheus_client.parser import text_string_to_metric_families

    acme = ProviderFactory(name="Acme Cloud", slug="acme")
    node = NodeFactory(provider=acme, hostname="gpu-7")
    finding(node, "xid", party="provider")
    finding(node, "sxid_fatal", party="provider")
    finding(node, "cpu_steal", party="us")
    finding(node, "tcp_retransmits", party="us", state="resolved")
    families = {f.name: f for f in text_string_to_metric_families(Client().get("/metrics").content.decode())}
    routed = {(s.labels["node"], s.labels["step"], s.labels["responsible_party"], s.labels["provider"],
               s.labels["severity"]): s.value for s in families["fleet_findings_open"].samples}
    assert routed == {("gpu-7", "platform_hardware", "provider", "Acme Cloud", "critical"): 2.0,
                      ("gpu-7", "platform_hardware", "us", "Acme Cloud", "warning"): 1.0}
    totals = {s.labels["severity"]: s.value for s in families["fleet_findings_open_by_severity"].samples}
    assert totals == {"critical": 2.0, "warning": 1.0, "info": 0.0}


def test_csv_export_of_findings_is_filtered_ordered_and_escaped(viewer_api):
    import csv
    import io

    node = NodeFactory(hostname="=HYPERLINK(\"http://evil.example\")")
    finding(node, "cpu_steal")
    finding(node, "xid")
    finding(NodeFactory(), "tcp_retransmits", state="resolved")
    response = viewer_api.get("/api/v1/findings/export/", {"state": "open", "ordering": "severity"})
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"].startswith('attachment; filename="findings-')
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["severity"] for r in rows] == ["critical", "warning"]
    assert rows[0]["hostname"] == "'=HYPERLINK(\"http://evil.example\")"
    bad = viewer_api.get("/api/v1/findings/export/", {"colour": "red"})
    assert bad.status_code == 400 and bad["Content-Type"].startswith("application/json")
    assert "colour" in bad.json()["error"]["fields"]


@pytest.mark.parametrize("url", ["/api/v1/findings/export/", "/api/v1/nodes/export/"])
def test_csv_export_with_an_unknown_format_is_a_json_404(viewer_api, url):
    response = viewer_api.get(url, {"format": "xlsx"})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
