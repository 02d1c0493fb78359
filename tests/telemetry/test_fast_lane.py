"""The fast lane for a queued steady-state report (services/admission.py), against a real redis-server serving the
cache, the credential cache and the stream as production does (one Redis, append-only file): it answers what the
general path would answer with 200 in one round trip, counts the request in the same rate-limit window, and
leaves every other request (errors included) to the general path, which answers it exactly as before."""

import json
import uuid

import pytest
from django.core.cache import caches
from django.test import override_settings
from rest_framework.test import APIClient

from fleet.core import ratelimit
from fleet.telemetry.api import views
from fleet.telemetry.models import AgentEpoch, NodeSample, NodeStatus
from fleet.telemetry.services import admission, credentials, stream
from fleet.telemetry.services.writer import Writer
from tests.processes import RedisServer
from tests.telemetry.reports import ReportBuilder, gpu_entry, stored_reports

pytestmark = pytest.mark.django_db

XID79 = ("[ 1234.567890] NVRM: Xid (PCI:0000:01:00): 79, pid=<unknown>, name=<unknown>, "
         "GPU has fallen off the bus.")


def _reset():
    stream.redis_client.cache_clear()
    stream._registered.cache_clear()
    for dependency in (stream.stream_health, credentials.cache_health, ratelimit.store_health):
        dependency.reset()


@pytest.fixture
def one_redis(tmp_path):
    with RedisServer(tmp_path / "redis", aof=True) as server:
        cache = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": server.url,
                             "OPTIONS": {"socket_connect_timeout": 0.25, "socket_timeout": 0.25}}}
        with override_settings(CACHES=cache, INGEST_QUEUE=True, INGEST_QUEUE_URL=server.url,
                               INGEST_STREAM=f"test:{uuid.uuid4().hex[:8]}", AGENT_CREDENTIAL_CACHE_S=30,
                               INGEST_FAST_LANE=True):
            _reset()
            yield server
    _reset()


@pytest.fixture
def lane(monkeypatch):
    """Counts the requests the fast lane answered."""
    answered = []
    original = views._steady_report

    def spy(request):
        response = original(request)
        answered.append(response is not None)
        return response

    monkeypatch.setattr(views, "_steady_report", spy)
    return answered


def _started(agent) -> ReportBuilder:
    builder = ReportBuilder(agent.node_id)
    builder.gpus = [gpu_entry(i, uuid=f"GPU-{agent.node_id:08d}-aaaa-bbbb-cccc-{i:012d}") for i in range(8)]
    # An inventory: the general path, which also puts the credential in the cache.
    assert agent.send(builder.report(with_inventory=True)).status_code == 200
    return builder


def _window_count(node_id: int) -> int:
    keys = stream.redis_client().keys(f"*ratelimit:agent:{node_id}:*")
    return sum(int(stream.redis_client().get(k)) for k in keys)


def _drain() -> int:
    writer, handled = Writer(consumer="w1", block_ms=50), 0
    while (count := writer.step()):
        handled += count
    return handled


def test_a_steady_report_is_queued_by_the_fast_lane_and_stored_by_the_writer(one_redis, enroll, lane):
    agent = enroll()
    builder = _started(agent)
    assert lane == [False]  # the inventory report went the general path
    response = agent.send(builder.report(), builder.report())
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"acked_sequence": 3, "agent_instance_id": builder.instance_id, "accepted": 2,
                               "duplicates": 0, "queued": True}
    assert lane == [False, True]
    # Counted once per request in the same window as the general path counts in.
    assert _window_count(agent.node_id) == 2
    assert stream.redis_client().smembers(stream.node_key(agent.node_id))
    assert _drain() == 1
    assert NodeStatus.objects.get(node_id=agent.node_id).sequence == 3
    assert stored_reports(NodeSample, node_id=agent.node_id) == 3
    assert AgentEpoch.objects.get(node_id=agent.node_id).last_sequence == 3
    assert stream.stream_depth() == (0, 0)


def test_the_rate_limit_holds_across_both_paths(one_redis, enroll, lane, monkeypatch):
    monkeypatch.setattr(views.NodeRateThrottle, "THROTTLE_RATES", {"agent": "3/min"})
    agent = enroll()
    builder = _started(agent)  # 1 of 3
    codes = [agent.send(builder.report()) for _ in range(3)]
    assert [r.status_code for r in codes] == [200, 200, 429]
    assert codes[2].json()["error"]["code"] == "throttled" and codes[2].has_header("Retry-After")
    # Two answered by the fast lane; the third found the count at the limit and went the general path (429).
    assert lane == [False, True, True, False]
    assert _window_count(agent.node_id) == 4


def _answers(client, body: bytes):
    response = client.generic("POST", "/api/v1/agent/reports", body, content_type="application/json")
    return response.status_code, response.json(), response.get("WWW-Authenticate")


@pytest.mark.parametrize("case", ["invalid", "wrong_node", "malformed", "two_instances", "unknown_credential",
                                  "events", "not_a_batch", "over_django_limit"])
def test_what_the_fast_lane_does_not_answer_gets_the_general_paths_answer(one_redis, enroll, lane, case):
    agent = enroll()
    builder = _started(agent)
    report = builder.report()
    client = agent.client
    if case == "invalid":
        report["gpus"][0]["temperature_c"] = "hot"
    elif case == "wrong_node":
        report["node"]["node_id"] = agent.node_id + 1000
    elif case == "two_instances":
        other = builder.report()
        other["agent"]["instance_id"] = str(uuid.uuid4())
        report = [report, other]
    elif case == "unknown_credential":
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION="Node fn_not-a-credential")
    elif case == "events":
        report = builder.report(events=[{"kind": "xid", "at": report["collected_at"], "code": 79,
                                         "gpu_uuid": builder.gpus[0]["uuid"], "pci_bus_id": None,
                                         "severity": "critical", "message": XID79, "raw": XID79}])
    reports = report if isinstance(report, list) else [report]
    body = b"{not json" if case == "malformed" else json.dumps(
        reports if case == "not_a_batch" else {"reports": reports}).encode()
    limit = {"DATA_UPLOAD_MAX_MEMORY_SIZE": len(body) - 1} if case == "over_django_limit" else {}
    with override_settings(**limit):
        fast = _answers(client, body)
        with override_settings(INGEST_FAST_LANE=False):
            general = _answers(client, body)
    assert lane[1:] == [False, False]  # neither answered by the fast lane
    if case == "events":  # stored by the first; the second is a replay
        assert fast[0] == general[0] == 200 and general[1]["duplicates"] == 1
    else:
        assert fast == general
        assert fast[0] in (400, 401, 403, 413)


def test_redis_failing_under_the_fast_lane_leaves_the_request_to_the_general_path(one_redis, enroll, lane):
    agent = enroll()
    builder = _started(agent)
    one_redis.stop()
    response = agent.send(builder.report())
    assert response.status_code == 200, response.content
    assert "queued" not in response.json()  # written in the request
    assert NodeStatus.objects.get(node_id=agent.node_id).sequence == 2
    # The lane saw the failure and marked Redis down for all three uses: the general path did not wait on it again,
    # and the next request does not try the lane.
    assert not admission.available()
    assert agent.send(builder.report()).status_code == 200
    assert lane == [False, False, False]
    assert stored_reports(NodeSample, node_id=agent.node_id) == 3


def test_answer_hooks_ride_the_fast_lanes_answer(one_redis, enroll, lane, monkeypatch):
    seen = []

    def hook(*, node_id, signing_key, actions_open, reports, now):
        seen.append((node_id, actions_open, len(reports)))
        return {"actions": []}

    monkeypatch.setattr(views, "REPORT_ANSWER_HOOKS", [hook])
    agent = enroll()
    builder = _started(agent)
    response = agent.send(builder.report())
    assert lane == [False, True]
    assert response.json()["actions"] == [] and response.json()["queued"] is True
    assert seen[-1] == (agent.node_id, False, 1)


def test_the_lane_is_off_when_the_cache_is_another_redis(one_redis, tmp_path):
    assert admission.available()
    with override_settings(INGEST_QUEUE_URL=one_redis.url.replace("/0", "/1")):
        assert not admission.available()
    with override_settings(INGEST_FAST_LANE=False):
        assert not admission.available()
    assert caches["default"].get("nothing") is None
