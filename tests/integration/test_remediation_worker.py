"""A real Celery worker runs remediation steps; killed with SIGKILL in the middle of a step (after its side
effect, before the outcome was recorded), the step is resumed by another worker with the same idempotency key
and the side effect is not repeated."""

import json
import sys
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from config.celery_app import app as celery_app
from fleet.remediation.models import Incident, PoolRemediationSettings, StepRun
from fleet.remediation.services.sweep import remediation_sweep
from tests.health.factories import EventFactory
from tests.processes import running, wait_for
from tests.remediation.helpers import node_in, pool_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

LEASE_S = 3
QUEUE = "remediation-kill-test"


def _worker(log, name):
    command = [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo", "--loglevel", "INFO",
               "--without-gossip", "--without-mingle", "--without-heartbeat", "-n", f"{name}@%h"]
    return running(command, log=log, ready=lambda: log.exists() and b"ready." in log.read_bytes(),
                   what=f"celery worker {name}")


def _ledger(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_worker_killed_mid_step_does_not_repeat_the_side_effect(seeded_remediation, monkeypatch, settings,
                                                                   tmp_path):
    from tests.remediation import ledger_executor  # registers "ledger" here too: intake picks the executor

    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("FLEET_TEST_LEDGER", str(ledger))
    monkeypatch.setenv("REMEDIATION_EXECUTOR_MODULES", "tests.remediation.ledger_executor")
    monkeypatch.setenv("REMEDIATION_STEP_LEASE_S", str(LEASE_S))
    settings.REMEDIATION_STEP_LEASE_S = LEASE_S
    monkeypatch.setenv("FLEET_TEST_LEDGER_PAUSE", "drain")
    # A queue of its own, so a worker other tests started (without the ledger executor) takes none of these tasks.
    monkeypatch.setenv("CELERY_TASK_DEFAULT_QUEUE", QUEUE)
    monkeypatch.setattr(celery_app.conf, "task_default_queue", QUEUE)
    assert ledger_executor.executor.name == "ledger"

    pool = pool_for("bare_metal_owned")
    PoolRemediationSettings.objects.filter(pool=pool).update(executors=["ledger"])
    node = node_in(pool)
    now = timezone.now()
    EventFactory(node=node, gpu=node.gpus.get(index=3), kind="xid", code=79, at=now)

    with _worker(tmp_path / "a.log", "a") as worker_a:
        from fleet.health.tasks import evaluate_nodes

        evaluate_nodes.delay(node_ids=[node.pk]).get(timeout=30)  # → intake → incident → cordon → drain
        incident = wait_for(lambda: Incident.objects.filter(node=node).first(), what="an incident")
        wait_for(lambda: any(r.get("kind") == "drain" for r in _ledger(ledger)),
                 what=f"the drain side effect (worker log: {worker_a.log_path})")
        drain = StepRun.objects.get(incident=incident, kind="drain")
        assert drain.status == "running" and drain.executor_calls == 1
        worker_a.kill()  # SIGKILL: no chance to record the outcome or to requeue
        worker_a.wait(timeout=10)

    monkeypatch.delenv("FLEET_TEST_LEDGER_PAUSE")
    time.sleep(LEASE_S + 0.5)  # the dead worker's lease runs out
    with _worker(tmp_path / "b.log", "b") as worker_b:
        remediation_sweep(now=timezone.now() + timedelta(seconds=1))  # what beat does every 15 s
        wait_for(lambda: StepRun.objects.get(pk=drain.pk).status == "done",
                 what=f"the drain step resumed (worker log: {worker_b.log_path})")

    drain.refresh_from_db()
    records = _ledger(ledger)
    key = f"{incident.key}:1:1"
    assert drain.idempotency_key == key and drain.attempt == 1
    assert len([r for r in records if r.get("effect") == key]) == 1  # one side effect
    assert len([r for r in records if r.get("call") == key]) == 2  # started twice, with the same key
    assert drain.executor_calls == 2
    assert len({r["pid"] for r in records if r.get("call") == key}) == 2  # by two different workers
    kinds = list(incident.timeline.values_list("kind", flat=True))
    assert "step_interrupted" in kinds
    incident.refresh_from_db()
    assert incident.current_step >= 2  # and the incident went on


def test_a_killed_workers_step_is_resumed_once_its_heartbeat_stops(seeded_remediation, monkeypatch, tmp_path):
    """With the production lease (the task's time limit and more), a live worker keeps its step by heartbeat
    however long the executor takes; killed, it stops beating and the step is resumed within the heartbeat lease
    and one sweep (≈ 30 s with beat's 15 s), not after the whole lease."""
    from django.conf import settings as django_settings

    from fleet.remediation.services.engine import heartbeat_lease, lease
    from tests.remediation import ledger_executor  # noqa: F401 (registers "ledger" here too)

    assert lease().total_seconds() >= 300 and heartbeat_lease().total_seconds() == 15
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("FLEET_TEST_LEDGER", str(ledger))
    monkeypatch.setenv("REMEDIATION_EXECUTOR_MODULES", "tests.remediation.ledger_executor")
    monkeypatch.setenv("FLEET_TEST_LEDGER_PAUSE", "drain")
    monkeypatch.setenv("CELERY_TASK_DEFAULT_QUEUE", QUEUE)
    monkeypatch.setattr(celery_app.conf, "task_default_queue", QUEUE)

    pool = pool_for("bare_metal_owned")
    PoolRemediationSettings.objects.filter(pool=pool).update(executors=["ledger"])
    node = node_in(pool)
    EventFactory(node=node, gpu=node.gpus.get(index=3), kind="xid", code=79, at=timezone.now())

    with _worker(tmp_path / "a.log", "a") as worker_a:
        from fleet.health.tasks import evaluate_nodes

        evaluate_nodes.delay(node_ids=[node.pk]).get(timeout=30)
        incident = wait_for(lambda: Incident.objects.filter(node=node).first(), what="an incident")
        wait_for(lambda: any(r.get("kind") == "drain" for r in _ledger(ledger)),
                 what=f"the drain side effect (worker log: {worker_a.log_path})")
        drain = StepRun.objects.get(incident=incident, kind="drain")
        first_lease = drain.lease_until
        # Paused inside the executor for longer than a lease: the heartbeat keeps the claim.
        time.sleep(heartbeat_lease().total_seconds() + 2)
        drain.refresh_from_db()
        assert drain.status == "running" and drain.lease_until > first_lease + timedelta(seconds=10)
        assert drain.lease_until > timezone.now()
        remediation_sweep()  # nothing to hand over while the worker beats
        assert StepRun.objects.get(pk=drain.pk).executor_calls == 1
        worker_a.kill()
        worker_a.wait(timeout=10)
        killed_at = time.monotonic()

    monkeypatch.delenv("FLEET_TEST_LEDGER_PAUSE")
    interval = django_settings.CELERY_BEAT_SCHEDULE["remediation-sweep"]["schedule"]
    with _worker(tmp_path / "b.log", "b") as worker_b:
        def resumed():
            remediation_sweep()  # as beat would; every second here instead of every `interval` seconds
            return StepRun.objects.get(pk=drain.pk).status == "done"

        wait_for(resumed, timeout=60, interval=1, what=f"the drain step resumed (worker log: {worker_b.log_path})")
        waited = time.monotonic() - killed_at
    assert waited <= heartbeat_lease().total_seconds() + interval, waited
    key = f"{incident.key}:1:1"
    records = _ledger(ledger)
    assert len([r for r in records if r.get("effect") == key]) == 1  # the side effect happened once
    assert len({r["pid"] for r in records if r.get("call") == key}) == 2  # resumed by the other worker
