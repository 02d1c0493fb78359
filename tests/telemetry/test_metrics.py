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


def test_the_writers_counters_reach_metrics_through_the_shared_multiprocess_folder(tmp_path):
    """Separate processes (a writer, a web worker) sharing PROMETHEUS_MULTIPROC_DIR: the web's /metrics carries the
    writer's counters, summed, and each process's files are named by host and pid (containers share the folder)."""
    import os
    import socket
    import subprocess
    import sys

    from django.conf import settings
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector

    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "config.settings.test"}
    setup = "import django; django.setup(); from fleet.telemetry import metrics; "
    for stored in (3, 4):  # two writer processes
        subprocess.run([sys.executable, "-c", setup + f"metrics.writer_batch(stored={stored}, duplicates=1, dead=0, "
                        "seconds=0.05)"], env=env, cwd=settings.BASE_DIR, check=True, timeout=120)
    assert all(p.name.split("_", 1)[1].startswith(socket.gethostname()) for p in tmp_path.glob("*.db"))
    # What /metrics adds up in multiprocess mode (metrics.render), read from the folder here.
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(tmp_path))
    families = _families(generate_latest(registry).decode())
    stored = {s.labels["outcome"]: s.value for s in families["fleet_writer_reports"].samples
              if s.name == "fleet_writer_reports_total"}
    assert stored["stored"] == 7.0 and stored["duplicate"] == 2.0
    assert families["fleet_writer_batches"].samples[0].value == 2.0
