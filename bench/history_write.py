"""What history costs the ingest hot path: steady-state reports through `reports_ingest`, in process.

    .venv/bin/python bench/history_write.py                     # this checkout
    .venv/bin/python bench/history_write.py --code /other/tree  # another checkout's code, same method (baseline)

A scratch PostgreSQL database per run (`fleet_bench_history` unless --database-url), --nodes enrolled nodes with 8
GPUs, then --reports steady-state reports (no inventory, no events: the one-statement path) spread over the
nodes, each node's reports 15 s apart in collection time as at the default interval (so with one-minute history
a report opens its bucket once in four and folds into it three times). Prints, per report, the wall time, the
CPU of this process and the CPU of the PostgreSQL backend serving it (/proc, so Linux with PostgreSQL on this
host), and the rows the history tables hold afterwards. Run it for two checkouts back to back and compare.
"""

import argparse
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path


def _cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--code", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/fleet_bench_history")
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--reports", type=int, default=4000)
    parser.add_argument("--work-dir", default="/tmp/fleet-bench-history")
    args = parser.parse_args()
    sys.path[:0] = [args.code, str(Path(args.code) / "agents")]

    import psycopg

    name = args.database_url.rsplit("/", 1)[1]
    with psycopg.connect(args.database_url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.local"
    os.environ["DATABASE_URL"] = args.database_url
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from fleet.accounts.models import User
    from fleet.inventory.models import Provider
    from fleet.telemetry.models import GPUSample, NodeSample
    from fleet.telemetry.services.enrollment import enrollment_token_create, node_enroll
    from fleet.telemetry.services.ingest import reports_ingest
    from fleet_agent.simulator import SimulatedAgent, load_scenario

    call_command("migrate", verbosity=0)
    print(f"code: {args.code}; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    user = User.objects.create(username="bench", role="admin")
    provider = Provider.objects.create(name="Bench cloud", slug="bench", kind="cloud", cloud="aws")
    _, token = enrollment_token_create(actor=user, name="bench", provider=provider,
                                       delivery_form="cloud_dedicated", billing_mode="on_demand")
    start = datetime.now(UTC) - timedelta(hours=12)
    agents = []
    for i in range(args.nodes):
        node = node_enroll(token_key=token, facts={"machine_id": f"hist-{i:012d}", "hostname": f"hist-{i}",
                                                   "gpu_count": 8}).node
        sim = SimulatedAgent.from_scenario(load_scenario("healthy"), node.pk, work_dir=Path(args.work_dir) / str(i))
        first = sim.step(0.0)
        sim.close()
        first["node"]["node_id"] = node.pk
        first["collected_at"] = start.isoformat().replace("+00:00", "Z")
        reports_ingest(node_id=node.pk, reports=[first], now=datetime.now(UTC))
        agents.append({"node_id": node.pk, "template": {**first, "inventory": None, "events": []},
                       "sequence": first["sequence"], "at": start})

    def send(count):
        for i in range(count):
            agent = agents[i % len(agents)]
            agent["sequence"] += 1
            agent["at"] += timedelta(seconds=15)
            report = {**agent["template"], "sequence": agent["sequence"],
                      "collected_at": agent["at"].isoformat().replace("+00:00", "Z")}
            reports_ingest(node_id=agent["node_id"], reports=[report], now=datetime.now(UTC))

    send(len(agents) * 4)  # warm-up: statements built, caches filled
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    wall, cpu, pg = time.perf_counter(), time.process_time(), _cpu_of(backend)
    send(args.reports)
    wall, cpu, pg = time.perf_counter() - wall, time.process_time() - cpu, _cpu_of(backend) - pg
    n = args.reports
    print(f"{n} steady reports (8 GPUs) for {args.nodes} nodes, 15 s apart per node:")
    print(f"  per report: wall {wall / n * 1000:.2f} ms, this process {cpu / n * 1000:.2f} ms CPU, "
          f"PostgreSQL backend {pg / n * 1000:.2f} ms CPU")
    print(f"  history rows: {NodeSample.objects.count():,} node, {GPUSample.objects.count():,} GPU")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
