"""Control-plane counters kept by the processes that serve requests, whatever app the request is for.

`fleet.telemetry.metrics.render` exposes them on /metrics with the fleet's gauges (summed across processes
through PROMETHEUS_MULTIPROC_DIR when several web workers run).
"""

import os
import socket

from prometheus_client import Counter, Histogram, values


def _process_id() -> str:
    """Names this process's files in PROMETHEUS_MULTIPROC_DIR: host and pid, because the folder may be shared by
    containers (docker-compose: web, writer, worker), whose pid namespaces each start at 1."""
    return f"{socket.gethostname()}-{os.getpid()}"


# Before the first metric is built (this module is imported before every other that defines one).
if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    values.ValueClass = values.MultiProcessValue(_process_id)

RATE_LIMIT_UNAVAILABLE = Counter(
    "fleet_rate_limit_unavailable_total",
    "Requests let through without a flood-protection check because the counter store (Redis) was unavailable",
    ["scope"])
TASKS_NOT_ENQUEUED = Counter(
    "fleet_tasks_not_enqueued_total",
    "Task messages the request path could not send because the broker (Redis) was unavailable", ["task"])
REQUESTS_SHED = Counter(
    "fleet_requests_shed_total",
    "Requests answered 503 without being processed because they had waited too long for a web worker",
    ["kind"])
QUEUE_SECONDS = Histogram(
    "fleet_request_queue_seconds", "Time a request waited for a web worker before it was handled or shed",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0))

COLLECTORS = (RATE_LIMIT_UNAVAILABLE, TASKS_NOT_ENQUEUED, REQUESTS_SHED, QUEUE_SECONDS)
