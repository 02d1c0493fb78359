"""Soak: a simulated fleet against the whole stack on this machine, with the health cycle and silence sweep running.

    .venv/bin/python bench/soak.py                                  # 10,000 nodes, every 30 s, 10 minutes
    .venv/bin/python bench/soak.py --nodes 2000 --minutes 3         # a short first try
    .venv/bin/python bench/soak.py --interval 15 --web-workers 12 --writers 4 --celery-concurrency 4   # 16 cores

The stack is what production runs, each as its own process: gunicorn (`--web-workers`), `manage.py fleet_writer`
(`--writers`), a Celery worker and Celery beat (the beat schedule of the settings: health cycle every 15 s,
silence sweep every 15 s, rollups, pruning), a private redis-server persisted as compose runs it (append-only
file, `appendfsync always`), and PostgreSQL (a scratch database, `fleet_soak` unless --database-url).

The fleet is created directly in the database (nodes, credentials, 8 GPUs each, agent epochs: setup, not measured)
and then driven by one asyncio client: every node sends one steady report per interval at its own phase, over a
new connection as agents do. Reports are pre-built per node (GPU uuids and node id baked in); each send only
splices in a fresh sequence number and timestamp. Latency is counted from each report's scheduled time (no
coordinated omission). The client's own CPU is reported apart from the stack's.

Checked and printed as JSON: ingest p50/p99 (after warm-up), errors, nodes ever seen silent (sampled every 5 s;
none may be), the health cycle's duration (from the worker's log), resident memory of every process sampled over
the run (after warm-up it must stay flat: first vs last third), the ingest queue depth (sampled every 2 s), CPU per
report of each process group, and the load average (the box may be shared), with PostgreSQL's settings that shape
the figures and the autovacuums and checkpoints that fell inside the run. Exit status 1 if a target is missed.
"""

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "agents"))

TARGET_P99_MS = 250
# Threads per gunicorn worker, as compose, the Dockerfile and runstack run it (docs/deploy.md): a request waiting
# on Redis' fsync holds a thread, not a whole worker.
WEB_THREADS = 4
TARGET_CYCLE_S = 2.0
AGENT_TIMEOUT_S = 10.0


def _ensure_database(database_url: str) -> None:
    import psycopg

    name = database_url.rsplit("/", 1)[1]
    admin = database_url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def _fleet(count: int, instance: str) -> list[tuple[int, str]]:
    """`count` nodes with a credential, 8 GPUs and an agent epoch each, created set-based; (node id, credential)."""
    from django.core.management import call_command

    from fleet.core.secrets import hash_secret, new_secret
    from fleet.inventory.models import GPU, Node, Provider
    from fleet.telemetry.models import AgentEpoch, NodeCredential

    call_command("migrate", verbosity=0)
    provider = Provider.objects.create(name="Soak cloud", slug="soak", kind="cloud", cloud="aws")
    nodes = Node.objects.bulk_create([
        Node(hostname=f"soak-{i}", machine_id=f"soak-{i:012d}", provider=provider, delivery_form="cloud_dedicated",
             billing_mode="on_demand", expected_gpu_count=8, expected_gpu_model="NVIDIA H100 80GB HBM3",
             state="active") for i in range(count)], batch_size=2000)
    credentials, rows = [], []
    for node in nodes:
        key, prefix, _ = new_secret("fn_")
        credentials.append((node.pk, key))
        rows.append(NodeCredential(node=node, prefix=prefix, key_hash=hash_secret(key)))
    NodeCredential.objects.bulk_create(rows, batch_size=2000)
    GPU.objects.bulk_create([
        GPU(node=node, index=i, uuid=_gpu_uuid(node.pk, i), model="NVIDIA H100 80GB HBM3",
            memory_total_bytes=85520809984, serial=f"S{node.pk:08d}{i}", pci_bus_id=f"00000000:{i + 1:02x}:00.0",
            compute_capability="9.0") for node in nodes for i in range(8)], batch_size=5000)
    AgentEpoch.objects.bulk_create([AgentEpoch(node=node, instance_id=instance, last_sequence=0) for node in nodes],
                                   batch_size=5000)
    return credentials


def _gpu_uuid(node_id: int, index: int) -> str:
    return f"GPU-{node_id:08x}-{index:04x}-4000-8000-{node_id:012x}"


def _templates(credentials, instance: str, interval: int, host: str, port: int) -> list[tuple[bytes, bytes, bytes]]:
    """Per node: the request split around its sequence number and its timestamp, so a send is two splices."""
    from fleet_agent.simulator import SimulatedAgent, load_scenario

    work = Path(tempfile.mkdtemp(prefix="soak-agent-"))
    agent = SimulatedAgent.from_scenario(load_scenario("healthy"), 1, work_dir=work)
    base = agent.step(0.0)
    agent.close()
    base["inventory"] = None
    base["events"] = []
    base["interval_s"] = interval
    base["agent"]["instance_id"] = instance
    out = []
    for node_id, credential in credentials:
        report = dict(base, node={**base["node"], "node_id": node_id},
                      gpus=[dict(g, uuid=_gpu_uuid(node_id, g["index"])) for g in base["gpus"]],
                      sequence=987654321012, collected_at="2000-01-01T00:00:00.000Z")
        body = orjson.dumps({"reports": [report]})
        before_seq, after_seq = body.split(b"987654321012")
        middle, after_time = after_seq.split(b"2000-01-01T00:00:00.000Z")
        head = (f"POST /api/v1/agent/reports HTTP/1.1\r\nHost: {host}:{port}\r\n"
                f"Authorization: Node {credential}\r\nContent-Type: application/json\r\nConnection: close\r\n"
                "Content-Length: ").encode()
        out.append((head, before_seq, middle, after_time))
    return out


class Client:
    """The simulated fleet: one asyncio loop, every node on its interval at its own phase."""

    def __init__(self, templates, interval: float, seconds: float, host: str, port: int):
        self.templates = templates
        self.interval = interval
        self.seconds = seconds
        self.host, self.port = host, port
        self.results: list[tuple[float, float, object]] = []  # (scheduled offset, latency, status)
        self.sequence = [0] * len(templates)

    def payload(self, i: int) -> bytes:
        self.sequence[i] += 1
        head, before, middle, after = self.templates[i]
        stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z").encode()
        body = b"".join((before, str(self.sequence[i]).encode(), middle, stamp, after))
        return b"".join((head, str(len(body)).encode(), b"\r\n\r\n", body))

    async def one(self, i: int, scheduled: float, start: float) -> None:
        status: object
        try:
            async with asyncio.timeout(AGENT_TIMEOUT_S):
                reader, writer = await asyncio.open_connection(self.host, self.port)
                writer.write(self.payload(i))
                data = await reader.read()
                writer.close()
            status = int(data[9:12]) if data.startswith(b"HTTP/1.") else "bad answer"
        except TimeoutError:
            status = "timeout"
        except OSError:
            status = "connection error"
        self.results.append((scheduled - start, time.perf_counter() - scheduled, status))

    async def run(self) -> None:
        n = len(self.templates)
        start = time.perf_counter() + 0.5
        tasks: set = set()
        k = 0
        while True:
            slot, i = divmod(k, n)
            scheduled = start + slot * self.interval + i * self.interval / n
            if scheduled - start >= self.seconds:
                break
            delay = scheduled - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            task = asyncio.create_task(self.one(i, scheduled, start))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            k += 1
        await asyncio.gather(*tasks)


class Sampler(threading.Thread):
    """Every few seconds: RSS and CPU of each process, ingest queue depth, silent nodes."""

    def __init__(self, groups: dict, redis_url: str, stream: str, database_url: str):
        super().__init__(daemon=True)
        self.groups = groups  # name -> callable giving pids
        self.cpu = CpuLedger(groups)
        self.redis_url, self.stream, self.database_url = redis_url, stream, database_url
        self.stop = threading.Event()
        self.rss: dict[str, list[tuple[float, int]]] = {}
        self.depth: list[tuple[float, int, int]] = []
        self.silent: list[tuple[float, int]] = []
        self.ever_silent: set[int] = set()
        self.started = time.perf_counter()

    def run(self) -> None:
        import psycopg
        import redis

        client = redis.Redis.from_url(self.redis_url)
        db = psycopg.connect(self.database_url, autocommit=True)
        tick = 0
        while not self.stop.wait(1.0):
            t = time.perf_counter() - self.started
            tick += 1
            self.cpu.sample()
            if tick % 2 == 0:
                try:
                    pending = client.xpending(self.stream, "writers")["pending"]
                except redis.ResponseError:
                    pending = 0
                self.depth.append((t, client.xlen(self.stream), pending))
            if tick % 5 == 0:
                rows = db.execute("SELECT node_id FROM telemetry_nodestatus WHERE silent").fetchall()
                self.silent.append((t, len(rows)))
                self.ever_silent.update(r[0] for r in rows)
                for name, pids in self.groups.items():
                    for pid in pids():
                        self.rss.setdefault(f"{name}:{pid}", []).append((t, _rss_kb(pid)))


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _pid_cpu(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuLedger:
    """CPU seconds of each process group over the run, per process: a process there at the start counts from its
    reading then, one that appears later (a PostgreSQL backend, a Celery child) from zero, and each counts up to
    its last reading (sampled every second, so a process that exits loses at most its last second). Summing one
    set of pids at the start and another at the end, as this bench first did, lost every backend that came or
    went in between."""

    def __init__(self, groups: dict):
        self.groups = groups
        self.first: dict[tuple[str, int], float] = {}
        self.last: dict[tuple[str, int], float] = {}
        self.sample(baseline=True)

    def sample(self, *, baseline: bool = False) -> None:
        for name, pids in self.groups.items():
            for pid in pids():
                cpu = _pid_cpu(pid)
                if cpu is None:
                    continue
                key = (name, pid)
                if key not in self.first:
                    self.first[key] = cpu if baseline else 0.0
                self.last[key] = cpu

    def seconds(self) -> dict[str, float]:
        out = dict.fromkeys(self.groups, 0.0)
        for key, last in self.last.items():
            out[key[0]] += last - self.first[key]
        return out


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        path = Path(f"/proc/{p}/task/{p}/children")
        if path.exists():
            todo.extend(int(c) for c in path.read_text().split())
    return out


# The server settings that shape a soak's figures, recorded with them: a development or CI server often runs
# with autovacuum off, which production never should (docs/deploy.md), and the WAL and buffer settings decide
# how often checkpoints land inside the run.
POSTGRES_SETTINGS = ["autovacuum", "shared_buffers", "max_wal_size", "checkpoint_timeout", "work_mem", "fsync",
                     "synchronous_commit", "max_parallel_workers_per_gather"]


def _postgres_state(database_url: str) -> dict:
    """The server's settings above, and its counters of autovacuum/autoanalyze runs and checkpoints so far."""
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as conn:
        settings = dict(conn.execute("SELECT name, current_setting(name) FROM pg_settings WHERE name = ANY(%s)",
                                     [POSTGRES_SETTINGS]).fetchall())
        vacuums, analyzes = conn.execute("SELECT coalesce(sum(autovacuum_count), 0), "
                                         "coalesce(sum(autoanalyze_count), 0) FROM pg_stat_user_tables").fetchone()
        newer = conn.execute("SELECT to_regclass('pg_catalog.pg_stat_checkpointer') IS NOT NULL").fetchone()[0]
        timed, requested = conn.execute(  # PostgreSQL 17 moved the counters to their own view
            "SELECT num_timed, num_requested FROM pg_stat_checkpointer" if newer
            else "SELECT checkpoints_timed, checkpoints_req FROM pg_stat_bgwriter").fetchone()
    return {"settings": settings, "autovacuums": int(vacuums), "autoanalyzes": int(analyzes),
            "checkpoints": int(timed) + int(requested)}


def _postgres_pids(database: str) -> list[int]:
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if cmd.startswith("postgres") and f" {database} " in f"{cmd} ":
            pids.append(int(pid))
    return pids


def _quantiles(values: list[float]) -> dict:
    if len(values) < 100:
        return {"p50_ms": None, "p99_ms": None}
    q = statistics.quantiles(values, n=100)
    return {"p50_ms": round(q[49] * 1000, 1), "p99_ms": round(q[98] * 1000, 1),
            "max_ms": round(max(values) * 1000, 1)}


def _flat(series: list[tuple[float, int]], warmup_s: float) -> dict:
    """Median RSS of the first and last third after warm-up; 'flat' if it grew less than 10 % and 20 MB."""
    after = [kb for t, kb in series if t >= warmup_s and kb]
    if len(after) < 6:
        return {"samples": len(after)}
    third = len(after) // 3
    first, last = statistics.median(after[:third]), statistics.median(after[-third:])
    grew = last - first
    return {"first_mb": round(first / 1024, 1), "last_mb": round(last / 1024, 1), "max_mb": round(max(after) / 1024, 1),
            "flat": grew < max(0.10 * first, 20 * 1024)}


def main() -> None:  # noqa: C901 (one run, start to finish)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--interval", type=int, default=30, help="seconds between a node's reports")
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--warmup-minutes", type=float, default=None,
                        help="left out of latency and memory checks (default: 2, or a quarter of a shorter run)")
    parser.add_argument("--web-workers", type=int, default=3)
    parser.add_argument("--threads", type=int, default=WEB_THREADS,
                        help="threads per gunicorn worker (gthread; 1 = sync workers)")
    parser.add_argument("--appendfsync", choices=["always", "everysec"], default="always",
                        help="Redis AOF fsync policy (always: an acknowledged report survives a host crash)")
    parser.add_argument("--writers", type=int, default=1)
    parser.add_argument("--celery-concurrency", type=int, default=1)
    parser.add_argument("--port", type=int, default=8790)
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/fleet_soak")
    parser.add_argument("--json", default="", help="also write the result to this file")
    args = parser.parse_args()
    if args.warmup_minutes is None:
        args.warmup_minutes = min(2.0, args.minutes / 4)

    _ensure_database(args.database_url)
    var_dir = ROOT / "var" / f"soak-{uuid.uuid4().hex[:8]}"
    (var_dir / "redis").mkdir(parents=True)
    redis_port = args.port + 1
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    stream = "soak:ingest"
    env = {**os.environ, "DATABASE_URL": args.database_url, "DJANGO_SETTINGS_MODULE": "config.settings.local",
           "FLEET_VAR_DIR": str(var_dir), "REDIS_URL": redis_url, "INGEST_QUEUE": "true", "INGEST_STREAM": stream,
           "DEBUG": "false", "LOG_LEVEL": "WARNING", "AGENT_RATE_LIMIT": "100000/min",
           "PROMETHEUS_MULTIPROC_DIR": str(var_dir / "prometheus")}
    (var_dir / "prometheus").mkdir()
    os.environ.update({k: env[k] for k in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "FLEET_VAR_DIR", "REDIS_URL")})
    import django

    django.setup()
    instance = str(uuid.uuid4())
    setup_started = time.perf_counter()
    credentials = _fleet(args.nodes, instance)
    templates = _templates(credentials, instance, args.interval, "127.0.0.1", args.port)
    setup_s = time.perf_counter() - setup_started

    procs: dict[str, subprocess.Popen] = {}
    logs = var_dir / "logs"
    logs.mkdir()

    def start(name, command):
        with open(logs / f"{name}.log", "wb") as out:
            procs[name] = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)

    python = sys.executable
    start("redis", ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "yes", "--appendfsync", args.appendfsync, "--dir", str(var_dir / "redis")])
    time.sleep(0.5)
    start("web", [python, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{args.port}", "--workers",
                  str(args.web_workers), "--threads", str(args.threads), "--backlog", "2048", "--log-level", "warning"])
    for n in range(args.writers):
        start(f"writer{n}", [python, "manage.py", "fleet_writer", "--consumer", f"soak-{n}"])
    start("worker", [python, "-m", "celery", "-A", "config", "worker", "--loglevel", "INFO", "--concurrency",
                     str(args.celery_concurrency), "--without-gossip", "--without-mingle"])
    start("beat", [python, "-m", "celery", "-A", "config", "beat", "--loglevel", "INFO", "--schedule",
                   str(var_dir / "beat-schedule")])
    try:
        _wait_http(args.port)
        groups = {name: (lambda p=proc: _tree(p.pid)) for name, proc in procs.items()}
        database = args.database_url.rsplit("/", 1)[1]
        groups["postgres"] = lambda: _postgres_pids(database)
        sampler = Sampler(groups, redis_url, stream, args.database_url)
        sampler.start()
        client_cpu = time.process_time()
        load_before = os.getloadavg()
        postgres_before = _postgres_state(args.database_url)
        seconds = args.minutes * 60
        client = Client(templates, args.interval, seconds, "127.0.0.1", args.port)
        asyncio.run(client.run())
        client_cpu = time.process_time() - client_cpu
        sampler.cpu.sample()
        cpu = sampler.cpu.seconds()
        time.sleep(3)
        sampler.stop.set()
        sampler.join(timeout=10)
        load_after = os.getloadavg()
        postgres_after = _postgres_state(args.database_url)
    finally:
        for proc in procs.values():
            proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()

    warmup = args.warmup_minutes * 60
    steady = [latency for at, latency, status in client.results if at >= warmup and status == 200]
    failed: dict[str, int] = {}
    failed_when: dict[str, list[float]] = {}  # scheduled offsets of the first and last failure of each kind
    for at, _, status in client.results:
        if status != 200:
            failed[str(status)] = failed.get(str(status), 0) + 1
            when = failed_when.setdefault(str(status), [at, at])
            when[0], when[1] = min(when[0], at), max(when[1], at)
    reports = sum(1 for *_, status in client.results if status == 200)
    cycles = [float(m) for m in re.findall(rb"Task health\.evaluate_fleet\[[^\]]+\] succeeded in ([0-9.]+)s",
                                           (logs / "worker.log").read_bytes())]
    sweeps = len(re.findall(rb"Task telemetry\.mark_silent_nodes\[[^\]]+\] succeeded",
                            (logs / "worker.log").read_bytes()))
    memory = {name: _flat(series, warmup) for name, series in sorted(sampler.rss.items())}
    latency = _quantiles(steady)
    result = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"), "cpus": os.cpu_count(), "nodes": args.nodes,
        "interval_s": args.interval, "minutes": args.minutes, "warmup_minutes": args.warmup_minutes,
        "web_workers": args.web_workers, "threads_per_worker": args.threads, "appendfsync": args.appendfsync,
        "writers": args.writers, "celery_concurrency": args.celery_concurrency,
        "setup_s": round(setup_s, 1), "requests": len(client.results), "reports_stored_ok": reports,
        "offered_reports_per_s": round(args.nodes / args.interval, 1), "failed": failed,
        "failed_between_s": {k: [round(v[0], 1), round(v[1], 1)] for k, v in failed_when.items()},
        "failed_after_warmup": sum(1 for at, _, status in client.results if status != 200 and at >= warmup),
        "ingest_after_warmup": latency, "health_cycles": len(cycles),
        "health_cycle_s": {"median": round(statistics.median(cycles), 2) if cycles else None,
                           "max": round(max(cycles), 2) if cycles else None,
                           "over_target": sum(1 for c in cycles if c >= TARGET_CYCLE_S),
                           "each": [round(c, 2) for c in cycles]},
        "silence_sweeps": sweeps, "nodes_ever_silent": len(sampler.ever_silent),
        "queue_depth": {"max_entries": max((d[1] for d in sampler.depth), default=None),
                        "max_pending": max((d[2] for d in sampler.depth), default=None),
                        "last_entries": sampler.depth[-1][1] if sampler.depth else None},
        "cpu_ms_per_report": {name: round(1000 * s / max(reports, 1), 3) for name, s in cpu.items()},
        "client_cpu_ms_per_report": round(1000 * client_cpu / max(reports, 1), 3),
        "cpu_cores_used": {name: round(s / seconds, 2) for name, s in cpu.items()},
        "rss": memory, "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after], "logs": str(logs),
        "postgres": {"settings": postgres_after["settings"], **{
            f"{name}_during_run": postgres_after[name] - postgres_before[name]
            for name in ("autovacuums", "autoanalyzes", "checkpoints")}},
    }
    result["targets"] = {
        "ingest_p99_under_250ms": latency.get("p99_ms") is not None and latency["p99_ms"] < TARGET_P99_MS,
        "no_node_falsely_silent": not sampler.ever_silent,
        "rule_cycle_under_2s": bool(cycles) and max(cycles) < TARGET_CYCLE_S,
        # PostgreSQL backends' RSS grows as they touch more of the shared buffers: not counted here.
        "memory_flat": all(m.get("flat", True) for name, m in memory.items() if not name.startswith("postgres:")),
        "no_failed_requests": not failed,
    }
    growing = sorted(name for name, m in memory.items() if not name.startswith("postgres:") and not m.get("flat", True))
    shown = {
        "ingest_p99_under_250ms": (f"p99 {latency.get('p99_ms')} ms (p50 {latency.get('p50_ms')} ms)", "< 250 ms"),
        "no_node_falsely_silent": (f"{len(sampler.ever_silent)} nodes ever silent", "0"),
        "rule_cycle_under_2s": (f"{len(cycles)} cycles, median {result['health_cycle_s']['median']} s, max "
                                f"{result['health_cycle_s']['max']} s", "max < 2 s"),
        "memory_flat": (f"growing: {', '.join(growing) or 'none'}", "flat after warm-up"),
        "no_failed_requests": (f"{sum(failed.values())} of {len(client.results)} failed {failed or ''}", "0"),
    }
    text = json.dumps(result, indent=2)
    print(text)
    load = f"load average {result['load_average_before']} before, {result['load_average_after']} after"
    print(f"\n{args.nodes} nodes every {args.interval} s for {args.minutes} min ({load}):", file=sys.stderr)
    for name, ok in result["targets"].items():
        figure, target = shown[name]
        print(f"  {'PASS' if ok else 'FAIL'}  {name:24s} {figure}  (target {target})", file=sys.stderr)
    postgres = result["postgres"]
    print(f"  PostgreSQL: {', '.join(f'{k}={v}' for k, v in sorted(postgres['settings'].items()))}; during the run "
          f"{postgres['autovacuums_during_run']} autovacuums, {postgres['autoanalyzes_during_run']} autoanalyzes, "
          f"{postgres['checkpoints_during_run']} checkpoints", file=sys.stderr)
    if postgres["settings"].get("autovacuum") != "on":
        print("  NOTE  this PostgreSQL runs with autovacuum off, which production must not: the figures leave out "
              "its cost", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(text)
    sys.exit(0 if all(result["targets"].values()) else 1)


def _wait_http(port: int) -> None:
    import http.client

    for _ in range(600):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("the web server did not come up")


if __name__ == "__main__":
    main()
