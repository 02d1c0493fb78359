"""The findings list for triage and for integrators: severity order, provider name and support contact,
provider filter, search, incremental sync (`updated_after`, `resolved_after`)."""

from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from fleet.health.models import Finding, Rule
from fleet.health.services.evaluation import evaluate
from fleet.inventory.models import GPU
from tests.factories import NodeFactory, ProviderFactory
from tests.inventory.test_node_list import finding

from .factories import T0, healthy_node
from .harness import set_gpu

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
    # Factory rows are saved now (auto_now); give them the times the health cycle would have written.
    Finding.objects.filter(pk=stale.pk).update(updated_at=now - timedelta(days=3))
    Finding.objects.filter(pk=fresh.pk).update(updated_at=now - timedelta(minutes=5))
    Finding.objects.filter(pk=closed.pk).update(updated_at=now - timedelta(minutes=1))
    since = (now - timedelta(hours=1)).isoformat()
    assert sorted(_ids(viewer_api.get("/api/v1/findings/", {"updated_after": since}))) == sorted([fresh.pk, closed.pk])
    assert _ids(viewer_api.get("/api/v1/findings/", {"resolved_after": since})) == [closed.pk]
    assert stale.pk not in _ids(viewer_api.get("/api/v1/findings/", {"updated_after": since}))
    bad = viewer_api.get("/api/v1/findings/", {"updated_after": "yesterday"})
    assert bad.status_code == 400 and "updated_after" in bad.json()["error"]["fields"]


def _poll(api, cursor: str | None) -> tuple[dict[int, dict], str | None]:
    """One integrator poll: everything changed since `cursor`, and the next cursor (the largest updated_at)."""
    params = {"ordering": "updated_at", "page_size": 500}
    if cursor:
        params["updated_after"] = cursor
    response = api.get("/api/v1/findings/", params)
    assert response.status_code == 200, response.content
    rows = {row["id"]: row for row in response.json()["results"]}
    return rows, max((row["updated_at"] for row in rows.values()), default=cursor,
                     key=lambda value: datetime.fromisoformat(value.replace("Z", "+00:00")))


def test_an_integrator_polling_updated_after_sees_exactly_what_changed(viewer_api):
    """Through the health cycle itself: opened, rewritten and resolved findings come back; findings merely seen
    again by a cycle do not."""
    node = healthy_node()
    gpus = list(GPU.objects.filter(node=node).order_by("index"))
    for gpu in gpus[:3]:
        set_gpu(gpu, ecc_volatile_uncorrected=1)
    evaluate(now=T0)
    first, cursor = _poll(viewer_api, None)
    ecc = {f.gpu.index: f.pk for f in Finding.objects.filter(node=node, rule__slug="ecc_uncorrectable")}
    assert set(ecc) == {0, 1, 2} and set(ecc.values()) <= set(first)

    evaluate(now=T0 + timedelta(seconds=30))  # nothing changed: every finding is only seen again
    assert Finding.objects.get(pk=ecc[2]).last_seen == T0 + timedelta(seconds=30)
    assert _poll(viewer_api, cursor)[0] == {}

    set_gpu(gpus[0], ecc_volatile_uncorrected=5)  # content changes (count in the summary)
    set_gpu(gpus[1], ecc_volatile_uncorrected=0)  # clears: resolves after the clear-hold
    set_gpu(gpus[3], ecc_volatile_uncorrected=1)  # a new finding
    evaluate(now=T0 + timedelta(seconds=60))
    changed, cursor2 = _poll(viewer_api, cursor)
    new = Finding.objects.get(node=node, rule__slug="ecc_uncorrectable", gpu=gpus[3]).pk
    assert set(changed) == {ecc[0], new}
    assert changed[ecc[0]]["summary"] != first[ecc[0]]["summary"]

    hold = Rule.objects.get(slug="ecc_uncorrectable").clear_hold_s
    resolved_at = T0 + timedelta(seconds=60 + hold)
    evaluate(now=resolved_at)
    resolved, cursor3 = _poll(viewer_api, cursor2)
    assert set(resolved) == {ecc[1]} and resolved[ecc[1]]["state"] == "resolved"
    assert datetime.fromisoformat(cursor3.replace("Z", "+00:00")) == resolved_at
    assert _ids(viewer_api.get("/api/v1/findings/", {"resolved_after": cursor2})) == [ecc[1]]
    assert _ids(viewer_api.get("/api/v1/findings/", {"resolved_after": cursor3})) == []
    evaluate(now=resolved_at + timedelta(seconds=30))
    assert _poll(viewer_api, cursor3)[0] == {}


def test_preempted_spot_close_stamps_updated_at(db):
    from fleet.health.services.preemption import findings_close_for_preempted

    node = NodeFactory()
    notice = finding(node, "preemption_notice")
    later = timezone.now() + timedelta(minutes=5)
    assert findings_close_for_preempted(node_ids=[node.pk], record_ids=[1], now=later) == [notice.pk]
    assert Finding.objects.get(pk=notice.pk).updated_at == later


def test_the_migration_backfills_updated_at_from_the_latest_change(db):
    from importlib import import_module

    from django.apps import apps

    backfill = import_module("fleet.health.migrations.0006_finding_updated_at").backfill
    node = NodeFactory()
    now = timezone.now()
    still_open = finding(node, "xid", opened=now - timedelta(days=2))
    gone = finding(node, "cpu_steal", opened=now - timedelta(days=2), state="resolved")
    Finding.objects.filter(pk=still_open.pk).update(last_seen=now - timedelta(hours=1))
    Finding.objects.filter(pk=gone.pk).update(last_seen=now - timedelta(days=2), resolved_at=now - timedelta(days=1))
    backfill(apps, None)
    assert Finding.objects.get(pk=still_open.pk).updated_at == now - timedelta(hours=1)
    assert Finding.objects.get(pk=gone.pk).updated_at == now - timedelta(days=1)


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
