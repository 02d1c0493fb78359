"""Ingest benchmark: N simulated agents against gunicorn + PostgreSQL on this machine.

    .venv/bin/python bench/ingest.py --agents 64 --seconds 20               # saturation (closed loop)
    .venv/bin/python bench/ingest.py --agents 64 --threads 32 --rate 200    # agents on a schedule (open loop)

Creates a scratch database (`fleet_bench` on the local PostgreSQL unless --database-url), migrates,
enrols N nodes, starts gunicorn, and drives it from client threads that each play a share of the agents:
8 GPUs per report, one report per request, like agents at their interval. It measures the trivial
`/healthz` throughput with the same client first (the baseline), then reports/s and the p50/p99 latency
of report POSTs, prints both with their ratio, and the CPU spent per report by the web workers,
PostgreSQL and the client (from /proc, so Linux only).

Closed loop finds the most the server does, with every request queued behind others (so latency is at
its worst). Open loop (--rate) sends on a fixed schedule the way a fleet does and charges late answers
from the scheduled time; the highest rate whose p99 stays under the target is the sustainable one.
"""

import argparse
import gzip
import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _django(database_url: str):
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.local"
    os.environ["DATABASE_URL"] = database_url
    import django

    django.setup()


def _ensure_database(database_url: str) -> None:
    import psycopg

    name = database_url.rsplit("/", 1)[1]
    admin = database_url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def _enrol(count: int) -> list[tuple[int, str]]:
    from django.core.management import call_command

    from fleet.accounts.models import User
    from fleet.inventory.models import Provider
    from fleet.telemetry.services.enrollment import enrollment_token_create, node_enroll

    call_command("migrate", verbosity=0)
    user = User.objects.create(username="bench", role="admin")
    provider = Provider.objects.create(name="Bench cloud", slug="bench", kind="cloud", cloud="aws")
    _, token = enrollment_token_create(actor=user, name="bench", provider=provider,
                                       delivery_form="cloud_dedicated", billing_mode="on_demand")
    agents = []
    for i in range(count):
        enrollment = node_enroll(token_key=token, facts={"machine_id": f"bench-{i:012d}", "hostname": f"bench-{i}",
                                                         "gpu_count": 8})
        agents.append((enrollment.node.pk, enrollment.credential))
    return agents


class SimAgent:
    """One simulated agent: reports produced by the agent's own code over a simulated NVML (8 GPUs).

    Producing a report costs the simulator about 5 ms, so a few are made up front and replayed with a fresh
    sequence number and timestamp; the client then spends its CPU on HTTP, not on simulation.
    """

    def __init__(self, node_id: int, credential: str, work_dir: Path, templates: int = 4):
        from fleet_agent.simulator import SimulatedAgent, load_scenario

        self.node_id = node_id
        self.credential = credential
        agent = SimulatedAgent.from_scenario(load_scenario("healthy"), node_id, work_dir=work_dir)
        self.templates = [agent.step(i * 15.0) for i in range(templates)]
        agent.close()
        for report in self.templates:
            report["node"]["node_id"] = node_id
        self.instance_id = self.templates[0]["agent"]["instance_id"]
        self.sequence = 0

    def next_report(self) -> dict:
        report = dict(self.templates[self.sequence % len(self.templates)])
        if self.sequence >= len(self.templates):
            report["inventory"] = None
        self.sequence += 1
        report["sequence"] = self.sequence
        report["collected_at"] = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        return report


def _worker(host, port, agents, deadline, latencies, errors, lock, compress, batch, interval=None, phase=0.0):
    """Closed loop (interval None): send the next request as soon as the last one is answered. Open loop: send
    on a fixed schedule, one request every `interval` seconds, and count latency from the scheduled time, so a
    stalled server is charged for the requests it delayed (no coordinated omission)."""
    conn = http.client.HTTPConnection(host, port, timeout=30)
    local = []
    i = 0
    first = time.perf_counter() + phase
    while time.perf_counter() < deadline:
        agent = agents[i % len(agents)]
        body = orjson.dumps({"reports": [agent.next_report() for _ in range(batch)]})
        headers = {"Content-Type": "application/json", "Authorization": f"Node {agent.credential}"}
        if compress:
            body = gzip.compress(body, 1)
            headers["Content-Encoding"] = "gzip"
        if interval is None:
            started = time.perf_counter()
        else:
            started = first + i * interval
            if started >= deadline:
                break
            time.sleep(max(0.0, started - time.perf_counter()))
        i += 1
        try:
            conn.request("POST", "/api/v1/agent/reports", body, headers)
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                with lock:
                    errors.append(response.status)
                continue
        except (OSError, http.client.HTTPException):
            conn.close()
            conn = http.client.HTTPConnection(host, port, timeout=30)
            with lock:
                errors.append("conn")
            continue
        local.append(time.perf_counter() - started)
    with lock:
        latencies.extend(local)


def _healthz(host, port, seconds, threads):
    count = [0]
    lock = threading.Lock()
    deadline = time.perf_counter() + seconds

    def run():
        conn = http.client.HTTPConnection(host, port, timeout=10)
        n = 0
        while time.perf_counter() < deadline:
            conn.request("GET", "/healthz")
            conn.getresponse().read()
            n += 1
        with lock:
            count[0] += n

    pool = [threading.Thread(target=run) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return count[0] / seconds


def _cpu_seconds(match) -> float:
    """CPU time (user + system) of the live processes whose command line matches; Linux /proc only."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if match(cmdline):
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=64)
    parser.add_argument("--threads", type=int, default=16, help="client connections")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--workers", type=int, default=3, help="gunicorn workers")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--gzip", action="store_true")
    parser.add_argument("--rate", type=float, default=0,
                        help="requests/s offered on a fixed schedule (open loop, like agents on their interval); "
                             "0 = closed loop: each client thread sends as soon as it has an answer (saturation)")
    parser.add_argument("--batch", type=int, default=1,
                        help="reports per request (1 = steady state; more = a spool flushing after an outage)")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/14", help="cache for rate limits")
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/fleet_bench")
    args = parser.parse_args()

    _ensure_database(args.database_url)
    _django(args.database_url)
    import tempfile

    sim_dir = Path(tempfile.mkdtemp(prefix="bench-agents-"))
    agents = [SimAgent(n, c, sim_dir) for n, c in _enrol(args.agents)]
    var_dir = ROOT / "var" / f"bench-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "DATABASE_URL": args.database_url, "DJANGO_SETTINGS_MODULE": "config.settings.local",
           "FLEET_VAR_DIR": str(var_dir), "AGENT_RATE_LIMIT": "100000/min", "LOG_LEVEL": "WARNING",
           "DEBUG": "false", "REDIS_URL": args.redis_url}
    server = subprocess.Popen([sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{args.port}",
                               "--workers", str(args.workers), "--log-level", "warning"], cwd=ROOT, env=env)
    try:
        for _ in range(100):
            try:
                http.client.HTTPConnection("127.0.0.1", args.port, timeout=1).request("GET", "/healthz")
                break
            except OSError:
                time.sleep(0.2)
        web = (lambda cmd: "gunicorn" in cmd and "config.wsgi" in cmd)  # noqa: E731
        database = (lambda cmd: cmd.startswith("postgres"))  # noqa: E731
        healthz_seconds = min(5.0, args.seconds)
        web_cpu = _cpu_seconds(web)
        baseline = _healthz("127.0.0.1", args.port, healthz_seconds, args.threads)
        healthz_web_cpu = (_cpu_seconds(web) - web_cpu) / max(baseline * healthz_seconds, 1)
        # Warm-up, not measured: every worker compiles the report schema and opens its database connection on
        # its first report, and the tables and indexes get cached, as on a server that has been up a while.
        warm_lock = threading.Lock()
        warm = [threading.Thread(target=_worker, args=("127.0.0.1", args.port, agents[i::4], time.perf_counter() + 3,
                                                       [], [], warm_lock, args.gzip, 1)) for i in range(4)]
        for t in warm:
            t.start()
        for t in warm:
            t.join()
        latencies: list[float] = []
        errors: list = []
        lock = threading.Lock()
        deadline = time.perf_counter() + args.seconds
        slices = [s for s in (agents[i::args.threads] for i in range(args.threads)) if s]
        interval = len(slices) / args.rate if args.rate else None
        threads = [threading.Thread(target=_worker, args=(
            "127.0.0.1", args.port, s, deadline, latencies, errors, lock, args.gzip, args.batch, interval,
            (interval or 0) * n / len(slices))) for n, s in enumerate(slices)]
        web_cpu, db_cpu = _cpu_seconds(web), _cpu_seconds(database)
        started = time.perf_counter()
        client_cpu = time.process_time()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - started
        client_cpu = time.process_time() - client_cpu
        web_cpu, db_cpu = _cpu_seconds(web) - web_cpu, _cpu_seconds(database) - db_cpu
    finally:
        server.terminate()
        server.wait(timeout=20)
    rate = len(latencies) * args.batch / elapsed
    quantiles = statistics.quantiles(latencies, n=100) if len(latencies) > 100 else [float("nan")] * 99
    print(json.dumps({
        "when": datetime.now(UTC).isoformat(timespec="seconds"), "cpus": os.cpu_count(), "agents": args.agents,
        "gpus_per_report": 8, "client_threads": args.threads, "gunicorn_workers": args.workers, "gzip": args.gzip,
        "reports_per_request": args.batch, "offered_requests_per_s": args.rate or None,
        "requests": len(latencies), "reports": len(latencies) * args.batch,
        "errors": len(errors), "seconds": round(elapsed, 1),
        "reports_per_s": round(rate, 1), "request_p50_ms": round(quantiles[49] * 1000, 1),
        "request_p99_ms": round(quantiles[98] * 1000, 1), "healthz_per_s": round(baseline, 1),
        "ratio_to_healthz": round(rate / baseline, 3) if baseline else None,
        "client_cpu_ms_per_report": round(1000 * client_cpu / max(len(latencies) * args.batch, 1), 2),
        "healthz_web_cpu_ms_per_request": round(1000 * healthz_web_cpu, 2),
        "web_cpu_ms_per_report": round(1000 * web_cpu / max(len(latencies) * args.batch, 1), 2),
        "postgres_cpu_ms_per_report": round(1000 * db_cpu / max(len(latencies) * args.batch, 1), 2),
    }, indent=2))


if __name__ == "__main__":
    main()
