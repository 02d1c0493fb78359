"""Detection latency, end to end: from the moment an Xid line is written to the kernel log until its finding is
visible through the REST API — the real agent daemon, gunicorn, a real Celery worker, PostgreSQL and Redis on this
machine.

    .venv/bin/python bench/detection_latency.py --trials 20

The agent is the real `fleet-agent run` daemon (in this process, on simulated NVML) reading kmsg records from a FIFO
that stands in for /dev/kmsg (writing to the real /dev/kmsg needs root); the records are in /dev/kmsg's own format
(`prio,seq,usec,flags;message`). Two designs are measured in the same run, on the same server and worker:

* stream — the watcher blocks on the kernel log with poll(2) and reads each record as it is written (this design);
* poll — the previous design: the watcher reads the kernel log every `notice_poll_s` (5 s, the default).

Each trial writes one Xid (a new GPU/code pair, so each opens a new finding) and polls
`GET /api/v1/findings/?node=…&rule=xid&state=open` every 20 ms until the finding is there. The clock starts just
before the write. Printed: p50 / p90 / p99 / max per design, and the ratio poll ÷ stream of the medians; and the
median of each stage: `agent_to_stored` (write → the event row stored: the agent's read, its urgent report, the
POST and ingestion), `stored_to_evaluation` (→ the evaluation that opened the finding started: the Celery hop),
`evaluation_to_api` (→ the API answer shows it: evaluation, commit, the request), and `finding_committed` (write →
the finding row exists, polled in the database alongside). Target: p99 ≤ 1 s for the stream design.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "agents"))
sys.path.insert(0, str(ROOT / "bench"))

from ingest import _ensure_database  # noqa: E402  (shared helper of the ingest benchmark)

# Xid codes whose finding opens at once (none is "ignore" in the policy table); with 8 GPUs: 96 distinct subjects.
XID_CODES = [79, 48, 63, 64, 92, 94, 95, 119, 74, 31, 43, 13]
FIXTURES = ROOT / "tests" / "agents" / "fixtures"


def _wait_http(port: int, seconds: float = 60) -> None:
    import http.client

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("server did not start")


def _percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


class Node:
    """One enrolled node: the real agent daemon reading kmsg records from a FIFO."""

    def __init__(self, name: str, server: str, token: str, work: Path, *, stream: bool):
        from fleet_agent.client import ControlPlaneClient
        from fleet_agent.config import load_config
        from fleet_agent.credentials import credential_path
        from fleet_agent.daemon import Daemon
        from fleet_agent.enroll import enroll
        from fleet_agent.simnvml import SimulatedGpu, SimulatedNvml

        self.dir = work / name
        self.dir.mkdir(parents=True)
        proc = self.dir / "proc"
        shutil.copytree(FIXTURES / "proc" / "t0", proc)
        (proc / "sys/kernel/random/boot_id").write_text(f"{uuid.uuid4()}\n")
        self.fifo = self.dir / "kmsg"
        os.mkfifo(self.fifo)
        self.writer = os.open(self.fifo, os.O_RDWR | os.O_NONBLOCK)  # held open, as the kernel holds /dev/kmsg
        config = load_config(config_file=None, environ={}, flags={
            "server": server, "state_dir": str(self.dir / "state"), "interval_s": "60", "notice_poll_s": "5",
            "kernel_log": f"kmsg:{self.fifo}", "cloud": "none", "nvml_events": "off", "proc_root": str(proc),
            "host_root": str(FIXTURES / "host"), "stack_refresh_s": "3600", "log_level": "warning"})
        facts = {"machine_id": uuid.uuid4().hex, "hostname": name, "agent_version": "0.1.0", "gpu_count": 8}
        self.node_id = enroll(ControlPlaneClient(server), token, facts,
                              credential_file=credential_path(self.dir / "state")).node_id
        self.nvml = SimulatedNvml([SimulatedGpu.from_model("H100-SXM-80GB", i, node_key=name) for i in range(8)])
        self.daemon = Daemon(config, nvml_module=self.nvml)
        if not stream:  # the previous design: nothing waits on the log, the watcher's timer reads it every 5 s
            self.daemon.core.wait_kernel_log = lambda timeout_s: None
        self.thread = threading.Thread(target=self.daemon.run, daemon=True)
        self.thread.start()
        self.seq = 1000

    def write_xid(self, gpu: int, code: int) -> None:
        self.seq += 1
        bus = self.nvml.gpus[gpu].bus_id  # 00000000:18:00.0
        short = bus[4:].rsplit(".", 1)[0]  # 0000:18:00, as NVRM prints it
        line = (f"3,{self.seq},{int(time.monotonic() * 1e6)},-;NVRM: Xid (PCI:{short}): {code}, pid=4242, "
                f"name=python3, bench fault\n")
        os.write(self.writer, line.encode())

    def stop(self) -> None:
        self.daemon.stop_event.set()
        self.thread.join(timeout=20)
        os.close(self.writer)


def _measure(node: Node, api, server: str, trials: int, settle_s: float) -> tuple[list[float], dict]:
    from fleet.health.models import Finding
    from fleet.telemetry.models import Event

    seen: set[str] = set()
    latencies = []
    stages: dict[str, list[float]] = {"agent_to_stored": [], "stored_to_evaluation": [], "evaluation_to_api": [],
                                      "finding_committed": []}
    for trial in range(trials):
        gpu, code = trial % 8, XID_CODES[(trial // 8) % len(XID_CODES)]
        time.sleep(settle_s)  # let the previous urgent report and evaluation finish, and decorrelate from timers
        started, wall = time.perf_counter(), time.time()
        node.write_xid(gpu, code)
        url = f"{server}/api/v1/findings/?node={node.node_id}&rule=xid&state=open&page_size=200"
        committed = None
        while True:
            if committed is None and Finding.objects.filter(node_id=node.node_id, rule__slug="xid",
                                                            state="open").exclude(subject__in=seen).exists():
                committed = time.perf_counter() - started  # the row is there; the API answer follows
            subjects = {row["subject"] for row in api.get(url, timeout=10).json()["results"]}
            new = subjects - seen
            if new:
                seen |= new
                latencies.append(time.perf_counter() - started)
                # Where the time went (wall clocks of this machine; the database stamps are the server's).
                event = Event.objects.filter(node_id=node.node_id, kind="xid", code=code).latest("id")
                finding = Finding.objects.filter(node_id=node.node_id, subject__in=new).latest("id")
                stored = event.received_at.timestamp() - wall
                opened = finding.opened_at.timestamp() - wall  # the evaluation's clock (duration 0: when it ran)
                stages["agent_to_stored"].append(stored)
                stages["stored_to_evaluation"].append(opened - stored)
                stages["evaluation_to_api"].append(latencies[-1] - opened)
                stages["finding_committed"].append(committed if committed is not None else latencies[-1])
                break
            if time.perf_counter() - started > 30:
                raise RuntimeError(f"node {node.node_id}: no finding 30 s after Xid {code} on GPU {gpu}")
            time.sleep(0.02)
    return latencies, {name: round(statistics.median(values) * 1000, 1) for name, values in stages.items()}


def _summary(values: list[float]) -> dict:
    return {"trials": len(values), "p50_ms": round(statistics.median(values) * 1000, 1),
            "p90_ms": round(_percentile(values, 90) * 1000, 1), "p99_ms": round(_percentile(values, 99) * 1000, 1),
            "max_ms": round(max(values) * 1000, 1), "mean_ms": round(statistics.fmean(values) * 1000, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--poll-trials", type=int, default=None, help="trials of the polling design (default: same)")
    parser.add_argument("--settle", type=float, default=1.3, help="seconds between trials")
    parser.add_argument("--port", type=int, default=8766)
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/fleet_bench_latency")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/12")
    args = parser.parse_args()

    _ensure_database(args.database_url)
    var_dir = Path(tempfile.mkdtemp(prefix="bench-latency-"))
    env = {**os.environ, "DATABASE_URL": args.database_url, "REDIS_URL": args.redis_url, "DEBUG": "false",
           "DJANGO_SETTINGS_MODULE": "config.settings.local", "FLEET_VAR_DIR": str(var_dir), "LOG_LEVEL": "WARNING",
           # the server and worker import this checkout's fleet and fleet_agent, not another installed copy
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "agents"), os.environ.get("PYTHONPATH", "")])}
    os.environ.update({k: env[k] for k in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "FLEET_VAR_DIR")})
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    import logging

    import redis
    import requests

    logging.getLogger("fleet_agent").setLevel(logging.ERROR)
    redis.Redis.from_url(args.redis_url).flushdb()
    from fleet.accounts.models import User
    from fleet.accounts.services import api_token_create
    from fleet.inventory.models import Pool, Provider
    from fleet.telemetry.models import NodeStatus
    from fleet.telemetry.services.enrollment import enrollment_token_create

    user = User.objects.create(username="bench", role="admin")
    _, key = api_token_create(user=user, name="bench")
    provider = Provider.objects.create(slug="own", name="own", kind="own")
    pool = Pool.objects.create(name="bench", provider=provider, delivery_form="bare_metal_owned",
                               billing_mode="reserved", gpu_model="NVIDIA H100 80GB HBM3", gpus_per_node=8)
    _, token = enrollment_token_create(actor=user, name="bench", provider=provider, pool=pool,
                                       delivery_form="bare_metal_owned", billing_mode="reserved", max_uses=10)
    processes = [
        subprocess.Popen([sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{args.port}",
                          "--workers", "2", "--log-level", "warning"], cwd=ROOT, env=env),
        subprocess.Popen([sys.executable, "-m", "celery", "-A", "config", "worker", "--concurrency", "2",
                          "--loglevel", "WARNING", "--without-gossip", "--without-mingle"], cwd=ROOT, env=env),
    ]
    server = f"http://127.0.0.1:{args.port}"
    api = requests.Session()
    api.headers["Authorization"] = f"Token {key}"
    results, nodes = {}, []
    try:
        _wait_http(args.port)
        time.sleep(3)  # the worker's start-up
        for design, stream, trials in (("stream", True, args.trials),
                                       ("poll", False, args.poll_trials or args.trials)):
            node = Node(f"bench-{design}", server, token, var_dir, stream=stream)
            nodes.append(node)
            deadline = time.monotonic() + 60
            while not NodeStatus.objects.filter(node_id=node.node_id).exists():  # its first report is in
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{design}: the agent never reported")
                time.sleep(0.2)
            latencies, stages = _measure(node, api, server, trials, args.settle)
            results[design] = {**_summary(latencies), "median_stages_ms": stages}
            node.stop()
    finally:
        for node in nodes:
            if node.thread.is_alive():
                node.stop()
        for proc in processes:
            proc.terminate()
        for proc in processes:
            proc.wait(timeout=30)
    ratio = round(results["poll"]["p50_ms"] / results["stream"]["p50_ms"], 2)
    print(json.dumps({"cpus": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()],
                      "target_p99_ms": 1000, **results, "ratio_poll_to_stream_p50": ratio,
                      "stream_p99_within_target": results["stream"]["p99_ms"] <= 1000}, indent=2))


if __name__ == "__main__":
    main()
