"""Where a queued report's web CPU goes: the fast lane piece by piece, against `/healthz` in the same process.

    .venv/bin/python bench/request_path.py                  # 3,000 reports of 8 GPUs, 64 agents
    .venv/bin/python bench/request_path.py --requests 10000

Creates a scratch database (`fleet_bench` on the local PostgreSQL unless --database-url), enrols the agents,
starts a private redis-server persisted as production runs the ingest queue (append-only file, `appendfsync
always`) and calls the WSGI application of `config/wsgi.py` directly with a pre-built environ: no HTTP server,
no client threads, so the figures are this process's CPU only (robust on a shared box). It prints the CPU per
request of `/healthz` (the baseline), of a whole queued report through the application, and of the pieces of
the fast lane measured alone: Django's handler around it (the whole report less the lane called on a
`WSGIRequest`), parsing the body, validating it, and the one script call that admits and queues it (the
entry's serialisation included). Each with its ratio to `/healthz`. What a report costs over HTTP comes on top
(gunicorn's parsing and writing: `bench/ingest.py` shows `/healthz` over HTTP against this figure). Between
pieces an in-process writer drains the stream, so its length stays far from the queue's bound.
"""

import argparse
import io
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ingest  # noqa: E402 (bench/ingest.py: the scratch database, enrolment, simulated agents, private Redis)

REPORTS_PATH = "/api/v1/agent/reports"


def _environ(path: str, method: str = "GET", body: bytes = b"", authorization: str = "") -> dict:
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "SCRIPT_NAME": "", "QUERY_STRING": "",
               "SERVER_NAME": "localhost", "SERVER_PORT": "8000", "SERVER_PROTOCOL": "HTTP/1.1",
               "HTTP_HOST": "localhost:8000", "REMOTE_ADDR": "127.0.0.1", "wsgi.version": (1, 0),
               "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(body), "wsgi.errors": sys.stderr,
               "wsgi.multithread": True, "wsgi.multiprocess": True, "wsgi.run_once": False}
    if body:
        environ.update(CONTENT_LENGTH=str(len(body)), CONTENT_TYPE="application/json")
    if authorization:
        environ["HTTP_AUTHORIZATION"] = authorization
    return environ


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--agents", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds; medians are printed")
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/fleet_bench")
    args = parser.parse_args()

    ingest._ensure_database(args.database_url)
    redis_server = ingest.in_process_django(args.database_url, INGEST_QUEUE="true", INGEST_FAST_LANE="true")
    try:
        print(json.dumps(_measure(args), indent=2))
    finally:
        redis_server.stop()


def _measure(args) -> dict:
    from django.core.handlers.wsgi import WSGIRequest
    from django.utils import timezone

    from config.wsgi import application
    from fleet.telemetry.api import views
    from fleet.telemetry.secrets import hash_secret
    from fleet.telemetry.services import admission
    from fleet.telemetry.services.writer import Writer
    from fleet.telemetry.validation import validate_batch

    load_before = [round(x, 2) for x in os.getloadavg()]
    sim_dir = Path(tempfile.mkdtemp(prefix="bench-agents-"))
    agents = [ingest.SimAgent(n, c, sim_dir) for n, c in ingest._enrol(args.agents)]
    statuses: list[str] = []

    def start_response(status, headers, exc_info=None):
        statuses.append(status)

    def call(environ) -> None:
        result = application(environ, start_response)
        b"".join(result)
        result.close()
        if not statuses[-1].startswith("200"):
            raise SystemExit(f"{environ['PATH_INFO']} answered {statuses[-1]}")

    def report_body(i: int) -> tuple:
        agent = agents[i % len(agents)]
        return agent, orjson.dumps({"reports": [agent.next_report()]})

    for i in range(len(agents)):  # first reports carry the inventory: written in the request
        agent, body = report_body(i)
        call(_environ(REPORTS_PATH, "POST", body, f"Node {agent.credential}"))
    hashes = {agent.node_id: hash_secret(agent.credential) for agent in agents}
    now = timezone.now()

    def healthz(i):
        call(_environ("/healthz"))

    def whole_report(i):
        agent, body = report_body(i)
        call(_environ(REPORTS_PATH, "POST", body, f"Node {agent.credential}"))

    def lane_alone(i):
        agent, body = report_body(i)
        request = WSGIRequest(_environ(REPORTS_PATH, "POST", body, f"Node {agent.credential}"))
        if views._steady_report(request) is None:
            raise SystemExit("the fast lane did not take a steady report")

    def body_only(i):
        report_body(i)

    def parse(i):
        orjson.loads(report_body(i)[1])

    def parse_validate(i):
        validate_batch(orjson.loads(report_body(i)[1]), now=now, has_nul=False)

    def admit(i):
        agent = agents[i % len(agents)]
        if admission.admit_and_enqueue(hashes[agent.node_id], [agent.next_report()], now, claimed=agent.node_id,
                                       limit=100_000, window_s=60) is None:
            raise SystemExit("the script did not queue a steady report")

    def report_alone(i):
        agents[i % len(agents)].next_report()

    def drain() -> None:
        while Writer(block_ms=10).step():
            pass

    actions = {"healthz": healthz, "whole": whole_report, "lane": lane_alone, "body": body_only, "parse": parse,
               "validate": parse_validate, "admit": admit, "report": report_alone}
    rounds: dict[str, list[float]] = {name: [] for name in actions}
    per_round = max(1, args.requests // args.rounds)
    for action in actions.values():  # warm
        for i in range(min(200, per_round)):
            action(i)
    drain()
    for _ in range(args.rounds):  # the pieces alternate, so a slow moment of the box falls on all of them
        for name, action in actions.items():
            started = time.process_time()
            for i in range(per_round):
                action(i)
            rounds[name].append(1000 * (time.process_time() - started) / per_round)
            drain()
    cpu = {name: statistics.median(values) for name, values in rounds.items()}
    base, whole, lane, body = cpu["healthz"], cpu["whole"], cpu["lane"], cpu["body"]
    parsed, validated, admitted, built = cpu["parse"], cpu["validate"], cpu["admit"], cpu["report"]
    pieces = {
        "django_handler_around_the_lane": whole - lane,
        "parse_body": parsed - body,
        "validate": validated - parsed,
        "admit_and_enqueue_script_call": admitted - built,
        "rest_of_the_lane (request object, checks, answer, response)": lane - validated - (admitted - built),
    }
    out = {"requests": per_round * args.rounds, "rounds": args.rounds, "agents": args.agents,
           "report_bytes": len(report_body(0)[1]),
           "load_average_before": load_before, "load_average_after": [round(x, 2) for x in os.getloadavg()],
           "healthz_cpu_ms": round(base, 3),
           "report_cpu_ms": round(whole - body, 3),
           "ratio_healthz_to_report": round(base / (whole - body), 3),
           "pieces_cpu_ms": {name: round(value, 3) for name, value in pieces.items()},
           "pieces_ratio_to_healthz": {name: round(value / base, 3) for name, value in pieces.items()},
           "client_body_building_cpu_ms (left out above)": round(body, 3)}
    return out


if __name__ == "__main__":
    main()
