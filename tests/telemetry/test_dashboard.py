"""Every metric the shipped Grafana dashboard queries is one the real /metrics endpoint exports."""

import json
import re
from pathlib import Path

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from tests.telemetry.reports import ReportBuilder

pytestmark = pytest.mark.django_db
DASHBOARDS = sorted((Path(__file__).resolve().parents[2] / "deploy/grafana/dashboards").glob("*.json"))


def _queried_metrics(dashboard: dict) -> set[str]:
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs += [v["definition"] for v in dashboard.get("templating", {}).get("list", []) if v.get("definition")]
    return {name for expr in exprs for name in re.findall(r"\bfleet_[a-z0-9_]+", expr)}


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_queries_only_exported_metrics(path, enroll, settings):
    settings.METRICS_TOKEN = "scrape-token"
    agent = enroll(hostname="gpu-dash")
    builder = ReportBuilder(agent.node_id, gpus=2)
    assert agent.send(builder.report(with_inventory=True)).status_code == 200
    assert agent.send(builder.report()).status_code == 200
    from django.utils import timezone

    from fleet.telemetry.services.silence import mark_silent_nodes

    mark_silent_nodes(now=timezone.now())  # the receiving state behind fleet_ingest_receiving
    response = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-token")
    assert response.status_code == 200
    # A family is exported even before its first labelled sample (a counter of rejections that has none yet):
    # its declared TYPE names the series a query sees.
    suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_count", "_sum"], "gauge": [""]}
    exported = set()
    for family in text_string_to_metric_families(response.content.decode()):
        exported |= {sample.name for sample in family.samples}
        exported |= {family.name + suffix for suffix in suffixes.get(family.type, [""])}
    queried = _queried_metrics(json.loads(path.read_text()))
    assert len(queried) >= 10
    assert queried - exported == set(), f"{path.name} queries metrics /metrics does not export"
