"""Fleet chart benchmark: the fleet-wide utilisation and findings-trend reads against a naive per-bucket baseline.

    .venv/bin/python bench/trends.py                      # 100 nodes × 8 GPUs, a day of 5-minute rollups
    .venv/bin/python bench/trends.py --nodes 300 --findings 5000

Creates (or reuses) a scratch PostgreSQL database (`fleet_bench_trends` unless --database-url), migrates it,
and fills it through bulk_create: nodes with 8 GPUs each, a day of GPU rollups (one row per GPU per 5 minutes)
and findings opened and resolved over 30 days. Then it times, in the same process:

* `fleet_utilisation` (24 h at 15-minute buckets: one grouped query) against the baseline of one aggregate
  query per chart bucket;
* `finding_trends` (30 d at 6-hour buckets: two queries, intervals folded in Python) against the baseline of
  counting open findings per bucket and step in the database (one query per bucket and step, plus one per
  bucket for the unhealthy GPUs);

and prints each time (median of 5), the query count and the ratio to its baseline.
"""

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _django(database_url: str) -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.local"
    os.environ["DATABASE_URL"] = database_url
    os.environ["FLEET_VAR_DIR"] = tempfile.mkdtemp(prefix="fleet-bench-trends-")
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


def _fill(nodes: int, findings: int, now: datetime) -> None:
    from django.core.management import call_command
    from django.db import connection

    from fleet.health.models import Finding, Rule
    from fleet.inventory.models import GPU, Node, Provider
    from fleet.telemetry.models import GPUSampleRollup

    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE inventory_provider, health_finding RESTART IDENTITY CASCADE")
    rng = random.Random(7)
    provider = Provider.objects.create(name="AWS", slug="aws", kind="cloud", cloud="aws")
    node_rows = Node.objects.bulk_create(
        [Node(hostname=f"gpu-{i:05d}", provider=provider, delivery_form="cloud_dedicated", state="active",
              expected_gpu_count=8) for i in range(nodes)])
    gpus = GPU.objects.bulk_create(
        [GPU(node=node, index=i, uuid=f"GPU-{node.pk}-{i}", model="H100") for node in node_rows for i in range(8)])
    GPU.objects.update(first_seen=now - timedelta(days=40))
    start = now - timedelta(hours=24)
    buckets = [start + timedelta(minutes=5 * k) for k in range(288)]
    batch = []
    for gpu in gpus:
        for bucket in buckets:
            batch.append(GPUSampleRollup(gpu=gpu, bucket=bucket, samples=20, utilization_gpu_pct=rng.uniform(20, 99)))
            if len(batch) >= 20_000:
                GPUSampleRollup.objects.bulk_create(batch)
                batch = []
    GPUSampleRollup.objects.bulk_create(batch)
    rules = list(Rule.objects.all())
    rows = []
    for k in range(findings):
        rule = rules[k % len(rules)]
        node = node_rows[rng.randrange(nodes)]
        opened = now - timedelta(seconds=rng.uniform(0, 30 * 86400))
        resolved = opened + timedelta(hours=rng.uniform(0.5, 72)) if rng.random() < 0.9 else None
        rows.append(Finding(rule=rule, node=node, gpu=None if rng.random() < 0.3 else gpus[node_rows.index(node) * 8],
                            subject=f"s{k}", state="open" if resolved is None or resolved > now else "resolved",
                            step=rule.step, layer="hardware", severity=rng.choice(["critical", "warning", "info"]),
                            summary="bench", responsible_party="provider", action_kind="provider_ticket",
                            recommended_action="-", first_seen=opened, opened_at=opened, last_seen=opened,
                            resolved_at=resolved if resolved and resolved <= now else None))
    Finding.objects.bulk_create(rows, batch_size=5000)


def _time(fn, repeat: int = 5) -> tuple[float, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    times = []
    with CaptureQueriesContext(connection) as ctx:
        fn()
    queries = len(ctx.captured_queries)
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), queries


def _naive_utilisation(rng, now):
    from django.db.models import F, FloatField, Sum
    from django.db.models.expressions import ExpressionWrapper

    from fleet.telemetry.models import GPUSampleRollup

    weighted = ExpressionWrapper(F("utilization_gpu_pct") * F("samples"), output_field=FloatField())
    out = []
    for bucket in rng.buckets():
        agg = GPUSampleRollup.objects.filter(bucket__gte=bucket, bucket__lt=bucket + rng.step).aggregate(
            t=Sum(weighted), n=Sum("samples"))
        out.append(agg["t"] / agg["n"] if agg["n"] else None)
    return out


def _naive_findings(rng, now):
    from django.db.models import Q

    from fleet.health.choices import TriageStep
    from fleet.health.models import Finding
    from fleet.inventory.models import GPU

    out = []
    for bucket in rng.buckets():
        at = min(bucket + rng.step, now)
        open_q = Finding.objects.filter(Q(resolved_at__isnull=True) | Q(resolved_at__gt=at), opened_at__lte=at)
        counts = {step: open_q.filter(step=step).count() for step in TriageStep.values}
        bad = open_q.filter(severity__in=["critical", "warning"])
        affected = GPU.objects.filter(Q(pk__in=bad.filter(gpu__isnull=False).values("gpu_id"))
                                      | Q(node_id__in=bad.filter(gpu__isnull=True).values("node_id"))).count()
        out.append((counts, affected))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/fleet_bench_trends")
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--findings", type=int, default=2000)
    args = parser.parse_args()
    _ensure_database(args.database_url)
    _django(args.database_url)

    from fleet.core.timeranges import time_range
    from fleet.health.selectors.trends import finding_trends
    from fleet.telemetry.selectors import fleet_utilisation

    now = datetime.now(UTC)
    t0 = time.perf_counter()
    _fill(args.nodes, args.findings, now)
    print(f"filled {args.nodes} nodes, {args.nodes * 8} GPUs, {args.nodes * 8 * 288:,} rollup rows, "
          f"{args.findings:,} findings in {time.perf_counter() - t0:.1f} s; load average {os.getloadavg()[0]:.2f}")

    day = time_range("24h", now=now)
    month = time_range("30d", now=now)
    fast, fast_q = _time(lambda: fleet_utilisation(start=day.start, end=day.end, step=day.step_s, now=now))
    slow, slow_q = _time(lambda: _naive_utilisation(day, now))
    print(f"utilisation 24 h/15 min: {fast * 1000:.1f} ms, {fast_q} queries; per-bucket baseline "
          f"{slow * 1000:.1f} ms, {slow_q} queries; ratio {slow / fast:.1f}×")
    fast, fast_q = _time(lambda: finding_trends(rng=month, now=now))
    slow, slow_q = _time(lambda: _naive_findings(month, now))
    print(f"findings trend 30 d/6 h: {fast * 1000:.1f} ms, {fast_q} queries; per-bucket baseline "
          f"{slow * 1000:.1f} ms, {slow_q} queries; ratio {slow / fast:.1f}×")


if __name__ == "__main__":
    main()
