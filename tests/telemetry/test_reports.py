from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from fleet.inventory.models import GPU, Node
from fleet.telemetry.models import ChangeLogEntry, Event, GPUSample, GPUStatus, NodeSample, NodeStatus
from tests.telemetry.reports import ReportBuilder, assert_second_report_refused, stored_reports

pytestmark = pytest.mark.django_db
postgresql_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's two-round-trip path")

XID79 = ("[ 1234.567890] NVRM: Xid (PCI:0000:01:00): 79, pid=<unknown>, name=<unknown>, "
         "GPU has fallen off the bus.")


def test_first_report_stores_inventory_status_history(enroll):
    agent = enroll()
    builder = ReportBuilder(agent.node_id)
    response = agent.send(builder.report(with_inventory=True))
    assert response.status_code == 200, response.content
    assert response.json() == {"acked_sequence": 1, "agent_instance_id": builder.instance_id, "accepted": 1,
                               "duplicates": 0}
    node = Node.objects.get(pk=agent.node_id)
    assert node.gpus.count() == 8
    assert node.current_stack.driver_version == "550.54.15"
    status = NodeStatus.objects.get(node=node)
    assert status.cpu_busy_pct == 35.0
    assert status.disk_await_ms_max == 0.3
    assert GPUStatus.objects.filter(node=node).count() == 8
    gpu0 = GPUStatus.objects.get(gpu__index=0, node=node)
    assert gpu0.process_count == 1
    assert gpu0.pcie_gen_max == 5
    assert stored_reports(NodeSample, node=node) == 1
    assert stored_reports(GPUSample) == 8


def test_repeated_sequence_is_acknowledged_and_ignored(enroll):
    agent = enroll()
    builder = ReportBuilder(agent.node_id)
    first = builder.report(with_inventory=True)
    second = builder.report()
    assert agent.send(first, second).json()["acked_sequence"] == 2
    replay = agent.send(first, second)
    assert replay.status_code == 200
    assert replay.json() == {"acked_sequence": 2, "agent_instance_id": builder.instance_id, "accepted": 0,
                             "duplicates": 2}
    assert stored_reports(NodeSample) == 2
    # A batch that overlaps the acknowledged range stores only the new report.
    third = builder.report()
    body = agent.send(second, third).json()
    assert (body["accepted"], body["duplicates"], body["acked_sequence"]) == (1, 1, 3)
    assert stored_reports(NodeSample) == 3


def test_reinstalled_agent_starts_a_new_sequence_epoch(enroll):
    agent = enroll()
    old = ReportBuilder(agent.node_id)
    for _ in range(5):
        agent.send(old.report(with_inventory=old.sequence == 0))
    fresh = ReportBuilder(agent.node_id)  # new instance id, sequence starts at 1 again
    body = agent.send(fresh.report(with_inventory=True)).json()
    assert (body["accepted"], body["acked_sequence"]) == (1, 1)
    assert stored_reports(NodeSample) == 6


def test_gzip_body_is_accepted(enroll):
    agent = enroll()
    builder = ReportBuilder(agent.node_id)
    response = agent.send(builder.report(with_inventory=True), builder.report(), compress=True)
    assert response.status_code == 200
    assert response.json()["accepted"] == 2


def test_events_are_stored_with_gpu_attribution(enroll):
    agent = enroll()
    builder = ReportBuilder(agent.node_id)
    agent.send(builder.report(with_inventory=True))
    event = {"kind": "xid", "at": "2026-12-02T10:00:00Z", "gpu_uuid": None, "pci_bus_id": "00000000:01:00.0",
             "code": 79, "severity": "critical", "message": "GPU has fallen off the bus", "raw": XID79}
    assert agent.send(builder.report(events=[event])).status_code == 200
    stored = Event.objects.get()
    assert stored.gpu.index == 0
    assert stored.code == 79
    assert stored.raw == XID79


@pytest.mark.parametrize("bus_id", ["PCI:0000:02:00", "0000:02:00.0", "02:00.0", "00000000:02:00.0"])
def test_an_event_named_by_any_spelling_of_a_gpus_pci_address_is_attributed_to_it(enroll, bus_id):
    agent = enroll()
    builder = ReportBuilder(agent.node_id)
    agent.send(builder.report(with_inventory=True))
    event = {"kind": "aer", "at": "2026-12-02T10:00:00Z", "gpu_uuid": None, "pci_bus_id": bus_id, "code": None,
             "severity": "warning", "message": "PCIe AER corrected error", "raw": ""}
    assert agent.send(builder.report(events=[event])).status_code == 200
    stored = Event.objects.get()
    assert stored.gpu.index == 1  # the GPU at 00000000:02:00.0
    assert stored.pci_bus_id == bus_id  # the claim is kept as the node sent it


@pytest.mark.parametrize(("kind", "severity", "evaluated"), [
    ("xid", "critical", True), ("sxid", "warning", True), ("preemption_notice", "critical", True),
    ("rebalance", "warning", False), ("maintenance", "warning", False), ("aer", "critical", False),
])
def test_which_events_have_the_node_evaluated_at_once(enroll, monkeypatch, django_capture_on_commit_callbacks,
                                                      kind, severity, evaluated):
    """Every SXid (health judges fatality itself), never an advisory notice (no rule reads one)."""
    sent = []
    monkeypatch.setattr("fleet.core.failopen.current_app.send_task",
                        lambda name, kwargs, **options: sent.append(name))
    agent = enroll()
    builder = ReportBuilder(agent.node_id)
    agent.send(builder.report(with_inventory=True))
    event = {"kind": kind, "at": "2026-12-02T10:00:00Z", "gpu_uuid": None, "pci_bus_id": None, "code": None,
             "severity": severity, "message": kind, "raw": ""}
    with django_capture_on_commit_callbacks(execute=True):
        assert agent.send(builder.report(events=[event])).status_code == 200
    assert ("health.evaluate_nodes" in sent) is evaluated


def test_urgent_event_enqueues_evaluation_after_commit(enroll, monkeypatch, django_capture_on_commit_callbacks):
    sent = []
    monkeypatch.setattr("fleet.core.failopen.current_app.send_task",
                        lambda name, kwargs, **options: sent.append((name, kwargs)))
    agent = enroll()
    builder = ReportBuilder(agent.node_id)
    with django_capture_on_commit_callbacks(execute=True):
        agent.send(builder.report(with_inventory=True))
    assert sent == []
    event = {"kind": "gpu_lost", "at": "2026-12-02T10:00:00Z", "gpu_uuid": builder.gpus[3]["uuid"], "pci_bus_id": None,
             "code": None, "severity": "critical", "message": "GPU lost", "raw": ""}
    with django_capture_on_commit_callbacks(execute=True):
        agent.send(builder.report(events=[event]))
    assert sent == [("health.evaluate_nodes", {"node_ids": [agent.node_id]})]


def test_driver_upgrade_and_gpu_loss_are_in_the_change_log(enroll):
    agent = enroll()
    builder = ReportBuilder(agent.node_id)
    agent.send(builder.report(with_inventory=True))
    assert ChangeLogEntry.objects.count() == 0
    builder.gpus = builder.gpus[:7]
    agent.send(builder.report(with_inventory=True, stack={"driver_version": "560.28.03"}))
    summaries = set(ChangeLogEntry.objects.values_list("summary", flat=True))
    assert "driver 550.54.15 → 560.28.03" in summaries
    assert "GPU count 8 → 7" in summaries
    assert GPU.objects.filter(present=False).count() == 1
    assert Node.objects.get(pk=agent.node_id).stacks.count() == 2


def test_gpu_serial_replacement_is_logged(enroll):
    agent = enroll()
    builder = ReportBuilder(agent.node_id, gpus=2)
    agent.send(builder.report(with_inventory=True))
    builder.gpus[1] = {**builder.gpus[1], "uuid": "GPU-replaced-0000-0000-0000-000000000000", "serial": "SNNEW"}
    agent.send(builder.report(with_inventory=True))
    entry = ChangeLogEntry.objects.get(field="gpus[1].serial")
    assert (entry.old, entry.new) == ("SN000001", "SNNEW")


def test_node_cannot_report_for_another_node(enroll):
    agent_a = enroll("aaaaaaaaaaaaaaaa", "gpu-a")
    agent_b = enroll("bbbbbbbbbbbbbbbb", "gpu-b")
    builder = ReportBuilder(agent_b.node_id)
    response = agent_a.send(builder.report(with_inventory=True))
    assert response.status_code == 403
    assert NodeStatus.objects.count() == 0


def test_unknown_credential_is_401():
    from tests.telemetry.conftest import Agent

    assert Agent(1, "fn_nope").send({"sequence": 1}).status_code == 401


def test_user_token_cannot_post_reports(operator_api):
    assert operator_api.post("/api/v1/agent/reports", {"reports": []}, format="json").status_code in (401, 403)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda r: r["gpus"][1].update(utilization_gpu_pct=400), "reports[1].gpus[1].utilization_gpu_pct"),
        (lambda r: r["gpus"][0].update(temperature_c="hot"), "reports[1].gpus[0].temperature_c"),
        (lambda r: r.update(sequence=-3), "reports[1].sequence"),
        (lambda r: r["system"].update(cpu_busy_pct=-5), "reports[1].system.cpu_busy_pct"),
        (lambda r: r.update(collected_at=(datetime.now(UTC) + timedelta(days=2)).isoformat()),
         "reports[1].collected_at"),
        (lambda r: r.update(collected_at="yesterday"), "reports[1].collected_at"),
        # Beyond a 64-bit column: a clear 400, not a database error.
        (lambda r: r["gpus"][2].update(memory_used_bytes=2**70), "reports[1].gpus[2].memory_used_bytes"),
        (lambda r: r["gpus"][0]["ecc"].update(aggregate_corrected=2**63), "reports[1].gpus[0].ecc.aggregate_corrected"),
        (lambda r: r.update(sequence=2**63), "reports[1].sequence"),
    ],
)
def test_bad_values_are_400_naming_the_field_and_store_nothing(enroll, mutate, field):
    assert_second_report_refused(enroll(), mutate, field)


def test_unknown_major_version_is_400(enroll):
    agent = enroll()
    report = ReportBuilder(agent.node_id).report(with_inventory=True, schema_version="2.0")
    response = agent.send(report)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "unsupported_version"
    assert "2.0" in response.json()["error"]["message"] + str(response.json()["error"]["fields"])


def test_malformed_json_is_400(enroll):
    agent = enroll()
    response = agent.client.generic("POST", "/api/v1/agent/reports", b"{not json", content_type="application/json")
    assert response.status_code == 400
    assert "JSON" in response.json()["error"]["message"]


def test_oversize_body_is_413(enroll, settings):
    settings.AGENT_MAX_BODY_BYTES = 2000
    agent = enroll()
    builder = ReportBuilder(agent.node_id)
    response = agent.send(builder.report(with_inventory=True))
    assert response.status_code == 413
    assert NodeStatus.objects.count() == 0
    response = agent.send(builder.report(with_inventory=True), compress=True)  # a gzip bomb is measured decoded
    assert response.status_code == 413


def test_flooding_node_is_rate_limited(enroll, monkeypatch):
    from fleet.telemetry.api.views import NodeRateThrottle

    monkeypatch.setattr(NodeRateThrottle, "THROTTLE_RATES", {"agent": "3/min"})
    agent = enroll()
    builder = ReportBuilder(agent.node_id)
    codes = [agent.send(builder.report(with_inventory=True)).status_code for _ in range(5)]
    assert codes[:3] == [200, 200, 200]
    assert codes[3] == 429


def test_query_count_is_constant_per_batch(enroll, django_assert_max_num_queries):
    agent = enroll()
    builder = ReportBuilder(agent.node_id)
    agent.send(builder.report(with_inventory=True))
    with django_assert_max_num_queries(11):  # 9 statements + the test transaction's savepoint pair
        assert agent.send(*[builder.report() for _ in range(20)]).json()["accepted"] == 20


@postgresql_only
def test_steady_batch_on_postgresql_is_credential_gpu_map_and_one_statement(enroll, django_assert_num_queries):
    agent = enroll()
    builder = ReportBuilder(agent.node_id)
    agent.send(builder.report(with_inventory=True))
    with django_assert_num_queries(5) as captured:  # 3 + the test transaction's savepoint pair
        assert agent.send(builder.report(), builder.report()).json()["accepted"] == 2
    assert captured.captured_queries[-2]["sql"].startswith("WITH guard AS (UPDATE")
    assert stored_reports(NodeSample) == 3
    assert stored_reports(GPUSample) == 24


def test_replayed_and_overlapping_steady_batches_store_nothing_twice(enroll):
    agent = enroll()
    builder = ReportBuilder(agent.node_id)
    agent.send(builder.report(with_inventory=True))
    second, third, fourth = builder.report(), builder.report(), builder.report()
    assert agent.send(second, third).json()["accepted"] == 2
    assert agent.send(second, third).json() == {"acked_sequence": 3, "agent_instance_id": builder.instance_id,
                                                "accepted": 0, "duplicates": 2}
    body = agent.send(third, fourth).json()
    assert (body["accepted"], body["duplicates"], body["acked_sequence"]) == (1, 1, 4)
    assert stored_reports(NodeSample) == 4
    assert stored_reports(GPUSample) == 32
    assert NodeStatus.objects.get().sequence == 4


def test_a_sequence_repeated_inside_a_batch_is_stored_once(enroll):
    agent = enroll()
    builder = ReportBuilder(agent.node_id)
    first = builder.report(with_inventory=True)
    agent.send(first)
    second = builder.report()
    body = agent.send(second, dict(second)).json()
    assert (body["accepted"], body["duplicates"], body["acked_sequence"]) == (1, 1, 2)
    assert stored_reports(NodeSample) == 2
    assert stored_reports(GPUSample) == 16


def test_a_reported_gpu_without_a_row_gets_one(enroll):
    agent = enroll()
    builder = ReportBuilder(agent.node_id)
    agent.send(builder.report(with_inventory=True))
    GPU.objects.filter(node_id=agent.node_id, index=7).delete()
    assert agent.send(builder.report()).json()["accepted"] == 1
    assert GPUStatus.objects.filter(node_id=agent.node_id).count() == 8
    assert GPU.objects.filter(node_id=agent.node_id).count() == 8


@pytest.mark.django_db(transaction=True)
@postgresql_only
def test_gpu_row_deleted_after_the_map_was_read_falls_back_and_loses_nothing(enroll, monkeypatch, seeded_catalog):
    from fleet.core import rowsets

    agent = enroll()
    builder = ReportBuilder(agent.node_id)
    agent.send(builder.report(with_inventory=True))
    real_fetch_all = rowsets.fetch_all
    victim = GPU.objects.get(node_id=agent.node_id, index=3)

    def fetch_then_delete(sql, *params):  # the GPU row goes away between the map read and the write
        rows = real_fetch_all(sql, *params)
        if sql.startswith("SELECT uuid, id FROM") and GPU.objects.filter(pk=victim.pk).exists():
            GPU.objects.filter(pk=victim.pk).delete()
        return rows

    monkeypatch.setattr(rowsets, "fetch_all", fetch_then_delete)
    body = agent.send(builder.report()).json()
    assert (body["accepted"], body["acked_sequence"]) == (1, 2)
    assert stored_reports(NodeSample) == 2
    assert GPUStatus.objects.filter(node_id=agent.node_id).count() == 8  # the general path re-created the GPU
    assert GPU.objects.filter(node_id=agent.node_id, uuid=victim.uuid).exists()


def test_preemption_notice_is_recorded_by_billing_after_commit(enroll, monkeypatch,
                                                               django_capture_on_commit_callbacks):
    sent = []
    monkeypatch.setattr("fleet.core.failopen.current_app.send_task",
                        lambda name, kwargs, **options: sent.append((name, kwargs)))
    agent = enroll()
    builder = ReportBuilder(agent.node_id)
    agent.send(builder.report(with_inventory=True))
    notice = {"kind": "terminate", "deadline": "2026-12-02T10:02:00Z", "received_at": "2026-12-02T10:00:00Z",
              "source": "aws.spot.instance-action", "detail": {"action": "terminate"}}
    event = {"kind": "preemption_notice", "at": "2026-12-02T10:00:00Z", "gpu_uuid": None, "pci_bus_id": None,
             "code": None, "severity": "critical", "message": "spot interruption", "raw": "{}"}
    cloud = {"provider": "aws", "instance_id": "i-1", "instance_type": "p5.48xlarge", "region": "us-east-1",
             "spot": True, "bare_metal": False, "notice": notice}
    with django_capture_on_commit_callbacks(execute=True):
        assert agent.send(builder.report(events=[event], cloud=cloud)).status_code == 200
    stored = Event.objects.get(kind="preemption_notice")
    assert stored.detail["notice"]["deadline"] == "2026-12-02T10:02:00Z"
    assert sent == [("billing.record_preemption_notice", {"event_id": stored.pk}),
                    ("health.evaluate_nodes", {"node_ids": [agent.node_id]})]
    assert NodeStatus.objects.get().notice_kind == "terminate"


def test_reboot_is_logged_when_the_boot_id_changes(enroll):
    agent = enroll()
    builder = ReportBuilder(agent.node_id, gpus=1)
    agent.send(builder.report(with_inventory=True, boot_id="aaaaaaaa-1111"))
    agent.send(builder.report(with_inventory=True, boot_id="aaaaaaaa-1111", stack={"kernel": "6.1"}))
    assert not ChangeLogEntry.objects.filter(field="boot_id").exists()
    agent.send(builder.report(with_inventory=True, boot_id="bbbbbbbb-2222"))
    entry = ChangeLogEntry.objects.get(field="boot_id")
    assert (entry.old, entry.new) == ("aaaaaaaa-1111", "bbbbbbbb-2222")
    assert entry.summary.startswith("rebooted")
    assert NodeStatus.objects.get().boot_id == "bbbbbbbb-2222"


@pytest.mark.django_db(transaction=True)
@postgresql_only
def test_racing_copies_of_a_batch_are_stored_once(enroll, seeded_catalog):
    """An agent that times out and resends while the first request is still being served: both copies race on
    the epoch row; exactly one stores, the other is acknowledged as a duplicate."""
    import threading

    from django.db import connections

    from fleet.telemetry.services.ingest import reports_ingest
    from fleet.telemetry.validation import validate_batch

    agent = enroll()
    builder = ReportBuilder(agent.node_id)
    agent.send(builder.report(with_inventory=True))
    outcomes = []

    def post(reports, barrier):
        try:
            barrier.wait()
            result = reports_ingest(node_id=agent.node_id, reports=reports, now=datetime.now(UTC))
            outcomes.append((result.accepted, result.duplicates, result.acked_sequence))
        finally:
            connections.close_all()

    for _ in range(10):
        batch = validate_batch({"reports": [builder.report(), builder.report()]}, now=datetime.now(UTC))
        barrier = threading.Barrier(2)
        threads = [threading.Thread(target=post, args=(batch, barrier)) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        last = batch[-1]["sequence"]
        assert sorted(outcomes[-2:]) == [(0, 2, last), (2, 0, last)]
    assert stored_reports(NodeSample) == 1 + 20
    assert stored_reports(GPUSample) == 8 * 21


def test_inventory_temperature_thresholds_are_stored_and_served(enroll, viewer_api):
    agent = enroll()
    builder = ReportBuilder(agent.node_id, gpus=2)
    first = builder.report(with_inventory=True)
    first["inventory"]["gpus"][0]["temperature_thresholds"] = {"shutdown_c": 92, "slowdown_c": 89, "gpu_max_c": 87}
    first["inventory"]["gpus"][1]["temperature_thresholds"] = None  # a board without thresholds
    assert agent.send(first).status_code == 200
    gpu0, gpu1 = GPU.objects.filter(node_id=agent.node_id).order_by("index")
    assert (gpu0.temperature_slowdown_c, gpu0.temperature_shutdown_c, gpu0.temperature_max_operating_c) == (89, 92, 87)
    assert (gpu1.temperature_slowdown_c, gpu1.temperature_shutdown_c) == (None, None)
    status = viewer_api.get(f"/api/v1/nodes/{agent.node_id}/status/").json()
    assert [(g["temperature_slowdown_c"], g["temperature_shutdown_c"]) for g in status["gpus"]] == [(89, 92),
                                                                                                   (None, None)]
    listed = viewer_api.get("/api/v1/gpus/", {"node": agent.node_id}).json()["results"]
    assert listed[0]["temperature_slowdown_c"] == 89 and listed[0]["temperature_max_operating_c"] == 87
    # An agent that predates thresholds (no key) leaves them unknown; a threshold past the schema is refused.
    second = builder.report(with_inventory=True)
    assert agent.send(second).status_code == 200
    assert GPU.objects.get(pk=gpu0.pk).temperature_slowdown_c is None
    bad = builder.report(with_inventory=True)
    bad["inventory"]["gpus"][0]["temperature_thresholds"] = {"shutdown_c": 92, "slowdown_c": 500, "gpu_max_c": None}
    response = agent.send(bad)
    assert response.status_code == 400
    assert any("temperature_thresholds" in field for field in response.json()["error"]["fields"])
