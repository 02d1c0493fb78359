"""Reports from a node that lies or is broken (issue 11): other nodes' GPUs, poison values, unbounded writes."""

import gzip
import json
from datetime import UTC, datetime, timedelta

import jsonschema
import pytest
from django.utils import timezone

from fleet.inventory.models import GPU
from fleet.telemetry import metrics
from fleet.telemetry.models import (
    Event,
    GPUSample,
    GPUSampleRollup,
    GPUStatus,
    NodeSample,
    NodeSampleRollup,
    NodeStatus,
)
from fleet_agent.schema import definition_schema
from tests.telemetry.reports import ReportBuilder, assert_second_report_refused, gpu_entry

pytestmark = pytest.mark.django_db


def _counter(name: str, **labels) -> float:
    wanted = name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else "")
    for line in metrics.render().decode().splitlines():
        if line.startswith(wanted + " "):
            return float(line.split()[-1])
    return 0.0


def _event(kind="agent_error", **overrides):
    event = {"kind": kind, "at": datetime.now(UTC).isoformat().replace("+00:00", "Z"), "gpu_uuid": None,
             "pci_bus_id": None, "code": 79 if kind == "xid" else None,
             "severity": "critical" if kind == "xid" else "warning", "message": kind, "raw": ""}
    event.update(overrides)
    return event


# --- Item 2: a report naming another node's GPUs ---------------------------------------------------------------
@pytest.mark.parametrize("with_inventory", [True, False], ids=["inventory", "gpu-list-only"])
def test_a_node_cannot_take_another_nodes_gpus(enroll, with_inventory):
    victim = enroll("aaaaaaaaaaaaaaaa", "victim")
    attacker = enroll("bbbbbbbbbbbbbbbb", "attacker")
    victim_reports = ReportBuilder(victim.node_id, gpus=2)
    assert victim.send(victim_reports.report(with_inventory=True)).status_code == 200
    victim_gpus = {g.uuid: g.pk for g in GPU.objects.filter(node_id=victim.node_id)}
    samples_before = GPUSample.objects.filter(gpu_id__in=victim_gpus.values()).count()
    status_before = list(GPUStatus.objects.filter(node_id=victim.node_id).values_list("gpu_id", "collected_at"))

    builder = ReportBuilder(attacker.node_id, gpus=1)
    builder.gpus[0]["uuid"] = "GPU-attacker-own-0000-0000-000000000000"
    # gpu_entry(1) carries the victim's second uuid; the third entry names the victim's first GPU outright.
    builder.gpus += [gpu_entry(1), gpu_entry(2, uuid=victim_reports.gpus[0]["uuid"])]
    if not with_inventory:  # the attacker's own GPU gets its row first, so the claim rides on a plain report
        assert attacker.send(builder.report(with_inventory=True)).status_code == 200
        Event.objects.filter(node_id=attacker.node_id).delete()
    conflicts_before = _counter("fleet_agent_items_dropped_total", what="gpu_uuid_conflicts")
    response = attacker.send(builder.report(with_inventory=with_inventory))
    assert response.status_code == 200, response.content
    assert response.json()["dropped"]["gpu_uuid_conflicts"] == 2

    # The victim's inventory, status and history are untouched.
    assert {g.uuid: g.pk for g in GPU.objects.filter(node_id=victim.node_id)} == victim_gpus
    assert GPU.objects.filter(node_id=victim.node_id, present=True).count() == 2
    assert GPUSample.objects.filter(gpu_id__in=victim_gpus.values()).count() == samples_before
    assert list(GPUStatus.objects.filter(node_id=victim.node_id).values_list("gpu_id", "collected_at")) == \
        status_before
    # The attacker keeps its own GPU and its readings; the claim is an event an operator sees.
    assert list(GPU.objects.filter(node_id=attacker.node_id).values_list("uuid", flat=True)) == \
        ["GPU-attacker-own-0000-0000-000000000000"]
    conflicts = Event.objects.filter(node_id=attacker.node_id, kind="gpu_uuid_conflict")
    assert sorted(e.detail["gpu_uuid"] for e in conflicts) == sorted(victim_gpus)
    assert all(e.detail["owner_node_id"] == victim.node_id and "victim" in e.message for e in conflicts)
    assert _counter("fleet_agent_items_dropped_total", what="gpu_uuid_conflicts") == conflicts_before + 2

    # Repeating the claim is counted again but not recorded again.
    again = attacker.send(builder.report())
    assert again.json()["dropped"]["gpu_uuid_conflicts"] == 2
    assert conflicts.count() == 2
    assert GPU.objects.filter(node_id=victim.node_id).count() == 2


def test_an_event_cannot_be_pinned_on_another_nodes_gpu(enroll):
    victim = enroll("aaaaaaaaaaaaaaaa", "victim")
    attacker = enroll("bbbbbbbbbbbbbbbb", "attacker")
    victim_reports = ReportBuilder(victim.node_id, gpus=1)
    victim.send(victim_reports.report(with_inventory=True))
    builder = ReportBuilder(attacker.node_id, gpus=0)
    xid = _event("xid", gpu_uuid=victim_reports.gpus[0]["uuid"])
    assert attacker.send(builder.report(with_inventory=True, events=[xid])).status_code == 200
    stored = Event.objects.get(kind="xid")
    assert (stored.node_id, stored.gpu_id) == (attacker.node_id, None)


# --- Item 6: unbounded writes ------------------------------------------------------------------------------------
def test_events_over_the_per_report_limit_are_dropped_urgent_ones_kept_and_counted(enroll, settings):
    settings.AGENT_MAX_EVENTS_PER_REPORT = 5
    agent = enroll()
    builder = ReportBuilder(agent.node_id, gpus=1)
    events = [_event(message=f"noise {i}") for i in range(10)] + [_event("xid", message=f"xid {i}") for i in range(3)]
    before = _counter("fleet_agent_items_dropped_total", what="events")
    response = agent.send(builder.report(with_inventory=True, events=events))
    assert response.status_code == 200, response.content
    assert response.json()["dropped"] == {"events": 8, "gpus": 0, "gpu_uuid_conflicts": 0}
    jsonschema.validate(response.json(), definition_schema("batch_response"))  # the contract the agent reads
    stored = sorted(Event.objects.values_list("message", flat=True))
    assert stored == ["noise 0", "noise 1", "xid 0", "xid 1", "xid 2"]
    assert _counter("fleet_agent_items_dropped_total", what="events") == before + 8


def test_events_over_the_per_batch_limit_are_dropped(enroll, settings):
    settings.AGENT_MAX_EVENTS_PER_BATCH = 6
    agent = enroll()
    builder = ReportBuilder(agent.node_id, gpus=1)
    first = builder.report(with_inventory=True)
    reports = [builder.report(events=[_event(message=f"{n}.{i}") for i in range(4)]) for n in range(3)]
    reports[2]["events"][3] = _event("xid", message="late xid")
    body = agent.send(first, *reports).json()
    assert (body["accepted"], body["dropped"]["events"]) == (4, 6)
    assert Event.objects.count() == 6
    assert Event.objects.filter(message="late xid").exists()  # urgent first, wherever it is in the batch


def test_a_node_cannot_grow_past_its_gpu_limit(enroll, settings):
    settings.AGENT_MAX_GPUS_PER_NODE = 10
    agent = enroll()
    builder = ReportBuilder(agent.node_id, gpus=8)
    agent.send(builder.report(with_inventory=True))
    builder.gpus = [gpu_entry(i, uuid=f"GPU-phantom-{i:04d}-0000-0000-000000000000") for i in range(8)]
    response = agent.send(builder.report(with_inventory=True))
    assert response.json()["dropped"] == {"events": 0, "gpus": 6, "gpu_uuid_conflicts": 0}
    assert GPU.objects.filter(node_id=agent.node_id).count() == 10
    assert GPUSample.objects.filter(gpu__uuid__startswith="GPU-phantom").count() == 2
    # And a plain report naming yet more new GPUs does not create rows either.
    builder.gpus = [gpu_entry(i, uuid=f"GPU-more-{i:04d}-0000-0000-000000000000") for i in range(4)]
    assert agent.send(builder.report()).json()["dropped"]["gpus"] == 4
    assert GPU.objects.filter(node_id=agent.node_id).count() == 10


def test_a_report_within_the_limits_answers_without_dropped(enroll):
    agent = enroll()
    builder = ReportBuilder(agent.node_id, gpus=1)
    assert "dropped" not in agent.send(builder.report(with_inventory=True, events=[_event()])).json()


# --- Item 4a: poison values --------------------------------------------------------------------------------------
EDGE_EARLY = "0001-01-01T00:00:00+14:00"
EDGE_LATE = "9999-12-31T23:59:59-14:00"


def _notice(**overrides):
    notice = {"kind": "terminate", "deadline": None, "received_at": None, "source": "aws.spot.instance-action",
              "detail": {}}
    notice.update(overrides)
    return {"provider": "aws", "instance_id": "i-1", "instance_type": "p5.48xlarge", "region": "us-east-1",
            "spot": True, "bare_metal": False, "notice": notice}


def _deep(levels: int):
    value = "bottom"
    for _ in range(levels):
        value = {"next": value}
    return value


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda r: r.update(collected_at=EDGE_EARLY), "reports[1].collected_at"),
        (lambda r: r.update(collected_at=EDGE_LATE), "reports[1].collected_at"),
        (lambda r: r.update(collected_at="1970-01-01T00:00:00Z"), "reports[1].collected_at"),
        (lambda r: r.update(events=[_event(at=EDGE_EARLY)]), "reports[1].events[0].at"),
        (lambda r: r.update(cloud=_notice(deadline=EDGE_EARLY)), "reports[1].cloud.notice.deadline"),
        (lambda r: r.update(cloud=_notice(deadline="2026-02-30T00:00:00Z")), "reports[1].cloud.notice.deadline"),
        (lambda r: r.update(cloud=_notice(received_at=EDGE_LATE)), "reports[1].cloud.notice.received_at"),
        (lambda r: r["system"].update(load1=1e308), "reports[1].system.load1"),
        (lambda r: r["system"]["disks"][0].update(read_bytes_per_s=1e300), "reports[1].system.disks[0]"),
        (lambda r: r.update(checkpoint={"dirs": [], "newest_path": None, "newest_age_s": 1e308}),
         "reports[1].checkpoint.newest_age_s"),
        (lambda r: r.update(cloud=_notice(detail=_deep(7))), "reports[1].cloud.notice.detail"),
        (lambda r: r.update(sequence=2**53), "reports[1].sequence"),
    ],
)
def test_poison_values_are_400_naming_the_field_and_store_nothing(enroll, mutate, field):
    assert_second_report_refused(enroll(), mutate, field)


def test_nesting_deeper_than_the_json_parser_allows_is_400(enroll):
    agent = enroll()
    builder = ReportBuilder(agent.node_id, gpus=0)
    report = json.dumps(builder.report(with_inventory=True, cloud=_notice(detail={"x": "HOLE"})))
    body = '{"reports": [' + report.replace('"HOLE"', "[" * 5000 + "]" * 5000) + "]}"
    response = agent.client.generic("POST", "/api/v1/agent/reports", body, content_type="application/json")
    assert response.status_code == 400
    assert "JSON" in response.json()["error"]["message"]


def test_nul_characters_are_replaced_wherever_they_are(enroll):
    agent = enroll()
    builder = ReportBuilder(agent.node_id, gpus=1)
    builder.gpus[0]["name"] = "NVIDIA\u0000H100"
    report = builder.report(with_inventory=True, events=[_event("xid", message="bad\u0000line", raw="\u0000" * 10)],
                            cloud=_notice(detail={"key\u0000": ["v\u0000"]}, source="a\u0000b"))
    report["system"]["disks"][0]["name"] = "nvme\u00000n1"
    response = agent.send(report)
    assert response.status_code == 200, response.content
    event = Event.objects.get(kind="xid")
    assert (event.message, event.raw) == ("bad\ufffdline", "\ufffd" * 10)
    assert GPU.objects.get(node_id=agent.node_id).model == "NVIDIA\ufffdH100"
    status = NodeStatus.objects.get()
    assert status.system["disks"][0]["name"] == "nvme\ufffd0n1"
    assert status.cloud["notice"]["detail"] == {"key\ufffd": ["v\ufffd"]}
    assert "\u0000" not in json.dumps(status.cloud)


def test_integer_sums_beyond_64_bits_are_capped(enroll):
    agent = enroll()
    builder = ReportBuilder(agent.node_id, gpus=1)
    builder.gpus[0]["processes"] = [{"pid": i, "used_memory_bytes": 2**62, "name": "x"} for i in range(4)]
    builder.gpus[0]["retired_pages"] = {"count": 2**40, "pending": True}
    builder.gpus[0]["remapped_rows"] = {"correctable": 2**62, "uncorrectable": 2**33, "pending": False,
                                        "failure": False}
    assert agent.send(builder.report(with_inventory=True)).status_code == 200
    status = GPUStatus.objects.get()
    assert status.process_memory_bytes == 2**63 - 1
    assert (status.retired_pages_count, status.remapped_rows_correctable) == (2**40, 2**62)


def test_strings_as_long_as_the_schema_allows_are_stored(enroll):
    agent = enroll()
    builder = ReportBuilder(agent.node_id, gpus=1)
    builder.gpus[0].update(uuid="GPU-" + "u" * 92, name="n" * 256, pci_bus_id="p" * 64)
    event = _event("aer", pci_bus_id="q" * 64)
    stack = {"driver_version": "d" * 64, "python": "p" * 64, "container_runtime": "c" * 128,
             "nvidia_container_toolkit": "t" * 64, "os": "o" * 256, "kernel": "k" * 256}
    response = agent.send(builder.report(with_inventory=True, events=[event], stack=stack))
    assert response.status_code == 200, response.content
    gpu = GPU.objects.get(node_id=agent.node_id)
    assert (len(gpu.uuid), len(gpu.model), len(gpu.pci_bus_id)) == (96, 256, 64)
    assert len(Event.objects.get().pci_bus_id) == 64


def test_the_largest_sequence_is_accepted(enroll):
    agent = enroll()
    builder = ReportBuilder(agent.node_id, gpus=1)
    builder.sequence = 2**53 - 2
    body = agent.send(builder.report(with_inventory=True)).json()
    assert body["acked_sequence"] == 2**53 - 1


def test_non_finite_history_does_not_break_charts_or_rollups(enroll, viewer_api, history_days):
    """Rows stored before the schema bounded every number (load1 of 1e308 rolled up into Infinity)."""
    from fleet.telemetry.services.history import rollup_history

    agent = enroll()
    builder = ReportBuilder(agent.node_id, gpus=1)
    agent.send(builder.report(with_inventory=True))
    at = (timezone.now() - timedelta(minutes=20)).replace(second=0, microsecond=0)
    at -= timedelta(minutes=at.minute % 5)  # three minute rows in one 5-minute rollup bucket
    history_days(at)
    NodeSample.objects.create(node_id=agent.node_id, at=at, load1=float("inf"))
    NodeSample.objects.create(node_id=agent.node_id, at=at + timedelta(minutes=1), load1=1e308)
    NodeSample.objects.create(node_id=agent.node_id, at=at + timedelta(minutes=2), load1=1e308, samples=3)
    gpu = GPU.objects.get(node_id=agent.node_id)
    for minute in range(3):  # a float mean of these rounds up to 2**63, past the column
        GPUSample.objects.create(gpu=gpu, at=at + timedelta(minutes=minute), memory_used_bytes=2**63 - 1, samples=4)
    rollup_history(now=timezone.now())
    assert list(NodeSampleRollup.objects.values_list("load1", flat=True)) == [1e308]
    assert GPUSampleRollup.objects.get(gpu=gpu).memory_used_bytes == 2**63 - 1
    response = viewer_api.get(f"/api/v1/nodes/{agent.node_id}/series/",
                              {"metric": "load1", "start": (at - timedelta(minutes=1)).isoformat()})
    assert response.status_code == 200, response.content


# --- Item 13: gzip with trailing garbage, truncated gzip ---------------------------------------------------------
@pytest.mark.parametrize("damage", [lambda body: body + b"garbage", lambda body: body + gzip.compress(b"{}"),
                                    lambda body: body[:-6]], ids=["trailing-garbage", "second-member", "truncated"])
def test_gzip_that_is_not_exactly_one_stream_is_400(enroll, damage):
    agent = enroll()
    builder = ReportBuilder(agent.node_id, gpus=1)
    body = damage(gzip.compress(json.dumps({"reports": [builder.report(with_inventory=True)]}).encode()))
    response = agent.client.generic("POST", "/api/v1/agent/reports", body, content_type="application/json",
                                    HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 400, response.content
    assert "gzip" in response.json()["error"]["message"]
    assert NodeStatus.objects.count() == 0


def test_the_batch_envelope_is_the_agent_schemas(enroll):
    from fleet_agent.schema import batch_schema

    agent = enroll()
    builder = ReportBuilder(agent.node_id, gpus=0)
    response = agent.client.post("/api/v1/agent/reports", {"reports": [builder.report(with_inventory=True)],
                                                           "extra": 1}, format="json")
    assert response.status_code == 400
    assert "extra" in response.json()["error"]["fields"]
    limit = batch_schema()["$defs"]["batch"]["properties"]["reports"]["maxItems"]
    assert agent.send(*[builder.report() for _ in range(limit + 1)]).status_code == 413
