"""Retention benchmark: drop a day of raw history (a partition) vs DELETE its rows, while ingest runs.

    .venv/bin/python bench/retention.py --nodes 10000 --minutes 1440     # a full day of a 10,000-node fleet
    .venv/bin/python bench/retention.py --nodes 10000 --minutes 60       # an hour of it (fits a small box)

Creates a scratch PostgreSQL database (`fleet_bench_retention` unless --database-url), migrates, and writes two
identical old days of history for --nodes nodes with 8 GPUs each at the default resolution (one row per node
and per GPU per minute, every column filled), --minutes of each day, straight into their day partitions with
`generate_series` (the rows ingest would leave behind; writing them through ingest would take hours here).
It prints the rows and bytes per node per day (`pg_total_relation_size` of the partitions, scaled to 1,440
minutes) and then, while --threads threads keep storing steady-state reports for --agents real enrolled nodes
through `reports_ingest` (today's partition), times

* the baseline: `DELETE` of one day's rows (what retention did before partitioning), and
* retention as it runs now: `partitions.drop_before()` of the other day (DETACH … CONCURRENTLY, then DROP),

and the ingest latency (p50 / p99 / max) while idle, during the DELETE and during the drop, with the ratios.
Drop time does not grow with the partition's size (it unlinks files), DELETE's does, so a run with fewer
--minutes understates the gap; run --minutes 1440 where the disk allows (≈ 2 × 30 GB for 10,000 nodes).
"""

import argparse
import os
import statistics
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "agents"))


def _setup_django(database_url: str) -> None:
    import psycopg

    name = database_url.rsplit("/", 1)[1]
    with psycopg.connect(database_url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.local"
    os.environ["DATABASE_URL"] = database_url
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _fill_day(day: datetime, nodes: int, minutes: int) -> None:
    """One day of minute rows for `nodes` nodes (ids 1..N) and 8 GPUs each (ids 1..8N), every column set."""
    from django.db import connection

    from fleet.telemetry.services import partitions

    partitions.ensure_range(day, day)
    node_gauges = ["cpu_busy_pct", "cpu_steal_pct", "cpu_iowait_pct", "mem_used_pct", "load1", "tcp_retrans_pct",
                   "gpu_util_avg_pct"]
    gpu_float = ["utilization_gpu_pct", "temperature_c", "power_draw_w"]
    gpu_int = ["memory_used_bytes", "sm_clock_mhz"]

    def gauge_columns(names, expr):
        return [f"{n}{s}" for n in names for s in ("", "_min", "_max")], [expr] * (3 * len(names))

    with connection.cursor() as cursor:
        cols, exprs = gauge_columns(node_gauges, "random() * 100")
        cursor.execute(
            f"INSERT INTO telemetry_nodesample (node_id, at, samples, {', '.join(cols)}) "
            f"SELECT n, %s::timestamptz + m * interval '1 minute', 4, {', '.join(exprs)} "
            f"FROM generate_series(0, %s) m, generate_series(1, %s) n", [day, minutes - 1, nodes])
        fcols, fexprs = gauge_columns(gpu_float, "random() * 700")
        icols, iexprs = gauge_columns(gpu_int, "(random() * 80e9)::bigint")
        cursor.execute(
            f"INSERT INTO telemetry_gpusample (gpu_id, at, samples, {', '.join(fcols + icols)}, "
            "ecc_volatile_uncorrected, clock_event_reasons_mask) "
            f"SELECT g, %s::timestamptz + m * interval '1 minute', 4, {', '.join(fexprs + iexprs)}, 0, 1 "
            f"FROM generate_series(0, %s) m, generate_series(1, %s) g", [day, minutes - 1, nodes * 8])
        cursor.execute("VACUUM ANALYZE telemetry_nodesample")
        cursor.execute("VACUUM ANALYZE telemetry_gpusample")


def _sizes(day: datetime) -> tuple[int, int]:
    from django.db import connection

    from fleet.telemetry.services import partitions

    rows = size = 0
    with connection.cursor() as cursor:
        for table in partitions.TABLES:
            name = partitions.partition_name(table, day.date())
            cursor.execute(f"SELECT count(*), pg_total_relation_size('{name}') FROM {name}")
            count, total = cursor.fetchone()
            rows, size = rows + count, size + total
    return rows, size


def _enrol_agents(count: int, work_dir: Path) -> list:
    from fleet.accounts.models import User
    from fleet.inventory.models import Provider
    from fleet.telemetry.services.enrollment import enrollment_token_create, node_enroll
    from fleet.telemetry.services.ingest import reports_ingest
    from fleet_agent.simulator import SimulatedAgent, load_scenario

    user = User.objects.create(username="bench", role="admin")
    provider = Provider.objects.create(name="Bench cloud", slug="bench", kind="cloud", cloud="aws")
    _, token = enrollment_token_create(actor=user, name="bench", provider=provider,
                                       delivery_form="cloud_dedicated", billing_mode="on_demand")
    agents = []
    for i in range(count):
        node = node_enroll(token_key=token, facts={"machine_id": f"ret-{i:012d}", "hostname": f"ret-{i}",
                                                   "gpu_count": 8}).node
        sim = SimulatedAgent.from_scenario(load_scenario("healthy"), node.pk, work_dir=work_dir / str(i))
        first = sim.step(0.0)
        sim.close()
        first["node"]["node_id"] = node.pk
        reports_ingest(node_id=node.pk, reports=[first], now=datetime.now(UTC))
        agents.append({"node_id": node.pk, "template": {**first, "inventory": None, "events": []},
                       "sequence": first["sequence"]})
    return agents


def _ingest_loop(agents, stop, samples, lock):
    from django.db import connection

    from fleet.telemetry.services.ingest import reports_ingest

    i = 0
    while not stop.is_set():
        agent = agents[i % len(agents)]
        i += 1
        agent["sequence"] += 1
        report = {**agent["template"], "sequence": agent["sequence"],
                  "collected_at": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")}
        started = time.perf_counter()
        reports_ingest(node_id=agent["node_id"], reports=[report], now=datetime.now(UTC))
        ended = time.perf_counter()
        with lock:
            samples.append((started, ended - started))
    connection.close()


def _latency(samples, start, end) -> str:
    # Every call that overlapped [start, end): a call blocked by the operation is counted at its full length.
    values = sorted(d * 1000 for s, d in samples if s < end and s + d >= start)
    if not values:
        return "no calls"
    p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
    return (f"{len(values)} calls, p50 {statistics.median(values):.1f} ms, p99 {p99:.1f} ms, "
            f"max {values[-1]:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/fleet_bench_retention")
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--minutes", type=int, default=1440, help="minutes of each day to fill (1440 = all)")
    parser.add_argument("--agents", type=int, default=16, help="enrolled nodes the ingest threads report for")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--idle-seconds", type=float, default=5.0)
    parser.add_argument("--work-dir", default="/tmp/fleet-bench-retention")
    args = parser.parse_args()

    _setup_django(args.database_url)
    from django.db import connection

    from fleet.telemetry.services import partitions

    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    drop_day, delete_day = today - timedelta(days=4), today - timedelta(days=3)  # drop_before() takes only the older
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    began = time.perf_counter()
    for day in (delete_day, drop_day):
        _fill_day(day, args.nodes, args.minutes)
    rows, size = _sizes(drop_day)
    scale = 1440 / args.minutes
    print(f"filled 2 days × {args.minutes} min × {args.nodes} nodes × (1 + 8 GPUs) "
          f"in {time.perf_counter() - began:.0f} s")
    print(f"one day partition pair: {rows:,} rows, {size / 2**20:,.1f} MiB")
    print(f"per node per day: {rows * scale / args.nodes:,.0f} rows, {size * scale / args.nodes / 2**20:.2f} MiB "
          f"(= {size * scale / args.nodes * args.nodes / 2**30:,.1f} GiB a day for {args.nodes:,} nodes)")

    agents = _enrol_agents(args.agents, Path(args.work_dir))
    samples, lock, stop = [], threading.Lock(), threading.Event()
    threads = [threading.Thread(target=_ingest_loop, args=(agents[i::args.threads], stop, samples, lock))
               for i in range(args.threads)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(1.0)  # warm-up: connections opened, statements cached
        idle_start = time.perf_counter()
        time.sleep(args.idle_seconds)
        idle_end = time.perf_counter()

        delete_start = time.perf_counter()
        with connection.cursor() as cursor:
            for table in partitions.TABLES:
                cursor.execute(f"DELETE FROM {table} WHERE at >= %s AND at < %s",
                               [delete_day, delete_day + timedelta(days=1)])
        delete_end = time.perf_counter()
        time.sleep(1.0)

        drop_start = time.perf_counter()
        timings: dict = {}
        dropped = partitions.drop_before(drop_day + timedelta(days=1), timings=timings)
        drop_end = time.perf_counter()
        time.sleep(1.0)
    finally:
        stop.set()
        for thread in threads:
            thread.join()

    delete_s, drop_s = delete_end - delete_start, drop_end - drop_start
    print(f"\ningest: {args.threads} threads storing steady reports (8 GPUs) for {args.agents} nodes")
    print(f"  idle           {_latency(samples, idle_start, idle_end)}")
    print(f"  during DELETE  {_latency(samples, delete_start, delete_end)}")
    print(f"  during drop    {_latency(samples, drop_start, drop_end)}")
    print(f"\nDELETE of one day ({args.minutes} min filled): {delete_s:.3f} s")
    print(f"drop of one day ({sum(dropped.values())} partitions, DETACH CONCURRENTLY + DROP): {drop_s:.3f} s "
          f"(detach {timings.get('detach_s', 0):.3f} s, drop {timings.get('drop_s', 0):.3f} s)")
    print(f"drop / DELETE: {drop_s / delete_s:.4f} (DELETE {delete_s / drop_s:,.1f}× the drop's time)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
