"""Detection latency: from an agent's POST carrying an urgent event (Xid 79, a spot preemption notice) to the
finding being visible, with gunicorn, a real Celery worker, PostgreSQL and Redis on this machine.

    .venv/bin/python bench/detection_latency.py --trials 10

Each trial is one simulated agent (the agent's own code over a simulated NVML): a healthy report, then the
report carrying the event. The clock starts just before that POST and stops when the finding row is in the
database (polled every 10 ms). The baseline, measured in the same run, is the POST alone (ingest round
trip); the ratio shows what evaluation adds on top of ingestion. Target: < 2 s.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from ingest import _ensure_database  # noqa: E402  (shared helper of the ingest benchmark)


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--port", type=int, default=8766)
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/fleet_bench_latency")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/12")
    args = parser.parse_args()

    _ensure_database(args.database_url)
    var_dir = Path(tempfile.mkdtemp(prefix="bench-latency-"))
    env = {**os.environ, "DATABASE_URL": args.database_url, "REDIS_URL": args.redis_url, "DEBUG": "false",
           "DJANGO_SETTINGS_MODULE": "config.settings.local", "FLEET_VAR_DIR": str(var_dir), "LOG_LEVEL": "WARNING"}
    os.environ.update({k: env[k] for k in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "FLEET_VAR_DIR")})
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    import redis

    redis.Redis.from_url(args.redis_url).flushdb()
    from fleet.accounts.models import User
    from fleet.health.models import Finding
    from fleet.inventory.models import Provider
    from fleet.telemetry.services.enrollment import enrollment_token_create
    from fleet_agent.simulator import SimulatedAgent, load_scenario

    user = User.objects.create(username="bench", role="admin")
    processes = [
        subprocess.Popen([sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{args.port}",
                          "--workers", "2", "--log-level", "warning"], cwd=ROOT, env=env),
        subprocess.Popen([sys.executable, "-m", "celery", "-A", "config", "worker", "--concurrency", "2",
                          "--loglevel", "WARNING", "--without-gossip", "--without-mingle"], cwd=ROOT, env=env),
    ]
    results = {}
    try:
        _wait_http(args.port)
        time.sleep(3)  # the worker's start-up
        server = f"http://127.0.0.1:{args.port}"
        for case, scenario_name, rule, provider_key in (("xid79", "xid", "xid", "own"),
                                                         ("spot_notice", "spot_notice_aws", "preemption_notice",
                                                          "aws")):
            scenario = load_scenario(scenario_name)
            spec = scenario.nodes[0]
            provider, _ = Provider.objects.get_or_create(
                slug=provider_key, defaults={"name": provider_key, "kind": "cloud" if provider_key == "aws" else "own",
                                             "cloud": "aws" if provider_key == "aws" else ""})
            _, token = enrollment_token_create(actor=user, name=case, provider=provider,
                                               delivery_form=spec.delivery_form,
                                               billing_mode="spot" if spec.billing_mode == "spot" else "reserved")
            detect, ingest = [], []
            fault_at = min(f.at_s for f in spec.faults)
            for trial in range(args.trials):
                agent = SimulatedAgent.from_scenario(scenario, trial, work_dir=var_dir / case)
                node_id = agent.enroll(server, token).node_id
                agent.step(0)
                agent.deliver(force=True)
                agent.step(fault_at + 1)
                started = time.perf_counter()
                agent.deliver(force=True)
                posted = time.perf_counter()
                while not Finding.objects.filter(node_id=node_id, rule__slug=rule).exists():
                    if time.perf_counter() - started > 30:
                        raise RuntimeError(f"{case}: no finding after 30 s")
                    time.sleep(0.01)
                detect.append(time.perf_counter() - started)
                ingest.append(posted - started)
                agent.close()
            results[case] = {
                "trials": args.trials,
                "detect_p50_ms": round(statistics.median(detect) * 1000, 1),
                "detect_max_ms": round(max(detect) * 1000, 1),
                "ingest_post_p50_ms": round(statistics.median(ingest) * 1000, 1),
                "ratio_detect_to_ingest": round(statistics.median(detect) / statistics.median(ingest), 2),
            }
    finally:
        for proc in processes:
            proc.terminate()
        for proc in processes:
            proc.wait(timeout=30)
    print(json.dumps({"cpus": os.cpu_count(), "target_ms": 2000, **results}, indent=2))


if __name__ == "__main__":
    main()
