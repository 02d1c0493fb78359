"""The compose file and the files it ships, checked without Docker: services, profiles, every file referenced."""

import configparser
import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]


def _profiles(name: str) -> set[str]:
    return set(SERVICES[name].get("profiles", []))


def _env(name: str) -> dict:
    return SERVICES[name].get("environment", {})


def test_default_stack_has_no_profile_and_the_profiles_add_their_services():
    assert {"postgres", "redis", "migrate", "web", "worker", "beat"} <= set(SERVICES)
    for name in ("postgres", "redis", "migrate", "web", "worker", "beat"):
        assert not _profiles(name), name
    assert {n for n in SERVICES if "scale" in _profiles(n)} == {"pgbouncer", "web-scaled", "front"}
    assert {n for n in SERVICES if "observability" in _profiles(n)} == {"prometheus", "grafana"}
    # Helper services added by other profiles may exist (a `writer`), but never in the default set by accident.
    if "writer" in SERVICES:
        assert "command" in SERVICES["writer"]


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_every_referenced_file_exists(service):
    spec = SERVICES[service]
    build = spec.get("build")
    if build:
        context = ROOT / (build if isinstance(build, str) else build.get("context", "."))
        dockerfile = context / ("Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile"))
        assert dockerfile.is_file(), dockerfile
        for line in dockerfile.read_text().splitlines():
            if line.startswith("COPY ") and "--from" not in line:
                for source in line.split()[1:-1]:
                    assert (context / source.rstrip("/")).exists(), f"{dockerfile}: {source}"
    for volume in spec.get("volumes", []):
        source = volume.split(":")[0]
        if source.startswith("."):
            assert (ROOT / source).exists(), f"{service}: {source}"
        else:
            assert source in COMPOSE.get("volumes", {}), f"{service}: named volume {source} not declared"
    for secret in spec.get("secrets", []):
        assert secret in COMPOSE.get("secrets", {}), secret
    for dependency in spec.get("depends_on", []):
        assert dependency in SERVICES, f"{service} depends on unknown {dependency}"


def test_scale_profile_goes_through_pgbouncer_in_transaction_mode():
    ini = configparser.ConfigParser(interpolation=None)
    ini.read(ROOT / "deploy/pgbouncer/pgbouncer.ini")
    assert ini["pgbouncer"]["pool_mode"] == "transaction"
    port = ini["pgbouncer"]["listen_port"]
    database = ini["databases"]["fleet"]
    assert "host=postgres" in database and "dbname=fleet" in database
    web = _env("web-scaled")
    assert web["DATABASE_URL"].startswith(f"postgres://fleet:fleet@pgbouncer:{port}/fleet")
    assert web["DATABASE_PGBOUNCER_TRANSACTION_MODE"] == "true"
    assert "pgbouncer" in SERVICES["web-scaled"]["depends_on"]
    # Migrations run DDL straight against PostgreSQL, never through the pooler.
    assert "@postgres:5432/" in _env("migrate")["DATABASE_URL"]
    users = (ROOT / "deploy/pgbouncer/userlist.txt").read_text()
    assert '"fleet"' in users


def test_pgbouncer_mode_setting_turns_off_server_side_cursors(monkeypatch):
    from config.settings.base import _database

    monkeypatch.setenv("DATABASE_PGBOUNCER_TRANSACTION_MODE", "true")
    assert _database("postgres://fleet:fleet@pgbouncer:6432/fleet")["DISABLE_SERVER_SIDE_CURSORS"] is True
    monkeypatch.setenv("DATABASE_PGBOUNCER_TRANSACTION_MODE", "false")
    assert not _database("postgres://fleet:fleet@postgres:5432/fleet").get("DISABLE_SERVER_SIDE_CURSORS")


def test_front_balances_over_the_scaled_web_service():
    config = (ROOT / "deploy/haproxy/haproxy.cfg").read_text()
    servers = re.findall(r"server-template \S+ \d+ ([\w-]+):(\d+)", config)
    assert servers == [("web-scaled", "8000")]
    assert "option httpchk GET /healthz" in config
    bind = re.search(r"bind :(\d+)", config).group(1)
    assert any(port.endswith(f":{bind}") for port in SERVICES["front"]["ports"])
    assert SERVICES["front"]["volumes"][0].endswith(":/usr/local/etc/haproxy/haproxy.cfg:ro")


def test_front_container_may_open_what_its_maxconn_needs():
    # HAProxy needs two descriptors per connection (client and server side) and refuses to start without them.
    maxconn = int(re.search(r"maxconn (\d+)", (ROOT / "deploy/haproxy/haproxy.cfg").read_text()).group(1))
    nofile = SERVICES["front"]["ulimits"]["nofile"]
    assert min(nofile["soft"], nofile["hard"]) >= 2 * maxconn + 100


def test_prometheus_scrapes_metrics_with_the_bearer_token():
    config = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
    (job,) = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["authorization"]["type"] == "Bearer"
    assert job["authorization"]["credentials_file"] == "/run/secrets/metrics_token"
    assert "metrics_token" in SERVICES["prometheus"]["secrets"]
    assert COMPOSE["secrets"]["metrics_token"] == {"environment": "METRICS_TOKEN"}
    for target in job["static_configs"][0]["targets"]:
        host, port = target.split(":")
        assert host in SERVICES, target
    mounts = dict(v.split(":")[:2] for v in SERVICES["prometheus"]["volumes"] if v.startswith("."))
    assert mounts["./deploy/prometheus/prometheus.yml"] == "/etc/prometheus/prometheus.yml"


def test_grafana_provisioning_loads_the_dashboard():
    mounts = dict(v.split(":")[:2] for v in SERVICES["grafana"]["volumes"] if v.startswith("."))
    provisioning = ROOT / "deploy/grafana/provisioning"
    assert mounts["./deploy/grafana/provisioning"] == "/etc/grafana/provisioning"
    datasource = yaml.safe_load((provisioning / "datasources/prometheus.yml").read_text())["datasources"][0]
    assert datasource["url"] == "http://prometheus:9090" and datasource["uid"] == "prometheus"
    provider = yaml.safe_load((provisioning / "dashboards/fleet.yml").read_text())["providers"][0]
    container_dir = provider["options"]["path"]
    host_dir = next(host for host, container in mounts.items() if container == container_dir)
    dashboards = list((ROOT / host_dir).glob("*.json"))
    assert dashboards
    for path in dashboards:
        dashboard = json.loads(path.read_text())
        assert dashboard["uid"] and dashboard["panels"]
        for panel in dashboard["panels"]:
            assert panel["datasource"]["uid"] == datasource["uid"], panel["title"]
            assert panel["targets"], panel["title"]
