"""Fuzz the agent endpoint with reports generated from the agent's JSON Schema: no input may give a 500.

Each example is a batch of one or two generated reports, posted like the agent does (sometimes gzip), from a node
whose GPUs partly collide with another node's. A 200 must be a well-formed acknowledgement, and what it stored
must read back through the status, events and series endpoints without a server error. Deterministic
(derandomize), so CI sees the same examples every run.
"""

import gzip
import itertools
import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from fleet.telemetry.api.views import NodeRateThrottle
from fleet.telemetry.selectors import NODE_METRICS
from fleet.telemetry.services.history import rollup_history
from tests.telemetry.reports import ReportBuilder
from tests.telemetry.schema_strategies import report_strategy

pytestmark = pytest.mark.django_db

NOW = datetime.now(UTC)
EXAMPLES = 100
INSIDE = report_strategy(now=NOW)
OUTSIDE = report_strategy(now=NOW, nasty=0.01)


@pytest.fixture
def fleet(enroll, monkeypatch, viewer_api):
    monkeypatch.setattr(NodeRateThrottle, "allow_request", lambda self, request, view: True)
    owner = enroll("aaaaaaaaaaaaaaaa", "owner")
    owner_reports = ReportBuilder(owner.node_id, gpus=2)
    assert owner.send(owner_reports.report(with_inventory=True)).status_code == 200
    agent = enroll("bbbbbbbbbbbbbbbb", "fuzzed")
    yield {"agent": agent, "taken": [g["uuid"] for g in owner_reports.gpus], "viewer": viewer_api,
           "sequence": itertools.count(1), "instance": str(uuid.uuid4())}
    # Whatever the examples stored must also roll up and chart from the rollups.
    rollup_history(now=NOW + timedelta(hours=1))
    response = viewer_api.get(f"/api/v1/nodes/{agent.node_id}/series/", {
        "metric": NODE_METRICS, "start": (NOW - timedelta(days=8)).isoformat(),
        "end": (NOW + timedelta(hours=1)).isoformat(), "step": 3600})
    assert response.status_code == 200, response.content[:2000]


def _aim(report: dict, fleet: dict, draw) -> dict:
    """Point a generated report at the fuzzed node so it gets past identity and replay checks into storage (all
    but one time in twenty for each: Hypothesis favours the ends of a range, hence the middle value)."""
    if not isinstance(report, dict):
        return report
    if isinstance(report.get("node"), dict) and draw(st.integers(0, 19)) != 10:
        report["node"]["node_id"] = draw(st.sampled_from([fleet["agent"].node_id, None]))
    if isinstance(report.get("agent"), dict) and draw(st.integers(0, 19)) != 10:
        report["agent"]["instance_id"] = fleet["instance"]
    if draw(st.integers(0, 19)) != 10:
        report["sequence"] = next(fleet["sequence"])
    for gpu in report.get("gpus") or []:
        if isinstance(gpu, dict) and draw(st.integers(0, 3)) == 2:
            gpu["uuid"] = draw(st.sampled_from(fleet["taken"]))  # another node's GPU
    return report


@settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(data=st.data())
def test_generated_reports_never_get_a_server_error(fleet, data):
    count = data.draw(st.integers(1, 2), label="reports")
    # Mostly reports the schema allows (they must be stored or refused cleanly); one in four with values just
    # outside it (they must be a 400 naming the field).
    strategy = OUTSIDE if 5 <= data.draw(st.integers(0, 19), label="outside the schema") < 10 else INSIDE
    reports = [_aim(data.draw(strategy, label=f"report {i}"), fleet, data.draw) for i in range(count)]
    body = json.dumps({"reports": reports}).encode()
    headers = {}
    if data.draw(st.booleans(), label="gzip"):
        body, headers = gzip.compress(body), {"HTTP_CONTENT_ENCODING": "gzip"}
    agent = fleet["agent"]
    response = agent.client.generic("POST", "/api/v1/agent/reports", body, content_type="application/json",
                                    **headers)
    assert response.status_code < 500, response.content[:2000]
    event(f"status {response.status_code}")
    answer = response.json()
    if response.status_code != 200:
        assert set(answer["error"]) == {"code", "message", "fields"}
        return
    assert {"acked_sequence", "agent_instance_id", "accepted", "duplicates"} <= set(answer)
    viewer = fleet["viewer"]
    for url, query in ((f"/api/v1/nodes/{agent.node_id}/status/", {}),
                       ("/api/v1/events/", {"node": agent.node_id}),
                       (f"/api/v1/nodes/{agent.node_id}/series/",
                        {"metric": NODE_METRICS, "start": (NOW - timedelta(hours=23)).isoformat(),
                         "end": (NOW + timedelta(hours=1)).isoformat(), "step": 60})):
        read = viewer.get(url, query)
        assert read.status_code < 500, (url, read.content[:2000])
