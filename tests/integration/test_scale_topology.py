"""The `scale` compose profile's topology with real processes, without Docker: HAProxy (Debian's, with the shipped
`deploy/haproxy/haproxy.cfg`) in front of two gunicorn replicas, the replicas, a writer and a health cycle all on
PgBouncer (Debian's, with the shipped `deploy/pgbouncer/pgbouncer.ini`) in transaction mode, and a private Redis
persisted as compose runs it. Agents report through the front, first with their inventories (written in the
request), then steady reports (queued through the fast lane and stored by the writer); one replica stops while
they report. Nothing fails, every acknowledged report is stored, and the cycle runs through the pooler.

Only the addresses differ from the shipped files (Docker's DNS names and its resolver become loopback ports),
so a change to either file that breaks the topology fails here."""

import configparser
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.db import connection

from fleet.telemetry.models import NodeStatus
from tests.integration.test_ingest_writer import Fleet, _agents, _drained, _writer
from tests.processes import ROOT, RedisServer, free_port, gunicorn, http_ok, running, wait_for

pytestmark = [
    pytest.mark.integration, pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PgBouncer pools PostgreSQL connections"),
    pytest.mark.skipif(not (shutil.which("haproxy") and shutil.which("pgbouncer")),
                       reason="needs Debian's haproxy and pgbouncer (.ci/run installs them)"),
]

PASSWORD = "pooled"  # noqa: S105 (a throwaway PgBouncer user for this test's loopback pooler)


def test_shipped_front_configuration_is_valid():
    result = subprocess.run(["haproxy", "-c", "-f", str(ROOT / "deploy/haproxy/haproxy.cfg")],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def _front_config(listen_port: int, replica_ports: list[int]) -> str:
    """The shipped HAProxy configuration with loopback addresses for Docker's DNS and replicas."""
    text = (ROOT / "deploy/haproxy/haproxy.cfg").read_text()
    text, resolvers = re.subn(r"\nresolvers docker\n(?:    .*\n)+", "\n", text)
    text, binds = re.subn(r"bind :8000\b", f"bind 127.0.0.1:{listen_port}", text)
    servers = "".join(f"    server web{i} 127.0.0.1:{port} check inter 300 fall 2 rise 1\n"
                      for i, port in enumerate(replica_ports))
    text, templates = re.subn(r"    server-template .*\n", servers, text)
    # HAProxy needs two descriptors per connection and refuses to start when the host's hard limit is lower than
    # that (compose raises the front's limit; this machine's may be lower).
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    text, maxconns = re.subn(r"maxconn (\d+)", lambda m: f"maxconn {min(int(m[1]), (hard - 200) // 2)}", text)
    assert (resolvers, binds, templates, maxconns) == (1, 1, 1, 1), "the shipped haproxy.cfg changed: update this test"
    return text


def _pooler_config(workdir: Path, listen_port: int, database: dict) -> Path:
    """The shipped PgBouncer configuration with the test database, a loopback port and a user list."""
    shipped = configparser.ConfigParser(interpolation=None)
    shipped.read(ROOT / "deploy/pgbouncer/pgbouncer.ini")
    assert shipped["pgbouncer"]["pool_mode"] == "transaction"
    options = dict(shipped["pgbouncer"])
    users = workdir / "userlist.txt"
    users.write_text(f'"{database["USER"]}" "{PASSWORD}"\n')
    options.update(listen_addr="127.0.0.1", listen_port=str(listen_port), auth_file=str(users),
                   unix_socket_dir="", admin_users=database["USER"], logfile="", pidfile="")
    server = f"host={database['HOST'] or '127.0.0.1'} port={database['PORT'] or 5432} dbname={database['NAME']}"
    ini = workdir / "pgbouncer.ini"
    ini.write_text(f"[databases]\n{database['NAME']} = {server}\n\n[pgbouncer]\n"
                   + "".join(f"{key} = {value}\n" for key, value in options.items()))
    for path in (workdir, users, ini):  # readable by the unprivileged user PgBouncer drops to under root
        path.chmod(0o755 if path.is_dir() else 0o644)
    return ini


def _replica(name: str, port: int, tmp_path: Path, env: dict):
    return gunicorn(port, "--workers", "1", "--threads", "4", "--timeout", "60", "--access-logfile",
                    str(tmp_path / f"{name}-access.log"), log=tmp_path / f"{name}.log", env=env, what=f"replica {name}")


def _served(tmp_path: Path, name: str) -> int:
    log = tmp_path / f"{name}-access.log"
    return log.read_text().count("POST /api/v1/agent/reports") if log.exists() else 0


def test_agents_report_through_the_front_to_two_replicas_on_transaction_pooling(tmp_path):
    test_database = settings.DATABASES["default"]
    database, user = test_database["NAME"], test_database["USER"]
    pooler_dir = Path(tempfile.mkdtemp(prefix="pgbouncer-"))
    pooler_port, front_port, ports = free_port(), free_port(), [free_port(), free_port()]
    pooled = f"postgres://{user}:{PASSWORD}@127.0.0.1:{pooler_port}/{database}"
    stream = f"it:{uuid.uuid4().hex[:8]}"
    ini = _pooler_config(pooler_dir, pooler_port, test_database)
    pooler = ["pgbouncer", *(["-u", "postgres"] if os.geteuid() == 0 else []), str(ini)]

    def pooler_up() -> bool:
        try:
            with psycopg.connect(pooled, connect_timeout=2) as conn:
                return conn.execute("SELECT 1").fetchone() == (1,)
        except psycopg.Error:
            return False

    front_cfg = tmp_path / "haproxy.cfg"
    logged = _front_config(front_port, ports).replace("global\n", "global\n    log stdout format raw local0\n", 1)
    front_cfg.write_text(logged.replace("defaults\n", "defaults\n    log global\n    option httplog\n", 1))
    try:
        with RedisServer(tmp_path / "redis", aof=True) as redis_server, \
                running(pooler, log=tmp_path / "pgbouncer.log", ready=pooler_up, what="pgbouncer"):
            env = {"DATABASE_URL": pooled, "DATABASE_PGBOUNCER_TRANSACTION_MODE": "true",
                   "REDIS_URL": redis_server.url, "FLEET_TEST_SHARED_CACHE": "1", "FLEET_TEST_INGEST_QUEUE": "1",
                   "FLEET_TEST_CREDENTIAL_CACHE_S": "300", "INGEST_STREAM": stream, "METRICS_TOKEN": ""}
            with _replica("web0", ports[0], tmp_path, env) as web0, _replica("web1", ports[1], tmp_path, env), \
                    running(["haproxy", "-db", "-f", str(front_cfg)], log=tmp_path / "haproxy.log",
                            ready=lambda: http_ok(f"http://127.0.0.1:{front_port}/healthz"), what="haproxy"), \
                    _writer("pooled", tmp_path, env):
                fleet = Fleet(front_port, _agents())
                fleet.round(inventory=True)  # inventories: written in the request, through the pooler
                for _ in range(3):
                    fleet.round()
                assert _served(tmp_path, "web0") and _served(tmp_path, "web1"), "the front balances over both"

                # One replica goes away while agents keep reporting: the front sends every request to the other.
                stop = threading.Event()

                def keep_reporting():
                    while not stop.is_set():
                        fleet.round()
                        time.sleep(0.02)

                reporter = threading.Thread(target=keep_reporting)
                reporter.start()
                time.sleep(0.5)
                web0.terminate()
                web0.wait(timeout=20)
                time.sleep(1.5)
                stop.set()
                reporter.join(timeout=60)
                after = _served(tmp_path, "web1")
                fleet.round()
                assert _served(tmp_path, "web1") > after
                wait_for(lambda: _drained(redis_server, stream), timeout=60, what="the writer to drain the stream")

                cycle = subprocess.run([sys.executable, "manage.py", "health_evaluate", "--sync-catalog"], cwd=ROOT,
                                       env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test", **env},
                                       capture_output=True, text=True, timeout=120, check=False)
                assert cycle.returncode == 0, cycle.stderr[-3000:]
                assert f'"nodes": {len(fleet.agents)}' in cycle.stdout, cycle.stdout

                with psycopg.connect(f"postgres://{user}:{PASSWORD}@127.0.0.1:{pooler_port}/pgbouncer",
                                     autocommit=True, prepare_threshold=None) as admin:
                    cursor = admin.cursor()
                    cursor.execute("SHOW CONFIG")
                    pool_mode = {row[0]: row[1] for row in cursor}["pool_mode"]
                    cursor.execute("SHOW STATS")
                    columns = [c.name for c in cursor.description]
                    transactions = {row[columns.index("database")]: row[columns.index("total_xact_count")]
                                    for row in cursor}
    finally:
        shutil.rmtree(pooler_dir, ignore_errors=True)

    assert not fleet.failures, fleet.failures[:5]
    assert fleet.queued > 0, "steady reports went through the queue"
    for node_id, _, builder in fleet.agents:
        assert fleet.acked[node_id] == builder.sequence
        assert NodeStatus.objects.get(node_id=node_id).sequence == builder.sequence
    assert pool_mode == "transaction"
    assert transactions[database] > 100  # the replicas, the writer and the cycle all went through the pooler
