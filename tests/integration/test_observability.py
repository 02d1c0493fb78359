"""The `observability` compose profile's Prometheus, for real (Debian's package, without Docker): the shipped
`deploy/prometheus/prometheus.yml` scrapes a gunicorn serving the control plane's `/metrics` with the Bearer token
from a file, as compose mounts it, while agents report; then every query of the shipped Grafana dashboard runs
in that Prometheus. Only the addresses, the token file's path and the scrape interval differ from the shipped
file, so a change that breaks the scrape, or a dashboard query PromQL rejects, fails here. (Grafana itself is not
packaged by Debian: `tests/telemetry/test_dashboard.py` holds its queries to what `/metrics` exports.)"""

import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from tests.integration.test_ingest_writer import Fleet, _agents
from tests.processes import ROOT, free_port, gunicorn, http_ok, running, wait_for

pytestmark = [
    pytest.mark.integration, pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not shutil.which("prometheus"), reason="needs Debian's prometheus (.ci/run installs it)"),
]

TOKEN = "observability-scrape-token"  # noqa: S105 (a throwaway token for this test's loopback server)
DASHBOARD = ROOT / "deploy/grafana/dashboards/fleet-overview.json"


def _scrape_config(target: str, token_file, interval: str) -> str:
    """The shipped Prometheus configuration with a loopback target, a local token file and a short interval."""
    text = (ROOT / "deploy/prometheus/prometheus.yml").read_text()
    text, targets = re.subn(r'targets: \["web:8000"\]', f'targets: ["{target}"]', text)
    text, tokens = re.subn(r"credentials_file: /run/secrets/metrics_token", f"credentials_file: {token_file}", text)
    text, intervals = re.subn(r"scrape_interval: 15s", f"scrape_interval: {interval}", text)
    assert (targets, tokens, intervals) == (1, 1, 1), "the shipped prometheus.yml changed: update this test"
    return text


def _query(port: int, expr: str) -> dict:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 (loopback)
        return json.loads(response.read())


def _dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    # The template variable `node` ("All" is `.*`), as Grafana substitutes it.
    return [expr.replace("$node", ".*") for expr in exprs]


def test_prometheus_scrapes_the_control_plane_and_answers_every_dashboard_query(tmp_path):
    token_file = tmp_path / "metrics_token"
    token_file.write_text(TOKEN)
    web_port, prometheus_port = free_port(), free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(_scrape_config(f"127.0.0.1:{web_port}", token_file, "1s"))
    check = subprocess.run(["promtool", "check", "config", str(config)], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr

    (tmp_path / "multiproc").mkdir()
    env = {"METRICS_TOKEN": TOKEN, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "multiproc")}
    prometheus = ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                  f"--web.listen-address=127.0.0.1:{prometheus_port}"]
    with gunicorn(web_port, "--workers", "2", "--timeout", "60", log=tmp_path / "gunicorn.log", env=env), \
            running(prometheus, log=tmp_path / "prometheus.log", what="prometheus",
                    ready=lambda: http_ok(f"http://127.0.0.1:{prometheus_port}/-/ready")):
        fleet = Fleet(web_port, _agents())
        fleet.round(inventory=True)

        def scraped() -> bool:
            result = _query(prometheus_port, 'up{job="fleet"}')["data"]["result"]
            return bool(result) and result[0]["value"][1] == "1"

        wait_for(scraped, timeout=30, what="Prometheus to scrape /metrics with the token")
        for _ in range(4):  # reports between scrapes, so the dashboard's rates have something to show
            fleet.round()
            time.sleep(1.2)

        def accepted_rate() -> float:
            result = _query(prometheus_port, "sum(rate(fleet_reports_accepted_total[5m]))")["data"]["result"]
            return float(result[0]["value"][1]) if result else 0.0

        wait_for(lambda: accepted_rate() > 0, timeout=20, what="a rate of accepted reports")
        answers = {expr: _query(prometheus_port, expr) for expr in _dashboard_queries()}
        labels_url = (f"http://127.0.0.1:{prometheus_port}/api/v1/label/node/values?"
                      + urllib.parse.urlencode({"match[]": "fleet_gpu_utilization_percent"}))
        with urllib.request.urlopen(labels_url, timeout=10) as response:  # noqa: S310 (loopback)
            node_values = json.loads(response.read())["data"]

    assert not fleet.failures, fleet.failures[:5]
    assert len(answers) >= 15
    refused = {expr: answer.get("error") for expr, answer in answers.items() if answer["status"] != "success"}
    assert refused == {}, refused
    # Every panel shows a value on a healthy fleet, zeros included: none of the rejections or shed requests (whose
    # labelled counters have no series yet) and no open findings must read as "No data".
    empty = sorted(expr for expr, answer in answers.items() if not answer["data"]["result"])
    assert empty == [], empty
    for expr in ("rejected", "shed"):
        answer = next(a for e, a in answers.items() if expr in e)["data"]["result"]
        assert [float(series["value"][1]) for series in answer] == [0.0]
    per_node = answers['fleet_gpu_utilization_percent{node=~".*"}']["data"]["result"]
    assert {series["metric"]["node"] for series in per_node} == set(node_values)
    assert len(node_values) == len(fleet.agents)  # the template variable lists every reporting node
    assert float(answers["sum(fleet_node_up)"]["data"]["result"][0]["value"][1]) == len(fleet.agents)
