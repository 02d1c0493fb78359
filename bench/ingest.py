"""Ingest benchmark: N simulated agents against gunicorn + PostgreSQL on this machine.

    .venv/bin/python bench/ingest.py --agents 64 --seconds 20               # saturation (closed loop)
    .venv/bin/python bench/ingest.py --agents 64 --threads 32 --rate 200    # agents on a schedule (open loop)
    .venv/bin/python bench/ingest.py --overload 3                           # 3x capacity: shedding (503s)
    .venv/bin/python bench/ingest.py --writers 1                            # queued ingest (Redis stream + writer)
    .venv/bin/python bench/ingest.py --writers 1 --rate-of-healthz 0.5      # open loop at 0.5 x /healthz/s

Creates a scratch database (`fleet_bench` on the local PostgreSQL unless --database-url), migrates,
enrols N nodes, starts gunicorn, and drives it from client threads that each play a share of the agents:
8 GPUs per report, one report per request, like agents at their interval. It measures the trivial
`/healthz` throughput with the same client first (the baseline), then reports/s and the p50/p99 latency
of report POSTs, prints both with their ratio, and the CPU spent per report by the web workers,
PostgreSQL and the client (from /proc, so Linux only).

Closed loop finds the most the server does, with every request queued behind others (so latency is at
its worst). Open loop (--rate) sends on a fixed schedule the way a fleet does and charges late answers
from the scheduled time; the highest rate whose p99 stays under the target is the sustainable one.

Overload (--overload K) first measures capacity in closed loop (--calibrate-seconds), then offers K times that
rate in open loop for --seconds from one asyncio client (a new connection per request, as agents make, and
the agent's 10-s timeout), so the offered rate holds however slow the answers get. It reports served requests
(200) and shed ones (503 + Retry-After) separately, with their latencies from the scheduled send time, and
the requests that got no answer within the agent's timeout. --no-shed turns the server's shedding off (the
"before" figure); --rate with --overload fixes the offered rate instead, so that two runs compare on a busy box.

Queued ingest (--writers N, N >= 1): steady reports are acknowledged once in a Redis stream and N
`manage.py fleet_writer` processes store them in batches. The benchmark then starts its own redis-server with the
production persistence (append-only file, `appendfsync always`, so its fsyncs are in the figures) unless
--redis-url is given, waits after the load until the writers have drained the stream (the drain time is the
writers' lag behind the last answer), and adds the CPU per report of the writers and of Redis. --writers 0 is
the synchronous path. --rate-of-healthz F runs the open loop at F times the /healthz rate just measured.
"""

import argparse
import asyncio
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


def in_process_django(database_url: str, **settings: str):
    """Django set up in this process against `database_url`, with a private Redis persisted as production runs
    the ingest queue (returned: stop it when done), and the limits a benchmark must not hit. `settings`: more
    environment settings (e.g. INGEST_QUEUE="true")."""
    var_dir = ROOT / "var" / f"bench-{uuid.uuid4().hex[:8]}"
    redis_server = _private_redis(var_dir / "redis")
    os.environ.update(REDIS_URL=redis_server.url, INGEST_STREAM=f"bench:{uuid.uuid4().hex[:8]}", DEBUG="false",
                      AGENT_RATE_LIMIT="100000/min", FLEET_VAR_DIR=str(var_dir), ALLOWED_HOSTS="*",
                      LOG_LEVEL="WARNING", **settings)
    _django(database_url)
    return redis_server


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


def _warm_up(args, agents) -> None:
    """Not measured: every worker compiles the report schema and opens its database connection on its first
    report, and the tables and indexes get cached, as on a server that has been up a while."""
    warm_lock = threading.Lock()
    warm = [threading.Thread(target=_worker, args=("127.0.0.1", args.port, agents[i::4], time.perf_counter() + 3,
                                                   [], [], warm_lock, args.gzip, 1)) for i in range(4)]
    for t in warm:
        t.start()
    for t in warm:
        t.join()


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


AGENT_TIMEOUT_S = 10.0  # fleet_agent.client.DEFAULT_TIMEOUT_S


def _requests_for(agents, count: int, host: str, port: int) -> list[bytes]:
    """`count` whole HTTP requests (gzip, like the agent), built before the measured phase so that the client
    spends the run on I/O only."""
    out = []
    for i in range(count):
        agent = agents[i % len(agents)]
        body = gzip.compress(orjson.dumps({"reports": [agent.next_report()]}), 1)
        head = (f"POST /api/v1/agent/reports HTTP/1.1\r\nHost: {host}:{port}\r\n"
                f"Authorization: Node {agent.credential}\r\nContent-Type: application/json\r\n"
                f"Content-Encoding: gzip\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n")
        out.append(head.encode() + body)
    return out


async def _exchange(host: str, port: int, payload: bytes) -> object:
    """One request on a new connection, as an agent sends it: its status, or what went wrong within the agent's
    timeout."""
    try:
        async with asyncio.timeout(AGENT_TIMEOUT_S):
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(payload)
            data = await reader.read()  # the server closes after the answer (Connection: close)
            writer.close()
        return int(data[9:12]) if data.startswith(b"HTTP/1.") else "bad answer"
    except TimeoutError:
        return "timeout"
    except OSError:
        return "connection error"


async def _closed_loop(host: str, port: int, payloads: list[bytes], concurrency: int, seconds: float) -> list[float]:
    """`concurrency` clients each sending the next payload as soon as they have an answer; latencies of the 200s."""
    latencies: list[float] = []
    pending = iter(payloads)
    deadline = time.perf_counter() + seconds

    async def client() -> None:
        for payload in pending:
            if time.perf_counter() >= deadline:
                return
            started = time.perf_counter()
            if await _exchange(host, port, payload) == 200:
                latencies.append(time.perf_counter() - started)

    await asyncio.gather(*(client() for _ in range(concurrency)))
    return latencies


async def _open_loop(host: str, port: int, payloads: list[bytes], rate: float) -> list[tuple[object, float]]:
    """Send payload i at start + i/rate whatever happened to earlier ones; (status or error, seconds from the
    scheduled time to the answer) per request."""
    results: list[tuple[object, float]] = []

    async def one(payload: bytes, scheduled: float) -> None:
        status = await _exchange(host, port, payload)
        results.append((status, time.perf_counter() - scheduled))

    loop_start = time.perf_counter() + 0.2
    tasks = []
    for i, payload in enumerate(payloads):
        scheduled = loop_start + i / rate
        delay = scheduled - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(payload, scheduled)))
    await asyncio.gather(*tasks)
    return results


def _quantiles_ms(values: list[float]) -> dict:
    if len(values) < 2:
        return {"p50_ms": None, "p99_ms": None, "max_ms": round(max(values) * 1000, 1) if values else None}
    q = statistics.quantiles(values, n=100)
    return {"p50_ms": round(q[49] * 1000, 1), "p99_ms": round(q[98] * 1000, 1), "max_ms": round(max(values) * 1000, 1)}


def _overload(args, agents) -> dict:
    """Closed loop to find capacity, then `args.overload` times that rate in open loop. Both from the same
    asyncio client with requests built beforehand, so the client's own CPU does not cap the capacity found."""
    calibration = _requests_for(agents, int(600 * args.calibrate_seconds), "127.0.0.1", args.port)
    started = time.perf_counter()
    latencies = asyncio.run(_closed_loop("127.0.0.1", args.port, calibration, args.threads, args.calibrate_seconds))
    capacity = len(latencies) / (time.perf_counter() - started)
    rate = args.rate or capacity * args.overload  # --rate fixes the offered rate (the same for runs to compare)
    payloads = _requests_for(agents, int(rate * args.seconds), "127.0.0.1", args.port)
    time.sleep(2)  # let the queue from the calibration drain
    started = time.perf_counter()
    results = asyncio.run(_open_loop("127.0.0.1", args.port, payloads, rate))
    elapsed = time.perf_counter() - started
    served = [t for status, t in results if status == 200]
    shed = [t for status, t in results if status == 503]
    other: dict = {}
    for status, _ in results:
        if status not in (200, 503):
            other[str(status)] = other.get(str(status), 0) + 1
    return {
        "when": datetime.now(UTC).isoformat(timespec="seconds"), "cpus": os.cpu_count(), "agents": args.agents,
        "gunicorn_workers": args.workers, "shedding": not args.no_shed,
        "capacity_requests_per_s": round(capacity, 1), "closed_loop_p99_ms": _quantiles_ms(latencies)["p99_ms"],
        "offered_requests_per_s": round(rate, 1), "requests": len(results), "seconds": round(elapsed, 1),
        "served": len(served), "served_per_s": round(len(served) / elapsed, 1), "served_latency": _quantiles_ms(served),
        "served_over_agent_timeout": sum(1 for t in served if t > AGENT_TIMEOUT_S),
        "shed_503": len(shed), "shed_latency": _quantiles_ms(shed), "no_answer_or_other": other,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agents", type=int, default=64)
    parser.add_argument("--threads", type=int, default=16, help="client connections")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--workers", type=int, default=3, help="gunicorn workers")
    parser.add_argument("--web-threads", type=int, default=4,
                        help="threads per gunicorn worker (gthread, as deployed; 1 = sync workers)")
    parser.add_argument("--no-fast-lane", action="store_true",
                        help="INGEST_FAST_LANE=false: queued reports take the general path (three Redis round trips)")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--gzip", action="store_true")
    parser.add_argument("--rate", type=float, default=0,
                        help="requests/s offered on a fixed schedule (open loop, like agents on their interval); "
                             "0 = closed loop: each client thread sends as soon as it has an answer (saturation)")
    parser.add_argument("--batch", type=int, default=1,
                        help="reports per request (1 = steady state; more = a spool flushing after an outage)")
    parser.add_argument("--overload", type=float, default=0,
                        help="offer this multiple of the measured capacity in open loop (asyncio client)")
    parser.add_argument("--calibrate-seconds", type=float, default=8, help="closed-loop capacity run before --overload")
    parser.add_argument("--no-shed", action="store_true", help="turn the server's overload shedding off")
    parser.add_argument("--redis-url", default="",
                        help="Redis for rate limits (and the queue); default: redis://127.0.0.1:6379/14 without "
                             "writers, a private redis-server with AOF (appendfsync always) with --writers")
    parser.add_argument("--writers", type=int, default=0,
                        help="queued ingest with this many fleet_writer processes (0: written in the request)")
    parser.add_argument("--writer-batch", type=int, default=500)
    parser.add_argument("--in-process", type=int, default=0, metavar="N",
                        help="instead of HTTP load: N requests through Django in this process, synchronous and "
                             "queued, with the CPU per report of this process, of its own PostgreSQL backend and of a "
                             "private Redis (robust on a shared box: CPU time of these processes only). A batch "
                             "keeps one status write per node, so PostgreSQL's share per report shows only with "
                             "--agents of about N/2 or more (32 agents: 0.07 ms, 1,000: 0.88 ms)")
    parser.add_argument("--rate-of-healthz", type=float, default=0,
                        help="open loop at this multiple of the /healthz rate measured in the same run")
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/fleet_bench")
    args = parser.parse_args()

    _ensure_database(args.database_url)
    if args.in_process:
        redis_server = in_process_django(args.database_url)
        try:
            print(json.dumps(_in_process(args, redis_server), indent=2))
        finally:
            redis_server.stop()
        return
    _django(args.database_url)
    import tempfile

    sim_dir = Path(tempfile.mkdtemp(prefix="bench-agents-"))
    agents = [SimAgent(n, c, sim_dir) for n, c in _enrol(args.agents)]
    var_dir = ROOT / "var" / f"bench-{uuid.uuid4().hex[:8]}"
    redis_server = None
    if not args.redis_url:
        if args.writers:
            redis_server = _private_redis(var_dir / "redis")
            args.redis_url = redis_server.url
        else:
            args.redis_url = "redis://127.0.0.1:6379/14"
    env = {**os.environ, "DATABASE_URL": args.database_url, "DJANGO_SETTINGS_MODULE": "config.settings.local",
           "FLEET_VAR_DIR": str(var_dir), "AGENT_RATE_LIMIT": "100000/min", "LOG_LEVEL": "WARNING",
           "DEBUG": "false", "REDIS_URL": args.redis_url, "INGEST_QUEUE": "true" if args.writers else "false",
           "INGEST_STREAM": f"bench:{uuid.uuid4().hex[:8]}", "INGEST_WRITER_BATCH": str(args.writer_batch)}
    if args.no_shed:
        env["WEB_QUEUE_MAX_MS"] = "0"
    if args.no_fast_lane:
        env["INGEST_FAST_LANE"] = "false"
    writers = [subprocess.Popen([sys.executable, "manage.py", "fleet_writer", "--consumer", f"bench-{n}"],
                                cwd=ROOT, env=env, stdout=subprocess.DEVNULL) for n in range(args.writers)]
    server = subprocess.Popen([sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{args.port}",
                               "--workers", str(args.workers), "--threads", str(args.web_threads), "--backlog", "1024",
                               "--log-level", "warning"],
                              cwd=ROOT, env=env)
    try:
        for _ in range(300):  # until a worker answers (the master accepts connections before they have booted)
            try:
                conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=10)
                conn.request("GET", "/healthz")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                time.sleep(0.2)
        if args.overload:
            _warm_up(args, agents)
            print(json.dumps(_overload(args, agents), indent=2))
            return
        web = (lambda cmd: "gunicorn" in cmd and "config.wsgi" in cmd)  # noqa: E731
        database = (lambda cmd: cmd.startswith("postgres"))  # noqa: E731
        writer_pids = {w.pid for w in writers}
        redis_pid = redis_server.proc.pid if redis_server else None
        healthz_seconds = min(5.0, args.seconds)
        web_cpu = _cpu_seconds(web)
        baseline = _healthz("127.0.0.1", args.port, healthz_seconds, args.threads)
        healthz_web_cpu = (_cpu_seconds(web) - web_cpu) / max(baseline * healthz_seconds, 1)
        if args.rate_of_healthz:
            args.rate = baseline * args.rate_of_healthz
        _warm_up(args, agents)
        if writers:
            _drain(args.redis_url, env["INGEST_STREAM"])
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
        writer_cpu, redis_cpu = _pid_cpu(writer_pids), _pid_cpu({redis_pid} if redis_pid else set())
        started = time.perf_counter()
        client_cpu = time.process_time()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - started
        client_cpu = time.process_time() - client_cpu
        drain_s = _drain(args.redis_url, env["INGEST_STREAM"]) if writers else 0.0
        web_cpu, db_cpu = _cpu_seconds(web) - web_cpu, _cpu_seconds(database) - db_cpu
        writer_cpu = _pid_cpu(writer_pids) - writer_cpu
        redis_cpu = _pid_cpu({redis_pid} if redis_pid else set()) - redis_cpu
    finally:
        server.terminate()
        server.wait(timeout=20)
        for w in writers:
            w.terminate()
            w.wait(timeout=30)
        if redis_server:
            redis_server.stop()
    rate = len(latencies) * args.batch / elapsed
    quantiles = statistics.quantiles(latencies, n=100) if len(latencies) > 100 else [float("nan")] * 99
    print(json.dumps({
        "when": datetime.now(UTC).isoformat(timespec="seconds"), "cpus": os.cpu_count(), "agents": args.agents,
        "gpus_per_report": 8, "client_threads": args.threads, "gunicorn_workers": args.workers,
        "threads_per_worker": args.web_threads, "fast_lane": not args.no_fast_lane, "gzip": args.gzip,
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
        "writers": args.writers,
        "writer_cpu_ms_per_report": round(1000 * writer_cpu / max(len(latencies) * args.batch, 1), 2)
        if writers else None,
        "redis_cpu_ms_per_report": round(1000 * redis_cpu / max(len(latencies) * args.batch, 1), 2)
        if redis_pid else None,
        "writer_drain_after_load_s": round(drain_s, 2) if writers else None,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }, indent=2))


def _in_process(args, redis_server) -> dict:
    """CPU per report of the request path in this process (Django's test client: no HTTP server, no client
    threads): synchronous, queued through the general path (INGEST_FAST_LANE off) and queued through the fast
    lane, and of the writer draining the queued ones; with the CPU of this process's own PostgreSQL backend and
    of the private Redis. `/healthz` the same way, as the baseline."""
    import tempfile

    from django.test import Client, override_settings

    from fleet.telemetry.services.writer import Writer

    sim_dir = Path(tempfile.mkdtemp(prefix="bench-agents-"))
    agents = [SimAgent(n, c, sim_dir) for n, c in _enrol(args.agents)]
    client = Client()
    database = args.database_url.rsplit("/", 1)[1]
    redis_pid = redis_server.proc.pid

    def backends() -> set[int]:  # this database's backends only (the server may be shared); not WAL writer etc.
        return {pid for pid in _pids(lambda cmd: cmd.startswith("postgres") and f" {database} " in cmd)}
    n = args.in_process

    def post_all(count: int) -> None:
        for i in range(count):
            agent = agents[i % len(agents)]
            body = orjson.dumps({"reports": [agent.next_report()]})
            response = client.post("/api/v1/agent/reports", body, content_type="application/json",
                                   HTTP_AUTHORIZATION=f"Node {agent.credential}")
            assert response.status_code == 200, response.content

    def measure(action) -> dict:
        pids = backends()
        me, pg, rd = time.process_time(), _pid_cpu(pids), _pid_cpu({redis_pid})
        wall = time.perf_counter()
        action()
        pids_after = backends()
        if pids_after != pids:
            print(f"note: backends changed during the measurement ({len(pids)} -> {len(pids_after)})")
        return {"cpu_ms": 1000 * (time.process_time() - me), "postgres_ms": 1000 * (_pid_cpu(pids_after) - pg),
                "redis_ms": 1000 * (_pid_cpu({redis_pid}) - rd), "wall_ms": 1000 * (time.perf_counter() - wall)}

    out: dict = {"when": datetime.now(UTC).isoformat(timespec="seconds"), "agents": args.agents, "requests": n,
                 "load_average_before": [round(x, 2) for x in os.getloadavg()]}
    for agent in agents:  # first reports carry the inventory: written in the request either way
        client.post("/api/v1/agent/reports", orjson.dumps({"reports": [agent.next_report()]}),
                    content_type="application/json", HTTP_AUTHORIZATION=f"Node {agent.credential}")
    healthz = measure(lambda: [client.get("/healthz") for _ in range(n)])
    out["healthz_cpu_ms_per_request"] = round(healthz["cpu_ms"] / n, 3)
    for mode in ("synchronous", "queued_general_path", "queued"):
        queued = mode.startswith("queued")
        with override_settings(INGEST_QUEUE=queued, INGEST_FAST_LANE=mode == "queued"):
            post_all(100)  # warm
            while queued and Writer(block_ms=10).step():
                pass
            web = measure(lambda: post_all(n))
            row = {"web_cpu_ms_per_report": round(web["cpu_ms"] / n, 3),
                   "web_postgres_ms_per_report": round(web["postgres_ms"] / n, 3),
                   "web_redis_ms_per_report": round(web["redis_ms"] / n, 3)}
            if queued:
                w = measure(lambda: _drain_in_process(Writer(block_ms=10)))
                row.update(writer_cpu_ms_per_report=round(w["cpu_ms"] / n, 3),
                           writer_postgres_ms_per_report=round(w["postgres_ms"] / n, 3),
                           writer_redis_ms_per_report=round(w["redis_ms"] / n, 3),
                           writer_drain_ms_per_report=round(w["wall_ms"] / n, 3))
            total = sum(v for k, v in row.items() if k.endswith("ms_per_report") and "drain" not in k)
            row["all_processes_cpu_ms_per_report"] = round(total, 3)
            row["web_cpu_ratio_healthz_to_report"] = round(out["healthz_cpu_ms_per_request"]
                                                           / row["web_cpu_ms_per_report"], 3)
            out[mode] = row
    out["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return out


def _pids(match) -> list[int]:
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if match(cmdline + " "):
            out.append(int(pid))
    return out


def _drain_in_process(writer) -> None:
    while writer.step():
        pass


def _private_redis(workdir: Path):
    """A redis-server of the benchmark's own, persisted as production runs it for the ingest queue."""
    import socket

    class Server:
        pass

    workdir.mkdir(parents=True, exist_ok=True)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = Server()
    server.url = f"redis://127.0.0.1:{port}/0"
    server.proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                    "--appendonly", "yes", "--appendfsync", "always", "--dir", str(workdir)],
                                   stdout=subprocess.DEVNULL)

    def stop():
        server.proc.terminate()
        server.proc.wait(timeout=10)

    server.stop = stop
    import redis

    for _ in range(100):
        try:
            redis.Redis.from_url(server.url).ping()
            break
        except redis.RedisError:
            time.sleep(0.05)
    return server


def _pid_cpu(pids: set[int]) -> float:
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _drain(redis_url: str, stream: str, timeout: float = 120.0) -> float:
    """Seconds until the writers have stored every queued entry (stream empty, nothing pending)."""
    import redis

    client = redis.Redis.from_url(redis_url)
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        try:
            pending = client.xpending(stream, "writers")["pending"]
        except redis.ResponseError:
            pending = 0
        if client.xlen(stream) == 0 and pending == 0:
            return time.perf_counter() - started
        time.sleep(0.05)
    raise SystemExit(f"the writers did not drain {stream} within {timeout} s")


if __name__ == "__main__":
    main()
