"""Nodes-list benchmark: the triage columns (worst open severity, open findings, who acts on the headline, last
report, GPUs seen / expected) for one page of the list, against the per-row design, in PostgreSQL.

    .venv/bin/python bench/node_list.py                  # 10,000 nodes, 2 % with open findings
    .venv/bin/python bench/node_list.py --nodes 2000

Creates (or reuses) a scratch database (`fleet_bench_lists` on the local PostgreSQL unless --database-url),
migrates it and fills it through bulk_create: one provider and pool, the nodes, a status row per node (1 % silent)
and 1–3 open findings on every 50th node (plus resolved ones). Then it times, through the real API view
(`GET /api/v1/nodes/`, default order: severity, then longest open), a page of 50 and a page of 500, with the
query count; and in the same process the baseline: the same page's columns computed per row (a node list, then
queries per node for its findings and status — what a serializer with method fields does), and the ratio.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "agents"))

NOW = datetime.now(UTC)


def _django(database_url: str, var_dir: str) -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.local"
    os.environ["DATABASE_URL"] = database_url
    os.environ["FLEET_VAR_DIR"] = var_dir
    os.environ["DEBUG"] = "false"
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()


def _ensure_database(database_url: str) -> None:
    import psycopg

    name = database_url.rsplit("/", 1)[1]
    admin = database_url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def _fill(nodes: int) -> None:
    from django.core.management import call_command
    from django.db import connection

    from fleet.health.models import Finding, Rule
    from fleet.inventory.models import Node, Pool, Provider
    from fleet.telemetry.models import NodeStatus

    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE inventory_provider, health_finding, health_healthcondition CASCADE")
    provider = Provider.objects.create(name="AWS", slug="aws", kind="cloud", cloud="aws")
    pool = Pool.objects.create(name="p5", provider=provider, delivery_form="cloud_dedicated", gpus_per_node=8)
    rules = {r.slug: r for r in Rule.objects.filter(slug__in=["xid", "tcp_retransmits", "cpu_steal", "gpu_lost"])}
    batch = 2000
    for start in range(0, nodes, batch):
        made = Node.objects.bulk_create([
            Node(hostname=f"gpu-{i:05d}", provider=provider, pool=pool, delivery_form="cloud_dedicated", state="active")
            for i in range(start, min(nodes, start + batch))])
        NodeStatus.objects.bulk_create([
            NodeStatus(node=n, received_at=NOW - timedelta(hours=2 if i % 100 == 0 else 0, seconds=10),
                       collected_at=NOW, sequence=1, agent_instance_id="a", silent=i % 100 == 0, gpu_count_seen=8)
            for i, n in enumerate(made, start)])
        findings = []
        for i, node in enumerate(made, start):
            if i % 50:
                continue
            for k, slug in enumerate(list(rules)[: 1 + i % 3]):
                rule = rules[slug]
                opened = NOW - timedelta(minutes=10 * (k + 1) + i % 97)
                findings.append(Finding(rule=rule, node=node, subject=f"s{k}", state="open", step=rule.step,
                                        layer=rule.layer, severity=rule.severity, summary=slug,
                                        responsible_party="provider", action_kind="provider_ticket",
                                        recommended_action="x", first_seen=opened, opened_at=opened,
                                        last_seen=NOW))
            findings.append(Finding(rule=rules["cpu_steal"], node=node, subject="old", state="resolved",
                                    step="platform_hardware", layer="virtualization", severity="warning",
                                    summary="old", responsible_party="provider", action_kind="provider_ticket",
                                    recommended_action="x", first_seen=NOW - timedelta(days=2),
                                    opened_at=NOW - timedelta(days=2), last_seen=NOW - timedelta(days=1),
                                    resolved_at=NOW - timedelta(days=1)))
        Finding.objects.bulk_create(findings)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # what autovacuum does after a bulk load; the plans below depend on it


def _timed(fn, repeat: int = 5) -> tuple[float, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    times, queries = [], 0
    for _ in range(repeat):
        with CaptureQueriesContext(connection) as captured:
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        queries = len(captured)
    return statistics.median(times), queries


def _baseline_page(page_size: int) -> list[dict]:
    """The per-row design: list the nodes, then ask the database about each one."""
    from fleet.health.choices import SEVERITY_RANK, STEP_ORDER
    from fleet.health.models import Finding
    from fleet.inventory.models import Node
    from fleet.telemetry.models import NodeStatus

    rows = []
    for node in Node.objects.select_related("provider", "pool").order_by("hostname")[:page_size]:
        open_findings = list(Finding.objects.filter(node=node, state="open"))
        status = NodeStatus.objects.filter(node=node).first()
        ranked = sorted(open_findings, key=lambda f: (STEP_ORDER.index(f.step), SEVERITY_RANK[f.severity],
                                                      f.opened_at))
        rows.append({"hostname": node.hostname, "open": len(open_findings),
                     "worst": min((SEVERITY_RANK[f.severity] for f in open_findings), default=3),
                     "party": ranked[0].responsible_party if ranked else None,
                     "last_report_at": status.received_at if status else None,
                     "gpus_seen": status.gpu_count_seen if status else None})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--reuse", action="store_true", help="keep the fleet a previous run filled")
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/fleet_bench_lists")
    args = parser.parse_args()
    _ensure_database(args.database_url)
    _django(args.database_url, tempfile.mkdtemp(prefix="fleet-bench-lists-"))

    from rest_framework.test import APIClient

    from fleet.accounts.models import User

    started = time.perf_counter()
    if args.reuse:
        from fleet.inventory.models import Node

        assert Node.objects.count() == args.nodes, "--reuse needs a database filled with --nodes nodes"
    else:
        _fill(args.nodes)
    print(f"filled {args.nodes} nodes in {time.perf_counter() - started:.1f} s; load average {os.getloadavg()}")
    user, _ = User.objects.get_or_create(username="bench", defaults={"role": "admin"})
    client = APIClient()
    client.force_authenticate(user)
    client.defaults["SERVER_NAME"] = "localhost"

    for page_size in (50, 500):
        def api(size=page_size):
            response = client.get("/api/v1/nodes/", {"page_size": size})
            assert response.status_code == 200, response.content[:500]
            return response

        body = api().json()
        assert body["results"][0]["worst_severity"] == "critical", body["results"][0]
        seconds, queries = _timed(api)
        base_seconds, base_queries = _timed(lambda size=page_size: _baseline_page(size))
        print(f"page of {page_size:>3}: API {seconds * 1000:7.1f} ms, {queries} queries | per-row baseline "
              f"{base_seconds * 1000:7.1f} ms, {base_queries} queries | ratio {base_seconds / seconds:5.1f}×")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
