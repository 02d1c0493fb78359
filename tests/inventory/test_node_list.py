"""The nodes list as a triage list: worst open severity, open findings, who acts on the headline, last report,
GPUs seen / expected; `has_findings`; most severe first; by hostname; no query per row."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from fleet.health import choices as health_choices
from fleet.health.models import Finding, Rule
from fleet.inventory import selectors
from tests.factories import BaselineFactory, NodeFactory, PoolFactory
from tests.health.factories import NodeStatusFactory

pytestmark = pytest.mark.django_db


def finding(node, slug, *, severity=None, party="provider", opened=None, state="open"):
    rule = Rule.objects.get(slug=slug)
    opened = opened or timezone.now() - timedelta(hours=1)
    return Finding.objects.create(
        rule=rule, node=node, subject=f"node:{slug}:{Finding.objects.count()}", state=state, step=rule.step,
        layer=rule.layer, severity=severity or rule.severity, summary=f"{slug} on {node.hostname}",
        responsible_party=party, action_kind="provider_ticket", recommended_action="ticket", first_seen=opened,
        opened_at=opened, last_seen=opened, resolved_at=opened if state == "resolved" else None)


def test_selector_constants_match_the_health_app():
    assert selectors.OPEN_STATE == health_choices.FindingState.OPEN
    assert [s.value for s in health_choices.Severity] == selectors.SEVERITY_ORDER
    assert selectors.STEP_ORDER == health_choices.STEP_ORDER


def test_a_gpu_that_fell_off_the_bus_is_not_counted_seen(viewer_api):
    """NVML still counts a GPU that fell off the bus (its handle answers GPU_IS_LOST): 8 in the report, one of them
    lost, is 7 of 8 seen on the nodes list, not 8 of 8."""
    from tests.factories import GPUFactory
    from tests.health.factories import GPUStatusFactory

    node = NodeFactory(hostname="lost-one", expected_gpu_count=8)
    NodeStatusFactory(node=node, received_at=timezone.now(), gpu_count_seen=8, lost_gpus=["00000000:3B:00.0"])
    for index in range(8):
        GPUStatusFactory(gpu=GPUFactory(node=node, index=index), node=node, lost=index == 3)
    row = next(r for r in viewer_api.get("/api/v1/nodes/").json()["results"] if r["hostname"] == "lost-one")
    assert (row["gpus_seen"], row["gpus_expected"]) == (7, 8)


def test_triage_columns(viewer_api):
    now = timezone.now()
    sick = NodeFactory(hostname="sick", expected_gpu_count=8)
    NodeStatusFactory(node=sick, received_at=now, gpu_count_seen=7)
    # Step 4 critical (provider) and step 1 warning (us): the headline is step 1's, whatever the severity.
    finding(sick, "xid", party="provider", opened=now - timedelta(hours=3))
    finding(sick, "gpu_baseline_mismatch", party="us", opened=now - timedelta(hours=1))
    finding(sick, "tcp_retransmits", state="resolved")
    pool = PoolFactory(gpus_per_node=4)
    quiet = NodeFactory(hostname="quiet", pool=pool, expected_gpu_count=0)
    NodeStatusFactory(node=quiet, received_at=now - timedelta(hours=2), gpu_count_seen=4, interval_s=15)
    BaselineFactory(pool=pool, gpu_count=2, name="b")

    rows = {r["hostname"]: r for r in viewer_api.get("/api/v1/nodes/").json()["results"]}
    assert rows["sick"]["worst_severity"] == "critical"
    assert rows["sick"]["open_findings"] == 2
    assert rows["sick"]["headline_party"] == "us"
    assert rows["sick"]["gpus_seen"] == 7 and rows["sick"]["gpus_expected"] == 8
    assert rows["sick"]["silent"] is False
    assert rows["sick"]["last_report_at"] is not None
    assert rows["quiet"]["worst_severity"] is None and rows["quiet"]["open_findings"] == 0
    assert rows["quiet"]["headline_party"] is None
    assert rows["quiet"]["silent"] is True  # two hours without a report
    assert rows["quiet"]["gpus_expected"] == 2  # the pool's baseline pins 2, before the pool's 4 per node


def test_default_order_is_severity_then_longest_open(viewer_api):
    now = timezone.now()
    for name in ("a-healthy", "b-warning-new", "c-critical", "d-warning-old"):
        NodeFactory(hostname=name)
    nodes = {n.hostname: n for n in selectors.node_list()}
    finding(nodes["b-warning-new"], "tcp_retransmits", opened=now - timedelta(minutes=5))
    finding(nodes["d-warning-old"], "tcp_retransmits", opened=now - timedelta(hours=5))
    finding(nodes["c-critical"], "xid", opened=now - timedelta(minutes=1))
    order = [r["hostname"] for r in viewer_api.get("/api/v1/nodes/").json()["results"]]
    assert order == ["c-critical", "d-warning-old", "b-warning-new", "a-healthy"]
    reverse = [r["hostname"] for r in viewer_api.get("/api/v1/nodes/", {"ordering": "-severity,hostname"})
               .json()["results"]]
    assert reverse == ["a-healthy", "b-warning-new", "d-warning-old", "c-critical"]


def test_has_findings_filter(viewer_api):
    sick, healthy = NodeFactory(hostname="sick"), NodeFactory(hostname="healthy")
    finding(sick, "xid")
    finding(healthy, "xid", state="resolved")
    with_findings = viewer_api.get("/api/v1/nodes/", {"has_findings": "true"}).json()["results"]
    without = viewer_api.get("/api/v1/nodes/", {"has_findings": "false"}).json()["results"]
    assert [r["hostname"] for r in with_findings] == ["sick"]
    assert [r["hostname"] for r in without] == ["healthy"]


def test_query_count_does_not_grow_with_rows(viewer_api):
    def count(n_nodes):
        for _ in range(n_nodes):
            node = NodeFactory()
            NodeStatusFactory(node=node)
            finding(node, "xid")
        with CaptureQueriesContext(connection) as queries:
            assert viewer_api.get("/api/v1/nodes/").status_code == 200
        return len(queries)

    assert count(2) == count(20)


def test_by_hostname(viewer_api):
    node = NodeFactory(hostname="gpu-a.example")
    response = viewer_api.get("/api/v1/nodes/by-hostname/gpu-a.example/")
    assert response.status_code == 200 and response.json()["id"] == node.pk
    assert viewer_api.get("/api/v1/nodes/by-hostname/nope/").status_code == 404
    NodeFactory(hostname="twin")
    NodeFactory(hostname="twin")
    ambiguous = viewer_api.get("/api/v1/nodes/by-hostname/twin/")
    assert ambiguous.status_code == 409
    assert ambiguous.json()["error"]["code"] == "ambiguous_hostname"


def test_created_node_answers_without_triage_columns(operator_api):
    from tests.factories import ProviderFactory

    provider = ProviderFactory()
    response = operator_api.post("/api/v1/nodes/", {"hostname": "new", "provider": provider.pk,
                                                    "delivery_form": "cloud_dedicated"}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["worst_severity"] is None
    assert response.json()["last_report_at"] is None


def test_csv_export_of_nodes(viewer_api):
    import csv
    import io

    sick = NodeFactory(hostname="sick")
    NodeFactory(hostname="@fine")
    finding(sick, "xid")
    response = viewer_api.get("/api/v1/nodes/export/")
    assert response.status_code == 200, response.content
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [r["hostname"] for r in rows] == ["sick", "'@fine"]  # severity order; the formula-like name escaped
    assert rows[0]["worst_severity"] == "critical" and rows[0]["open_findings"] == "1"
    only = viewer_api.get("/api/v1/nodes/export/", {"has_findings": "false"})
    assert [r["hostname"] for r in csv.DictReader(io.StringIO(only.content.decode()))] == ["'@fine"]
