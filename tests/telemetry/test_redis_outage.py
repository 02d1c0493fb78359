"""Ingest needs only the database: with Redis (the cache behind flood protection) stopped, agents still enrol
and report, against a real redis-server the test stops (not a mock)."""

import pytest
from django.test import override_settings
from prometheus_client import REGISTRY
from rest_framework.test import APIClient

from fleet.telemetry.models import NodeSample
from tests.processes import RedisServer
from tests.telemetry.reports import ReportBuilder, stored_reports


@pytest.fixture
def redis_cache(tmp_path):
    with RedisServer(tmp_path / "redis") as server:
        cache = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": server.url,
                             "OPTIONS": {"socket_connect_timeout": 0.25, "socket_timeout": 0.25}}}
        with override_settings(CACHES=cache):
            yield server


def _unavailable(scope: str) -> float:
    return REGISTRY.get_sample_value("fleet_rate_limit_unavailable_total", {"scope": scope}) or 0.0


def test_enrolment_and_reports_go_on_while_redis_is_down(redis_cache, enrollment_token):
    client = APIClient()
    facts = {"machine_id": "0123456789abcdef", "hostname": "gpu-a", "gpu_count": 8}
    enrolled = client.post("/api/v1/agent/enroll", {"token": enrollment_token, "facts": facts}, format="json")
    assert enrolled.status_code == 201
    node_id = enrolled.json()["node_id"]
    client.credentials(HTTP_AUTHORIZATION=f"Node {enrolled.json()['credential']}")
    builder = ReportBuilder(node_id)
    assert client.post("/api/v1/agent/reports", {"reports": [builder.report(with_inventory=True)]},
                       format="json").status_code == 200
    agent_before, enroll_before = _unavailable("agent"), _unavailable("enroll")

    redis_cache.stop()
    response = client.post("/api/v1/agent/reports", {"reports": [builder.report()]}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["acked_sequence"] == 2
    assert stored_reports(NodeSample, node_id=node_id) == 2
    facts = {**facts, "machine_id": "fedcba9876543210", "hostname": "gpu-b"}
    another = APIClient().post("/api/v1/agent/enroll", {"token": enrollment_token, "facts": facts}, format="json")
    assert another.status_code == 201  # the enrolment throttle failed open too
    assert _unavailable("agent") == agent_before + 1
    assert _unavailable("enroll") == enroll_before + 1
