from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.db.models import Sum

from fleet.telemetry.models import GPUSample, GPUSampleRollup, NodeSample, NodeSampleRollup, NodeStatus
from fleet.telemetry.services.history import prune_history, rollup_history
from fleet.telemetry.services.silence import mark_silent_nodes
from tests.telemetry.reports import ReportBuilder

pytestmark = pytest.mark.django_db
# Inside the raw window (older reports keep no raw history), on a 5-minute boundary.
_NOW = datetime.now(UTC)
T0 = _NOW.replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)


def _feed(agent, builder, start, count, step_s=15, **kw):
    reports = []
    for i in range(count):
        report = builder.report(at=start + timedelta(seconds=i * step_s), with_inventory=builder.sequence == 0, **kw)
        report["system"]["cpu_busy_pct"] = float(i)
        for gpu in report["gpus"]:
            gpu["utilization_gpu_pct"] = 10 * (i % 10)
        reports.append(report)
    for chunk in range(0, len(reports), 50):
        assert agent.send(*reports[chunk:chunk + 50]).status_code == 200


def test_rollup_averages_five_minute_buckets_and_prune_keeps_rollups(enroll):
    agent = enroll()
    builder = ReportBuilder(agent.node_id, gpus=2)
    _feed(agent, builder, T0, 40)  # 10 minutes at 15 s
    rollup_history(now=T0 + timedelta(minutes=10, seconds=1))
    buckets = list(NodeSampleRollup.objects.order_by("bucket").values_list("bucket", "samples", "cpu_busy_pct"))
    assert buckets == [(T0, 20, sum(range(20)) / 20), (T0 + timedelta(minutes=5), 20, sum(range(20, 40)) / 20)]
    gpu_rollup = GPUSampleRollup.objects.order_by("bucket").first()
    assert gpu_rollup.utilization_gpu_pct_max == 90
    assert gpu_rollup.samples == 20

    # One row per minute (the default resolution), holding its four reports.
    assert NodeSample.objects.count() == 10
    assert NodeSample.objects.aggregate(n=Sum("samples"))["n"] == 40

    # PostgreSQL drops whole day partitions once the day ended more than the window (+1 h margin) ago.
    result = prune_history(now=T0 + timedelta(days=2, hours=2))
    if connection.vendor == "postgresql":
        assert result["node_sample_partitions"] >= 1 and result["gpu_sample_partitions"] >= 1
    else:
        assert result["node_samples"] == 10
    assert NodeSample.objects.count() == 0 and GPUSample.objects.count() == 0
    assert NodeSampleRollup.objects.count() == 2
    prune_history(now=T0 + timedelta(days=32))
    assert NodeSampleRollup.objects.count() == 0


def test_series_endpoint_steps_and_validates(enroll, viewer_api):
    agent = enroll()
    builder = ReportBuilder(agent.node_id, gpus=1)
    now = datetime.now(UTC).replace(second=0, microsecond=0)  # minute rows line up with the points
    _feed(agent, builder, now - timedelta(minutes=10), 40)
    start = (now - timedelta(minutes=10)).isoformat()
    response = viewer_api.get(f"/api/v1/nodes/{agent.node_id}/series/",
                              {"metric": ["cpu_busy_pct", "gpu_util_avg_pct"], "start": start, "step": 60})
    assert response.status_code == 200, response.content
    cpu, gpu = response.json()
    assert cpu["metric"] == "cpu_busy_pct" and cpu["source"] == "raw"
    assert len(cpu["points"]) == 10
    assert cpu["points"][0][1] == pytest.approx(1.5)  # samples 0..3 averaged
    bad = viewer_api.get(f"/api/v1/nodes/{agent.node_id}/series/", {"metric": "bogus"})
    assert bad.status_code == 400
    assert "metric" in bad.json()["error"]["fields"]
    gpu_id = builder.gpus[0]["uuid"]
    from fleet.inventory.models import GPU

    pk = GPU.objects.get(uuid=gpu_id).pk
    response = viewer_api.get(f"/api/v1/gpus/{pk}/series/", {"metric": "utilization_gpu_pct", "start": start})
    assert response.status_code == 200
    assert response.json()[0]["points"]


def test_silent_nodes_marked_and_cleared(enroll):
    agent = enroll()
    builder = ReportBuilder(agent.node_id)
    agent.send(builder.report(with_inventory=True))
    status = NodeStatus.objects.get()
    received = status.received_at
    assert mark_silent_nodes(now=received + timedelta(seconds=29))["silent"] == 0
    result = mark_silent_nodes(now=received + timedelta(seconds=31))
    assert result == {"silent": 1, "node_ids": [agent.node_id]}
    status.refresh_from_db()
    assert status.silent and status.silent_since is not None
    assert mark_silent_nodes(now=received + timedelta(seconds=60))["silent"] == 0  # no double marking
    agent.send(builder.report())
    status.refresh_from_db()
    assert status.silent is False and status.silent_since is None


def test_events_api_filters(enroll, viewer_api):
    agent = enroll()
    builder = ReportBuilder(agent.node_id)
    events = [
        {"kind": "xid", "at": "2026-12-02T10:00:00Z", "gpu_uuid": builder.gpus[2]["uuid"], "pci_bus_id": None,
         "code": 79, "severity": "critical", "message": "fell off the bus", "raw": "NVRM: Xid ..."},
        {"kind": "aer", "at": "2026-12-02T10:01:00Z", "gpu_uuid": None, "pci_bus_id": "0000:3b:00.0",
         "code": None, "severity": "info", "message": "corrected", "raw": "AER: Corrected error received"},
    ]
    agent.send(builder.report(with_inventory=True, events=events))
    body = viewer_api.get("/api/v1/events/", {"node": agent.node_id, "kind": "xid"}).json()
    assert body["count"] == 1
    assert body["results"][0]["gpu_index"] == 2
    assert viewer_api.get("/api/v1/events/", {"severity": "info"}).json()["count"] == 1
    assert viewer_api.get("/api/v1/events/", {"kind": "nonsense"}).status_code == 400


def test_status_and_changes_and_summary_endpoints(enroll, viewer_api):
    agent = enroll()
    builder = ReportBuilder(agent.node_id, gpus=2)
    assert viewer_api.get(f"/api/v1/nodes/{agent.node_id}/status/").status_code == 404
    agent.send(builder.report(with_inventory=True))
    agent.send(builder.report(with_inventory=True, stack={"driver_version": "560.1"}))
    status = viewer_api.get(f"/api/v1/nodes/{agent.node_id}/status/").json()
    assert [g["index"] for g in status["gpus"]] == [0, 1]
    assert status["gpus"][0]["utilization_gpu_pct"] == 90
    changes = viewer_api.get(f"/api/v1/nodes/{agent.node_id}/changes/").json()
    assert changes[0]["summary"] == "driver 550.54.15 → 560.1"
    summary = viewer_api.get("/api/v1/fleet/summary/").json()
    assert summary["nodes"] == 1 and summary["gpus"] == 2 and summary["reporting"] == 1
    assert summary["by_billing_mode"] == {"spot": 1}


def test_nodes_filter_by_silence(enroll, viewer_api):
    agent = enroll()
    builder = ReportBuilder(agent.node_id)
    agent.send(builder.report(with_inventory=True))
    NodeStatus.objects.update(silent=True)
    assert viewer_api.get("/api/v1/nodes/", {"silent": "true"}).json()["count"] == 1
    assert viewer_api.get("/api/v1/nodes/", {"silent": "false"}).json()["count"] == 0
