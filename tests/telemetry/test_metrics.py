import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from tests.telemetry.reports import ReportBuilder

pytestmark = pytest.mark.django_db


def _families(text: str) -> dict:
    return {family.name: family for family in text_string_to_metric_families(text)}


def test_metrics_parse_and_carry_gpu_and_node_gauges(enroll):
    agent = enroll(hostname="gpu-metrics")
    builder = ReportBuilder(agent.node_id, gpus=2)
    builder.gpus[1]["clock_event_reasons_mask"] = 0x40  # HW thermal slowdown
    agent.send(builder.report(with_inventory=True))
    response = Client().get("/metrics")
    assert response.status_code == 200
    families = _families(response.content.decode())
    util = {s.labels["gpu"]: s.value for s in families["fleet_gpu_utilization_percent"].samples}
    assert util == {"0": 90.0, "1": 90.0}
    throttled = {s.labels["gpu"]: s.value for s in families["fleet_gpu_throttled"].samples}
    assert throttled == {"0": 0.0, "1": 1.0}
    up = families["fleet_node_up"].samples[0]
    assert (up.labels["node"], up.value) == ("gpu-metrics", 1.0)
    assert families["fleet_reports_accepted"].samples[0].value >= 1
    assert "fleet_ingest_seconds" in families
    assert {s.labels["severity"] for s in families["fleet_findings_open"].samples} <= {"critical", "warning", "info"}
    assert "fleet_preemptions" in families


def test_metrics_bearer_token(settings):
    settings.METRICS_TOKEN = "s3cret-scrape"
    assert Client().get("/metrics").status_code == 401
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert Client().get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-scrape").status_code == 200


@pytest.mark.parametrize("header", ["s3cret-scrape", "Token s3cret-scrape", "Basic s3cret-scrape", "Bearer",
                                    "Bearer s3cret-scrapé"])
def test_metrics_token_needs_the_bearer_scheme(settings, header):
    settings.METRICS_TOKEN = "s3cret-scrape"
    response = Client().get("/metrics", HTTP_AUTHORIZATION=header)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"


def test_metrics_bearer_scheme_is_case_insensitive(settings):
    settings.METRICS_TOKEN = "s3cret-scrape"
    assert Client().get("/metrics", HTTP_AUTHORIZATION="bearer s3cret-scrape").status_code == 200
