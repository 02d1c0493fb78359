"""Cloud collector: DMI detection from fixture trees and each cloud's notice path against a fake metadata server."""

from __future__ import annotations

import http.client
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from fleet_agent.collectors import cloud as cloud_module
from fleet_agent.collectors.cloud import CloudCollector, NoticeWatcher, detect_cloud, read_dmi
from fleet_agent.collectors.cloud import aws as aws_module

try:
    from tests.agents.fake_metadata import (
        AWS_META,
        AWS_REBALANCE,
        AZURE_VM_NAME,
        GCP_MAINTENANCE,
        IDENTITY,
        NOTICE_PATHS,
        FakeMetadataServer,
        refused_url,
    )
except ImportError:  # tests/ is not a package: pytest put this directory on sys.path
    from fake_metadata import (
        AWS_META,
        AWS_REBALANCE,
        AZURE_VM_NAME,
        GCP_MAINTENANCE,
        IDENTITY,
        NOTICE_PATHS,
        FakeMetadataServer,
        refused_url,
    )

DMI = Path(__file__).parent / "fixtures" / "dmi"
TIMEOUT = 0.3
NOTICE_KEYS = {"kind", "deadline", "received_at", "source", "detail"}
IDENTITY_KEYS = {"provider", "instance_id", "instance_type", "region", "spot", "bare_metal"}


@pytest.fixture
def server_for():
    servers = []

    def start(cloud: str, **options) -> FakeMetadataServer:
        server = FakeMetadataServer(cloud, **options)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


def _collector(cloud: str, server: FakeMetadataServer, **kwargs) -> CloudCollector:
    return CloudCollector(sys_root=DMI / "baremetal", cloud=cloud, metadata_url=server.url, timeout=TIMEOUT, **kwargs)


def _parse(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


# --- DMI ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("tree", "expected"),
    [("aws", "aws"), ("aws-metal", "aws"), ("gcp", "gcp"), ("azure", "azure"), ("alibaba", "alibaba"),
     ("oracle", "oracle"), ("tencent", "tencent"), ("baremetal", None), ("hyperv-onprem", None),
     ("does-not-exist", None)],
)
def test_detect_cloud_from_dmi(tree, expected):
    assert detect_cloud(DMI / tree) == expected


def test_registry_lists_every_cloud_with_a_module_of_its_own():
    from fleet_agent.collectors.cloud.metadata import CloudBackend
    from fleet_agent.collectors.cloud.registry import CLOUDS

    assert list(CLOUDS) == ["aws", "gcp", "azure", "alibaba", "tencent"]
    for name, backend in CLOUDS.items():
        assert issubclass(backend, CloudBackend) and backend.name == name
        assert backend.__module__ == f"fleet_agent.collectors.cloud.{name}"
    assert cloud_module.DEFAULT_METADATA_URLS == {
        "aws": "http://169.254.169.254", "azure": "http://169.254.169.254", "gcp": "http://metadata.google.internal",
        "alibaba": "http://100.100.100.200", "tencent": "http://metadata.tencentyun.com"}


@pytest.mark.parametrize("tree", ["aws", "aws-metal", "gcp", "azure", "alibaba", "oracle", "tencent", "baremetal",
                                  "hyperv-onprem", "does-not-exist"])
def test_each_cloud_module_recognises_its_own_dmi_and_no_other(tree):
    from fleet_agent.collectors.cloud.registry import CLOUDS

    dmi = read_dmi(DMI / tree)
    matches = [name for name, backend in CLOUDS.items() if backend.detect(dmi)]
    assert matches == ([tree.removesuffix("-metal")] if tree.removesuffix("-metal") in CLOUDS else [])


def test_read_dmi_strips_and_tolerates_missing_files():
    assert read_dmi(DMI / "baremetal")["sys_vendor"] == "Supermicro"
    assert read_dmi(DMI / "does-not-exist") == dict.fromkeys(read_dmi(DMI / "aws"), "")


@pytest.mark.parametrize(("tree", "provider", "bare_metal"),
                         [("aws-metal", "aws", True), ("aws", "aws", False), ("gcp", "gcp", False),
                          ("oracle", "oracle", False), ("baremetal", None, True)])
def test_identity_without_metadata_service_comes_from_dmi(tree, provider, bare_metal, monkeypatch):
    # Point every default metadata URL at a closed local port: no traffic leaves the machine.
    closed = refused_url()
    monkeypatch.setattr(cloud_module, "DEFAULT_METADATA_URLS",
                        dict.fromkeys(cloud_module.DEFAULT_METADATA_URLS, closed))
    identity = CloudCollector(sys_root=DMI / tree, timeout=TIMEOUT).identity()
    assert set(identity) == IDENTITY_KEYS
    assert (identity["provider"], identity["bare_metal"]) == (provider, bare_metal)
    assert identity["instance_id"] is None and identity["spot"] is None and identity["region"] is None


def test_unknown_forced_cloud_is_rejected():
    with pytest.raises(ValueError, match="cloud must be one of"):
        CloudCollector(sys_root=DMI / "aws", cloud="ibm")


def test_forcing_none_skips_the_metadata_service(server_for):
    server = server_for("aws")
    collector = CloudCollector(sys_root=DMI / "aws", cloud="none", metadata_url=server.url, timeout=TIMEOUT)
    server.set_notice(action="terminate")
    assert collector.poll_notice() is None
    assert collector.identity()["provider"] is None
    assert server.requests == []


def test_bare_metal_never_talks_to_a_metadata_service(server_for):
    server = server_for("aws")
    collector = CloudCollector(sys_root=DMI / "baremetal", metadata_url=server.url, timeout=TIMEOUT)
    assert collector.poll_notice() is None
    assert collector.identity() == {"provider": None, "instance_id": None, "instance_type": None,
                                    "region": None, "spot": None, "bare_metal": True}
    assert server.requests == []


# --- no / slow / broken metadata service ----------------------------------------------------------
@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure", "alibaba", "tencent"])
def test_no_metadata_service_is_silent(cloud, caplog):
    collector = CloudCollector(sys_root=DMI / cloud, cloud=cloud, metadata_url=refused_url(), timeout=TIMEOUT)
    started = time.monotonic()
    with caplog.at_level("DEBUG", logger="fleet_agent.collectors.cloud"):
        assert collector.poll_notice() is None
        identity = collector.identity()
    assert time.monotonic() - started < 2
    assert identity["provider"] == cloud and identity["instance_id"] is None
    assert not [r for r in caplog.records if r.levelname in ("WARNING", "ERROR")]


def test_slow_metadata_service_times_out_to_no_notice(server_for):
    server = server_for("alibaba")
    server.set_notice(termination_time="2026-12-02T18:50:00Z")
    server.delay_s = 1.0
    collector = _collector("alibaba", server, )
    started = time.monotonic()
    assert collector.poll_notice() is None
    assert time.monotonic() - started < 0.9
    server.delay_s = 0.0
    assert collector.poll_notice()["kind"] == "terminate"


@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure", "alibaba", "tencent"])
def test_malformed_notice_is_no_notice_and_one_warning(cloud, server_for, caplog):
    server = server_for(cloud)
    server.set_malformed()
    collector = _collector(cloud, server)
    with caplog.at_level("WARNING", logger="fleet_agent.collectors.cloud"):
        assert collector.poll_notice() is None
        assert collector.poll_notice() is None
    assert len([r for r in caplog.records if r.levelname == "WARNING"]) == 1


@pytest.mark.parametrize(
    ("path", "body"),
    [(NOTICE_PATHS["aws"], '["terminate"]'), (NOTICE_PATHS["aws"], '{"action": "explode", "time": "x"}'),
     (NOTICE_PATHS["aws"], "")],
)
def test_aws_odd_instance_action_payloads(path, body, server_for):
    server = server_for("aws")
    server.set(path, body)
    assert _collector("aws", server).poll_notice() is None


def test_azure_document_without_events_list(server_for):
    server = server_for("azure")
    server.set("/metadata/scheduledevents", {"DocumentIncarnation": 3, "Events": "none"})
    assert _collector("azure", server).poll_notice() is None


def test_error_status_is_no_notice(server_for):
    server = server_for("tencent")
    server.set_status(NOTICE_PATHS["tencent"], 500, "internal error")
    assert _collector("tencent", server).poll_notice() is None


# --- AWS ------------------------------------------------------------------------------------------
def test_fake_aws_rejects_requests_without_a_token(server_for):
    server = server_for("aws")
    connection = http.client.HTTPConnection("127.0.0.1", int(server.url.rsplit(":", 1)[1]), timeout=TIMEOUT)
    connection.request("GET", AWS_META + "instance-id")
    assert connection.getresponse().status == 401
    connection.close()


def test_aws_identity_and_spot_notice_with_imdsv2(server_for):
    server = server_for("aws")
    collector = CloudCollector(sys_root=DMI / "aws", metadata_url=server.url, timeout=TIMEOUT)  # detected
    identity = collector.identity()
    assert identity == {"provider": "aws", **IDENTITY["aws"], "bare_metal": False}
    assert collector.poll_notice() is None

    server.set_notice(action="terminate", time="2026-12-02T18:47:00Z")
    notice = collector.poll_notice()
    assert set(notice) == NOTICE_KEYS
    assert (notice["kind"], notice["deadline"], notice["source"]) == (
        "terminate", "2026-12-02T18:47:00Z", "aws.spot.instance-action")
    assert notice["detail"] == {"action": "terminate", "time": "2026-12-02T18:47:00Z"}
    assert collector.poll_notice()["received_at"] == notice["received_at"]  # first sighting is kept

    server.set_notice(action="stop", time="2026-12-02T18:49:00+00:00")
    assert collector.poll_notice()["kind"] == "stop"
    server.set_notice(action="hibernate", time="2026-12-02T18:49:00Z")
    assert collector.poll_notice()["kind"] == "hibernate"
    server.clear_notice()
    assert collector.poll_notice() is None

    # One token for everything, sent on every read.
    puts = [r for r in server.requests if r["method"] == "PUT"]
    assert len(puts) == 1 and puts[0]["headers"]["X-aws-ec2-metadata-token-ttl-seconds"] == "21600"
    gets = [r for r in server.requests if r["method"] == "GET"]
    assert gets and all(r["headers"].get("X-aws-ec2-metadata-token") in server.tokens for r in gets)


def test_aws_rebalance_and_priority(server_for):
    server = server_for("aws")
    collector = _collector("aws", server)
    server.set_rebalance("2026-12-02T18:40:00Z")
    notice = collector.poll_notice()
    assert (notice["kind"], notice["deadline"], notice["source"]) == (
        "rebalance", None, "aws.events.recommendations.rebalance")
    assert notice["detail"] == {"noticeTime": "2026-12-02T18:40:00Z"}
    server.set_notice(action="terminate", time="2026-12-02T18:47:00Z")
    assert collector.poll_notice()["kind"] == "terminate"  # the interruption outranks the recommendation
    server.clear_notice()
    assert collector.poll_notice() is None
    assert server.requests_to(AWS_REBALANCE)


def test_aws_token_is_refreshed_before_expiry(server_for, monkeypatch):
    server = server_for("aws")
    collector = _collector("aws", server)
    collector.poll_notice()
    monkeypatch.setattr(aws_module, "AWS_TOKEN_REFRESH_MARGIN_S", aws_module.AWS_TOKEN_TTL_S + 1)
    collector.poll_notice()
    assert len([r for r in server.requests if r["method"] == "PUT"]) == 3  # one per read once "expiring"


def test_aws_revoked_token_is_replaced(server_for):
    server = server_for("aws")
    collector = _collector("aws", server)
    assert collector.poll_notice() is None
    server.tokens.clear()  # e.g. the instance was stopped and started
    server.set_notice(action="terminate", time="2026-12-02T18:47:00Z")
    assert collector.poll_notice()["kind"] == "terminate"
    assert len([r for r in server.requests if r["method"] == "PUT"]) == 2


def test_aws_falls_back_to_imdsv1(server_for):
    server = server_for("aws", imdsv1_only=True)
    collector = _collector("aws", server)
    server.set_notice(action="terminate", time="2026-12-02T18:47:00Z")
    assert collector.poll_notice()["kind"] == "terminate"
    assert collector.identity()["instance_id"] == IDENTITY["aws"]["instance_id"]
    puts = [r for r in server.requests if r["method"] == "PUT"]
    assert len(puts) == 1  # the refusal is remembered
    assert all("X-aws-ec2-metadata-token" not in r["headers"] for r in server.requests if r["method"] == "GET")


def test_aws_on_demand_and_metal(server_for):
    server = server_for("aws")
    server.set(AWS_META + "instance-life-cycle", "on-demand")
    server.set(AWS_META + "instance-type", "p4de.metal")
    identity = _collector("aws", server).identity()
    assert identity["spot"] is False and identity["bare_metal"] is True


def test_identity_is_cached_after_success(server_for):
    server = server_for("alibaba")
    collector = _collector("alibaba", server)
    first = collector.identity()
    count = len(server.requests)
    assert collector.identity() == first and len(server.requests) == count


# --- GCP ------------------------------------------------------------------------------------------
def test_gcp_identity(server_for):
    server = server_for("gcp")
    identity = _collector("gcp", server).identity()
    assert identity == {"provider": "gcp", "instance_id": "4520031799277581759", "instance_type": "a3-highgpu-8g",
                        "region": "us-central1", "spot": True, "bare_metal": False}
    assert all(r["headers"].get("Metadata-Flavor") == "Google" for r in server.requests)


def test_gcp_spot_falls_back_to_preemptible(server_for):
    server = server_for("gcp")
    server.remove("/computeMetadata/v1/instance/scheduling/provisioning-model")
    server.set("/computeMetadata/v1/instance/scheduling/preemptible", "FALSE")
    assert _collector("gcp", server).identity()["spot"] is False


def test_gcp_preempted_gives_a_30_second_deadline(server_for):
    server = server_for("gcp")
    collector = _collector("gcp", server)
    assert collector.poll_notice() is None
    server.set_notice(preempted=True)
    notice = collector.poll_notice()
    assert (notice["kind"], notice["source"], notice["detail"]) == ("preempt", "gcp.preempted",
                                                                    {"preempted": "TRUE"})
    assert _parse(notice["deadline"]) - _parse(notice["received_at"]) == timedelta(seconds=30)
    time.sleep(1.1)
    assert collector.poll_notice() == notice  # stable while it lasts: the deadline does not drift
    server.delay_s = 1.0
    assert collector.poll_notice() is None  # one missed poll (timeout) ...
    server.delay_s = 0.0
    assert collector.poll_notice() == notice  # ... does not restart the 30 s


@pytest.mark.parametrize("event", ["TERMINATE_ON_HOST_MAINTENANCE", "MIGRATE_ON_HOST_MAINTENANCE"])
def test_gcp_maintenance_event(event, server_for):
    server = server_for("gcp")
    collector = _collector("gcp", server)
    server.set_notice(maintenance_event=event)
    notice = collector.poll_notice()
    assert (notice["kind"], notice["deadline"], notice["source"]) == ("maintenance", None, "gcp.maintenance-event")
    assert notice["detail"] == {"maintenance-event": event}
    server.set_notice(preempted=True)
    assert collector.poll_notice()["kind"] == "preempt"
    server.clear_notice()
    assert collector.poll_notice() is None
    assert server.requests_to(GCP_MAINTENANCE)


# --- Azure ----------------------------------------------------------------------------------------
def test_azure_identity(server_for):
    server = server_for("azure")
    identity = _collector("azure", server).identity()
    assert identity == {"provider": "azure", **IDENTITY["azure"], "bare_metal": False}
    (request,) = server.requests
    assert request["query"] == "api-version=2021-02-01" and request["headers"]["Metadata"] == "true"


def test_azure_preempt_and_acknowledge(server_for):
    server = server_for("azure")
    collector = _collector("azure", server)
    assert collector.poll_notice() is None
    event_id = server.add_azure_event("Preempt", not_before="Wed, 02 Dec 2026 18:45:30 GMT")
    notice = collector.poll_notice()
    assert (notice["kind"], notice["deadline"], notice["source"]) == (
        "preempt", "2026-12-02T18:45:30Z", "azure.scheduledevents")
    assert notice["detail"]["EventId"] == event_id and notice["detail"]["EventType"] == "Preempt"
    assert "api-version=2020-07-01" in server.requests_to("/metadata/scheduledevents")[0]["query"]

    assert collector.acknowledge(event_id) is True
    assert server.acknowledged == [event_id]
    started = collector.poll_notice()  # NotBefore is blank once started: the known deadline stays
    assert started["detail"]["EventStatus"] == "Started"
    assert (started["deadline"], started["received_at"]) == (notice["deadline"], notice["received_at"])
    assert collector.acknowledge("00000000-0000-0000-0000-000000000000") is False


@pytest.mark.parametrize(("event_type", "kind"), [("Terminate", "terminate"), ("Reboot", "maintenance"),
                                                  ("Redeploy", "maintenance"), ("Freeze", "maintenance")])
def test_azure_event_types(event_type, kind, server_for):
    server = server_for("azure")
    server.add_azure_event(event_type, not_before="")
    notice = _collector("azure", server).poll_notice()
    assert (notice["kind"], notice["deadline"]) == (kind, None)


def test_azure_most_urgent_event_wins_and_other_vms_are_ignored(server_for):
    server = server_for("azure")
    collector = _collector("azure", server)
    collector.identity()  # learns this VM's name
    server.add_azure_event("Preempt", resources=["some-other-vm"])
    assert collector.poll_notice() is None
    server.add_azure_event("Freeze", resources=[AZURE_VM_NAME])
    server.add_azure_event("Terminate", resources=[AZURE_VM_NAME])
    assert collector.poll_notice()["kind"] == "terminate"


def test_acknowledge_is_azure_only(server_for):
    server = server_for("aws")
    assert _collector("aws", server).acknowledge("x") is False


# --- Alibaba Cloud and Tencent Cloud ---------------------------------------------------------------
def test_alibaba_termination_time(server_for):
    server = server_for("alibaba")
    collector = _collector("alibaba", server)
    assert collector.identity() == {"provider": "alibaba", **IDENTITY["alibaba"], "bare_metal": False}
    assert collector.poll_notice() is None
    server.set_notice(termination_time="2026-12-02T18:50:00Z")
    notice = collector.poll_notice()
    assert (notice["kind"], notice["deadline"], notice["source"]) == (
        "terminate", "2026-12-02T18:50:00Z", "alibaba.spot.termination-time")
    assert notice["detail"] == {"termination-time": "2026-12-02T18:50:00Z"}


def test_tencent_termination_time_is_utc_plus_8(server_for):
    server = server_for("tencent")
    collector = _collector("tencent", server)
    assert collector.identity() == {"provider": "tencent", **IDENTITY["tencent"], "bare_metal": False}
    server.set_notice(termination_time="2018-08-18 12:05:33")
    notice = collector.poll_notice()
    assert (notice["kind"], notice["deadline"], notice["source"]) == (
        "terminate", "2018-08-18T04:05:33Z", "tencent.spot.termination-time")
    server.set_notice(termination_time="2018-08-18 03:00:00")  # crosses midnight going back to UTC
    assert collector.poll_notice()["deadline"] == "2018-08-17T19:00:00Z"


# --- NoticeWatcher --------------------------------------------------------------------------------
def _wait_for(predicate, timeout=3.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def test_notice_watcher_calls_back_once_per_distinct_notice(server_for):
    server = server_for("aws")
    collector = _collector("aws", server)
    seen: list[dict] = []
    watcher = NoticeWatcher(collector, seen.append, interval_s=0.02)
    try:
        server.set_notice(action="terminate", time="2026-12-02T18:47:00Z")
        assert _wait_for(lambda: len(seen) == 1)
        polls = len(server.requests_to(NOTICE_PATHS["aws"]))
        assert _wait_for(lambda: len(server.requests_to(NOTICE_PATHS["aws"])) >= polls + 5)
        assert len(seen) == 1 and watcher.latest["kind"] == "terminate"

        server.set_notice(action="terminate", time="2026-12-02T18:48:00Z")  # a new deadline is news
        assert _wait_for(lambda: len(seen) == 2)
        assert [n["deadline"] for n in seen] == ["2026-12-02T18:47:00Z", "2026-12-02T18:48:00Z"]
        server.clear_notice()
        assert _wait_for(lambda: watcher.latest is None)
    finally:
        watcher.stop()
    assert not watcher._thread.is_alive()


def test_notice_watcher_survives_a_failing_callback(server_for, caplog):
    server = server_for("gcp")
    collector = _collector("gcp", server)
    calls: list[dict] = []

    def explode(notice):
        calls.append(notice)
        raise RuntimeError("delivery broke")

    with caplog.at_level("ERROR", logger="fleet_agent.collectors.cloud"):
        watcher = NoticeWatcher(collector, explode, interval_s=0.02)
        try:
            server.set_notice(maintenance_event="TERMINATE_ON_HOST_MAINTENANCE")
            assert _wait_for(lambda: len(calls) == 1)
            server.set_notice(preempted=True)
            assert _wait_for(lambda: len(calls) == 2)  # the thread kept polling
        finally:
            watcher.stop()
    assert [c["kind"] for c in calls] == ["maintenance", "preempt"]
    assert any("callback failed" in r.getMessage() for r in caplog.records)


def test_notice_watcher_interval_is_capped_and_stop_is_prompt():
    collector = CloudCollector(sys_root=DMI / "baremetal")
    watcher = NoticeWatcher(collector, lambda notice: None, interval_s=60, start=False)
    assert watcher.interval_s == 5.0
    watcher.start()
    watcher.start()  # idempotent
    started = time.monotonic()
    watcher.stop()
    assert time.monotonic() - started < 1 and not watcher._thread.is_alive()
    assert threading.active_count() >= 1
