"""Overload shedding in a real gunicorn: requests that queued while the worker could not take them are
answered 503 + Retry-After at once, unprocessed, instead of long after the agent's timeout."""

import http.client
import json
import os
import signal
import threading
import time

import pytest

from tests.processes import child_pids, free_port, gunicorn, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _post(port: int) -> tuple[int, dict, dict, float]:
    started = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        body = json.dumps({"reports": []}).encode()
        conn.request("POST", "/api/v1/agent/reports", body, {"Authorization": "Node fn_not-a-credential",
                                                             "Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), json.loads(response.read()), time.monotonic() - started
    finally:
        conn.close()


@pytest.mark.parametrize("worker_class", ["sync", "gthread"])
def test_requests_queued_behind_a_frozen_worker_are_shed_with_503(worker_class, tmp_path):
    port = free_port()
    env = {"WEB_QUEUE_MAX_MS": "1000", "WEB_QUEUE_TARGET_MS": "1000", "WEB_SHED_RETRY_AFTER_S": "7",
           "METRICS_TOKEN": ""}
    with gunicorn(port, "--workers", "1", "--worker-class", worker_class, "--threads", "2", "--timeout", "60",
                  log=tmp_path / "gunicorn.log", env=env) as master:
        assert _post(port)[0] == 401  # processed: an unknown credential (this also warms the worker up)
        (worker,) = wait_for(lambda: child_pids(master.pid), what="the gunicorn worker")

        results = []
        os.kill(worker, signal.SIGSTOP)  # a frozen web tier: connections queue in the kernel meanwhile
        try:
            threads = [threading.Thread(target=lambda: results.append(_post(port))) for _ in range(5)]
            for thread in threads:
                thread.start()
            time.sleep(2.0)
        finally:
            os.kill(worker, signal.SIGCONT)
        resumed = time.monotonic()
        for thread in threads:
            thread.join(timeout=30)
        answered_within = time.monotonic() - resumed

        assert [r[0] for r in results] == [503] * 5
        assert all(r[1]["Retry-After"] == "7" and r[2]["error"]["code"] == "overloaded" for r in results)
        assert answered_within < 2.0  # shedding costs next to nothing: the queue empties at once
        assert _post(port)[0] == 401  # a request that did not wait is processed again
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/metrics")
        scrape = conn.getresponse().read().decode()
        conn.close()
        assert 'fleet_requests_shed_total{kind="agent"} 5.0' in scrape
