"""The step engine: idempotent execution keyed by (incident, step, attempt), resumption after a lost worker,
retries with back-off, escalation, SLA timeouts, approvals, dry run, maintenance windows, the node label."""

from datetime import timedelta

import pytest

from fleet.inventory.models import Node
from fleet.remediation.choices import IncidentState, StepStatus, TimelineKind
from fleet.remediation.models import Incident, PoolRemediationSettings, StepRun
from fleet.remediation.services.actions import incident_approve, incident_step_complete, incident_step_fail
from fleet.remediation.services.engine import current_run, step_execute
from fleet.remediation.services.sweep import remediation_sweep
from fleet.remediation.signals import incident_event, incident_event_committed
from fleet.remediation.steps import StepOutcome
from tests.factories import UserFactory
from tests.health.factories import T0

from .helpers import fault_and_intake, node_in, pool_for, tick, walk

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator():
    return UserFactory(username="op", role="operator")


def _incident(form="bare_metal_owned", **pool_settings):
    pool = pool_for(form, **pool_settings)
    node = node_in(pool)
    fault_and_intake([node])
    return Incident.objects.get(node=node)


def test_a_step_runs_once_per_key_however_often_it_is_delivered(recording):
    executor = recording(["cordon"])
    incident = _incident(executors=["recording"])
    run = current_run(incident)
    assert (run.kind, run.executor, run.idempotency_key) == ("cordon", "recording", f"{incident.key}:0:1")
    assert step_execute(incident_id=incident.pk, step_index=0, attempt=1, now=T0) == "done"
    # Redelivered after the outcome was committed: nothing runs again.
    assert step_execute(incident_id=incident.pk, step_index=0, attempt=1, now=T0) == "already done"
    assert executor.calls == [f"{incident.key}:0:1"]
    run.refresh_from_db()
    assert run.executor_calls == 1 and run.status == StepStatus.DONE
    assert Node.objects.get(pk=incident.node_id).state == "cordoned"


def test_a_duplicate_delivery_while_a_worker_holds_the_step_does_nothing(recording):
    executor = recording(["cordon"])
    incident = _incident(executors=["recording"])
    StepRun.objects.filter(incident=incident, step_index=0).update(
        status=StepStatus.RUNNING, claim="other-worker", lease_until=T0 + timedelta(minutes=5), phase="start")
    assert step_execute(incident_id=incident.pk, step_index=0, attempt=1, now=T0) == "running elsewhere"
    assert executor.calls == []


def test_a_lost_worker_is_resumed_with_the_same_key_and_the_side_effect_happens_once(recording, settings):
    """The first worker claimed the step and performed the side effect, then died before recording it. After
    the lease the step is resumed: the executor sees the same idempotency key and answers from its log."""
    executor = recording(["cordon"])
    incident = _incident(executors=["recording"])
    key = f"{incident.key}:0:1"
    executor.effects[key] = StepOutcome.done("cordoned earlier")  # the effect the dead worker performed
    StepRun.objects.filter(incident=incident, step_index=0).update(
        status=StepStatus.RUNNING, claim="dead-worker", lease_until=T0, phase="start", executor_calls=1,
        started_at=T0 - timedelta(minutes=6))
    assert step_execute(incident_id=incident.pk, step_index=0, attempt=1, now=T0 + timedelta(seconds=1)) == "done"
    run = StepRun.objects.get(incident=incident, step_index=0)
    assert run.attempt == 1 and run.executor_calls == 2 and run.status == StepStatus.DONE
    assert executor.calls == [key]  # the same key, not a new attempt
    assert len(executor.effects) == 1
    interrupted = incident.timeline.get(kind=TimelineKind.STEP_INTERRUPTED)
    assert key in interrupted.output["idempotency_key"]


def test_the_sweep_hands_an_abandoned_step_to_a_worker(recording, django_capture_on_commit_callbacks):
    recording(["cordon"])
    incident = _incident(executors=["recording"])
    StepRun.objects.filter(incident=incident, step_index=0).update(
        status=StepStatus.RUNNING, claim="dead", lease_until=T0 - timedelta(seconds=1), phase="start",
        enqueued_at=T0 - timedelta(minutes=10))
    with django_capture_on_commit_callbacks() as callbacks:
        result = remediation_sweep(now=T0)
    assert result["enqueued"] == 1
    assert callbacks  # run_step is sent once the sweep's transaction commits
    # ... and not again on the next sweep while that delivery is in flight.
    with django_capture_on_commit_callbacks() as callbacks:
        assert remediation_sweep(now=T0 + timedelta(seconds=15))["enqueued"] == 0


def test_failures_retry_with_back_off_then_wait_for_an_operator(recording):
    executor = recording(["collect_evidence"], {"collect_evidence": StepOutcome.failed("agent unreachable")})
    incident = _incident(executors=["recording"])
    operator = UserFactory(role="operator")
    at = T0
    for _ in range(2):  # cordon, drain by hand
        tick(incident, at=at)
        run = current_run(incident)
        incident_step_complete(incident_id=incident.pk, step_index=run.step_index, actor=operator, now=at)
    assert tick(incident, at=at) == "failed"
    retry = current_run(incident)
    assert (retry.attempt, retry.not_before) == (2, at + timedelta(seconds=60))
    incident.refresh_from_db()
    assert incident.state == IncidentState.WAITING and incident.waiting_on == "retry"
    assert tick(incident, at=at + timedelta(seconds=30)) == "held"  # back-off not over
    assert tick(incident, at=at + timedelta(seconds=61)) == "failed"
    third = current_run(incident)
    assert (third.attempt, third.not_before) == (3, at + timedelta(seconds=61 + 120))
    assert tick(incident, at=at + timedelta(seconds=200)) == "failed"
    incident.refresh_from_db()
    assert incident.state == IncidentState.NEEDS_ATTENTION
    assert "retries exhausted" in incident.state_reason
    assert len(executor.calls) == 3 and len(set(executor.calls)) == 3  # one key per attempt


def test_a_failed_verify_escalates_to_the_next_workflow_without_repeating_cordon_and_drain(operator):
    incident = _incident()
    at = T0

    def stop_at_verify(run, now):
        if run.kind == "verify" and run.status == StepStatus.WAITING:
            raise StopIteration

    with pytest.raises(StopIteration):
        walk(incident, operator, at=at, on_step=stop_at_verify)
    run = current_run(incident)
    incident_step_fail(incident_id=incident.pk, step_index=run.step_index, actor=operator, note="smoke test FAIL",
                       now=at + timedelta(hours=2))
    incident.refresh_from_db()
    assert incident.workflow.slug == "owned-rma"
    skipped = StepRun.objects.filter(incident=incident, status=StepStatus.SKIPPED).values_list("kind", flat=True)
    assert sorted(skipped) == ["cordon", "drain"]
    assert current_run(incident).kind == "collect_evidence"
    escalated = incident.timeline.get(kind=TimelineKind.ESCALATED)
    assert escalated.output == {"from": "owned-reboot", "to": "owned-rma", "workflow_version": 1}


def test_an_rma_waits_for_the_new_gpu_serial(operator):
    from tests.health.factories import ChangeLogEntryFactory

    incident = _incident()
    from fleet.remediation.models import Workflow
    from fleet.remediation.services.actions import incident_escalate

    incident_escalate(incident_id=incident.pk, workflow=Workflow.objects.get(slug="owned-rma"), actor=operator,
                      now=T0)
    node = incident.node

    def on_step(run, at):
        if run.kind == "rma" and run.status == StepStatus.AWAITING_APPROVAL:
            assert "destructive step" in run.output["approval_reasons"]
        if run.kind == "await_external" and run.status == StepStatus.WAITING and not run.output.get("swapped"):
            ChangeLogEntryFactory(node=node, at=at, field="gpus[3].serial", old="111", new="222",
                                  summary="GPU 3 serial 111 → 222")
            StepRun.objects.filter(pk=run.pk).update(next_poll_at=at, output={**run.output, "swapped": True})
            tick(incident, at=at)
            raise StopIteration

    with pytest.raises(StopIteration):
        walk(incident, operator, at=T0, on_step=on_step)
    run = StepRun.objects.get(incident=incident, kind="await_external")
    assert run.status == StepStatus.DONE
    assert "new GPU serial" in run.message
    assert run.waiting_on == "vendor"


def test_a_step_past_its_sla_fails_and_its_rule_applies(operator):
    incident = _incident("bare_metal_hosted")
    at = T0

    def stop_at_ticket(run, now):
        if run.kind == "open_ticket" and run.status == StepStatus.WAITING:
            raise StopIteration

    with pytest.raises(StopIteration):
        walk(incident, operator, at=at, on_step=stop_at_ticket)
    run = current_run(incident)
    assert run.deadline_at == run.started_at + timedelta(hours=4)
    assert remediation_sweep(now=run.deadline_at - timedelta(seconds=1))["timed_out"] == 0
    assert remediation_sweep(now=run.deadline_at)["timed_out"] == 1
    run.refresh_from_db()
    incident.refresh_from_db()
    assert run.status == StepStatus.FAILED and "timed out" in run.message
    assert incident.state == IncidentState.NEEDS_ATTENTION


def test_dry_run_walks_the_workflow_without_touching_the_node(operator):
    incident = _incident("cloud_dedicated", dry_run=True)
    assert incident.dry_run
    for _ in range(10):
        if tick(incident, at=T0) == "none":
            break
        incident.refresh_from_db()
        if not incident.is_open:
            break
    incident.refresh_from_db()
    assert incident.state == IncidentState.RESOLVED
    assert Node.objects.get(pk=incident.node_id).state == "active"
    dry = incident.timeline.filter(kind=TimelineKind.DRY_RUN)
    assert dry.count() == len(incident.plan)
    assert all("would" in entry.message for entry in dry)
    assert not StepRun.objects.filter(incident=incident, status=StepStatus.AWAITING_APPROVAL).exists()


def test_disruptive_steps_wait_for_the_maintenance_window(operator):
    # T0 is a Tuesday 12:00 UTC; the window opens Tuesdays at 22:00 for 2 hours.
    window = [{"days": ["tue"], "start": "22:00", "duration_minutes": 120, "timezone": "UTC"}]
    incident = _incident(maintenance_windows=window)
    tick(incident, at=T0)
    run = current_run(incident)
    incident_step_complete(incident_id=incident.pk, step_index=0, actor=operator, now=T0)  # cordon is not held
    incident.refresh_from_db()
    drain = current_run(incident)
    assert drain.kind == "drain" and drain.status == StepStatus.PENDING
    assert incident.waiting_on == "maintenance_window"
    assert drain.not_before == T0.replace(hour=22)
    assert tick(incident, at=T0 + timedelta(hours=1)) == "held"
    assert tick(incident, at=T0.replace(hour=22, minute=5)) == "waiting"
    assert run.kind == "cordon"


def test_the_no_auto_remediation_label_makes_every_step_wait_for_approval(operator):
    pool = pool_for("bare_metal_owned")
    node = node_in(pool, labels={"no-auto-remediation": "true"})
    fault_and_intake([node])
    incident = Incident.objects.get(node=node)
    run = current_run(incident)
    assert incident.state == IncidentState.AWAITING_APPROVAL
    assert run.kind == "cordon" and run.status == StepStatus.AWAITING_APPROVAL
    assert "no-auto-remediation" in incident.state_reason
    incident_approve(incident_id=incident.pk, step_index=0, actor=operator, note="go", now=T0)
    assert tick(incident, at=T0) == "waiting"


def test_software_drift_rolls_back_to_the_baseline(operator):
    from fleet.health.services.evaluation import evaluate
    from fleet.inventory.models import Baseline
    from fleet.remediation.services.intake import findings_intake

    pool = pool_for("cloud_dedicated")
    Baseline.objects.create(name="pinned", pool=pool, driver_version="550.54.15")
    node = node_in(pool)
    node.current_stack.driver_version = "560.28.03"
    node.current_stack.save()
    evaluate(node_ids=[node.pk], now=T0)
    findings_intake(now=T0)
    incident = Incident.objects.get(node=node)
    assert incident.workflow.slug == "software-rollback"
    assert (incident.layer, incident.responsible_party) == ("gpu_driver", "us")
    tick(incident, at=T0)
    incident_step_complete(incident_id=incident.pk, step_index=0, actor=operator, now=T0)
    tick(incident, at=T0)
    assert "550.54.15" in current_run(incident).message  # the runbook names the baseline


def test_events_are_sent_in_the_transaction_and_after_commit(django_capture_on_commit_callbacks):
    inside, after = [], []

    def on_event(sender, event, **kwargs):
        inside.append(event.kind)

    def on_committed(sender, event, **kwargs):
        after.append(event.kind)

    incident_event.connect(on_event)
    incident_event_committed.connect(on_committed)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            incident = _incident()
        assert inside == ["opened"] and after == ["opened"]
        operator = UserFactory(role="operator")
        with django_capture_on_commit_callbacks(execute=True):
            from fleet.remediation.services.actions import incident_cancel

            incident_cancel(incident_id=incident.pk, actor=operator, note="test")
        assert inside[-1] == "closed" and after[-1] == "closed"
    finally:
        incident_event.disconnect(on_event)
        incident_event_committed.disconnect(on_committed)


def test_the_pool_setting_is_read_when_the_step_is_created(recording):
    recording(["cordon"])
    pool = pool_for("bare_metal_owned")
    node = node_in(pool)
    fault_and_intake([node])
    incident = Incident.objects.get(node=node)
    assert current_run(incident).executor == "manual"
    PoolRemediationSettings.objects.filter(pool=pool).update(executors=["ipmi", "recording"])
    operator = UserFactory(role="operator")
    from fleet.remediation.services.actions import incident_step_retry

    tick(incident, at=T0)
    incident_step_retry(incident_id=incident.pk, step_index=0, actor=operator, now=T0)
    run = current_run(incident)
    assert (run.attempt, run.executor) == (2, "recording")
    assert run.output["executors_passed_over"] == ["ipmi: not installed on this server"]


def _waiting_on_the_provider(operator) -> Incident:
    """A hosted bare-metal incident walked to its 'wait for the provider's repair' step."""
    incident = _incident("bare_metal_hosted")

    def stop_at_wait(run, now):
        if run.kind == "await_external" and run.status == StepStatus.WAITING:
            raise StopIteration

    with pytest.raises(StopIteration):
        walk(incident, operator, at=T0, on_step=stop_at_wait)
    return incident


def test_polling_a_step_that_waits_on_the_provider_sends_nothing_new():
    """An incident that waits on the hosting provider is polled (the executor asks again) every few minutes for
    hours. Waiting on the same thing with the same words is no news: one 'waiting' entry and one step_changed
    message when the wait began, none per poll."""
    operator = UserFactory(role="operator")
    incident = _waiting_on_the_provider(operator)
    run = current_run(incident)
    changes = []

    def on_event(sender, event, **kwargs):
        changes.append(event.kind)

    incident_event.connect(on_event)
    try:
        at = T0 + timedelta(hours=8)
        for _ in range(6):  # an hour of polls, every 10 minutes
            at += timedelta(minutes=10)
            StepRun.objects.filter(pk=run.pk).update(next_poll_at=at)
            assert tick(incident, at=at) == "waiting"
    finally:
        incident_event.disconnect(on_event)
    run.refresh_from_db()
    assert run.status == StepStatus.WAITING and run.executor_calls >= 1
    assert "step_changed" not in changes, changes
    assert run.waiting_on == "provider"  # still the provider's move after an hour of polls
    assert incident.timeline.filter(kind=TimelineKind.STEP_WAITING, step_index=run.step_index).count() == 1


def test_an_operators_cordon_runs_at_once_while_another_incident_waits_on_the_node():
    """An incident waits on the hosting provider's repair and holds the pool's only slot; an operator cordons the
    same node from the node page. The cordon is the operator's own action: it starts now, not when the provider
    is done, and its timeline says what it runs alongside."""
    from fleet.remediation.models import Workflow
    from fleet.remediation.services.actions import incident_open_manual

    operator = UserFactory(role="operator")
    waiting = _waiting_on_the_provider(operator)
    cordon = incident_open_manual(node=waiting.node, workflow=Workflow.objects.get(slug="operator-cordon"),
                                  actor=operator, note="draining the rack", now=T0 + timedelta(hours=1))
    cordon.refresh_from_db()
    assert cordon.state == IncidentState.RUNNING, cordon.state_reason
    started = cordon.timeline.get(kind=TimelineKind.STARTED)
    assert f"alongside {waiting.key} on the same node" in started.message
    assert current_run(cordon).kind == "cordon"
    assert tick(cordon, at=T0 + timedelta(hours=1)) in ("done", "waiting")
