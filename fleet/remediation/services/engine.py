"""The step engine: durable, idempotent execution of an incident's plan.

Every step attempt is a `StepRun` keyed by (incident, step index, attempt) with the idempotency key
`{incident.key}:{index}:{attempt}`. A worker runs it in three moves:

1. one transaction claims the step (status `running`, a claim token, a lease) and commits;
2. the executor is called outside any transaction (the side effect);
3. a second transaction records the outcome — only if the claim still holds — and moves the incident on.

While the executor is called the worker renews the lease with a heartbeat (every third of
REMEDIATION_STEP_HEARTBEAT_LEASE_S, from a thread of its own). A worker killed between 1 and 3 stops beating, so
its step's lease runs out within that lease (15 s by default) and the next sweep hands it to another worker,
which calls the executor again with the same idempotency key (the executor's contract is to be idempotent by it)
and never with a new attempt. A duplicate delivery of the task
finds the step claimed (lease valid) or finished, and does nothing.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
from datetime import datetime, timedelta
from functools import partial

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from fleet.core.i18n import in_server_language
from fleet.inventory.choices import NodeState
from fleet.inventory.models import Node, Pool

from ..choices import (
    ACTIVE_STATES,
    CLOSED_STATES,
    DESTRUCTIVE_KINDS,
    DISRUPTIVE_KINDS,
    STEP_TERMINAL,
    CauseKind,
    IncidentEventKind,
    IncidentState,
    OnFailure,
    StepKind,
    StepStatus,
    TimelineKind,
    WaitingOn,
)
from ..executors import MANUAL, executor_for, executor_named, registered
from ..models import EvidenceBundle, Incident, PoolRemediationSettings, StepRun, Workflow
from ..steps import EXECUTOR_EVIDENCE, StepContext, StepOutcome, idempotency_key
from .breakers import blocking_breaker
from .incidents import ENGINE, actor_label, emit, incident_set_state, jsonable, step_facts, timeline_add
from .verification import gpu_serial_changed, verification_gates
from .windows import window_status

logger = logging.getLogger(__name__)

START, POLL, CHECK = "start", "poll", "check"
CHECK_POLL = timedelta(seconds=30)  # engine-side checks (verification gates, a replacement to enrol)
WATCH_POLL = timedelta(seconds=60)  # conditions the engine watches for a waiting step (a new GPU serial)
REENQUEUE_AFTER = timedelta(seconds=60)  # at most; never longer than the lease (see `reenqueue_after`)
MAX_PLAN = 100
NO_AUTO_LABEL = "no-auto-remediation"
# Preparation steps an escalated workflow need not repeat when this incident already did them.
SKIP_IF_DONE = {StepKind.CORDON, StepKind.DRAIN}
NODE_EFFECTS: dict[str, tuple[str, set[str] | None]] = {
    # kind: (new node state, the states it may come from; None = any but retired)
    StepKind.CORDON: (NodeState.CORDONED, {NodeState.ACTIVE, NodeState.ENROLLING}),
    StepKind.DRAIN: (NodeState.CORDONED, {NodeState.ACTIVE, NodeState.ENROLLING, NodeState.DRAINING}),
    StepKind.REQUEST_REPLACEMENT: (NodeState.REPLACING, {NodeState.ACTIVE, NodeState.CORDONED, NodeState.DRAINING,
                                                         NodeState.PREEMPTED}),
    StepKind.RECORD_RECLAIM: (NodeState.PREEMPTED, None),
    StepKind.TERMINATE: (NodeState.RETIRED, None),
    StepKind.RETIRE: (NodeState.RETIRED, None),
    StepKind.RETURN_TO_SERVICE: (NodeState.ACTIVE, {NodeState.CORDONED, NodeState.DRAINING, NodeState.REPLACING}),
}


def lease() -> timedelta:
    return timedelta(seconds=settings.REMEDIATION_STEP_LEASE_S)


def heartbeat_lease() -> timedelta:
    """How long a claim holds without a heartbeat: a killed worker's step is free again this soon."""
    return min(timedelta(seconds=settings.REMEDIATION_STEP_HEARTBEAT_LEASE_S), lease())


@contextlib.contextmanager
def _heartbeat(run_id: int, claim: str):
    """Renew the claim's lease every third of `heartbeat_lease()` while the executor call runs (a thread with its
    own database connection). It stops with the call, or with the process when the worker is killed."""
    window = heartbeat_lease()
    stop = threading.Event()

    def beat():
        try:
            while not stop.wait(window.total_seconds() / 3):
                renewed = StepRun.objects.filter(pk=run_id, claim=claim, status=StepStatus.RUNNING).update(
                    lease_until=timezone.now() + window)
                if not renewed:
                    return  # the claim is gone (skipped, superseded): nothing left to hold
        except Exception:  # a failed beat only shortens the lease; the outcome's own check still guards
            logger.warning("step heartbeat for run %s failed", run_id, exc_info=True)
        finally:
            connection.close()

    thread = threading.Thread(target=beat, name=f"step-heartbeat-{run_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


def reenqueue_after() -> timedelta:
    """How long a step handed to a worker is left alone before the sweep hands it over again."""
    return min(REENQUEUE_AFTER, lease())


def incident_lock(incident_id: int) -> Incident | None:
    return (Incident.objects.select_for_update(of=("self",)).select_related("workflow", "node", "pool")
            .filter(pk=incident_id).first())


def current_run(incident: Incident) -> StepRun | None:
    return (StepRun.objects.filter(incident=incident, step_index=incident.current_step)
            .order_by("-attempt").first())


def no_auto_remediation(node: Node | None) -> bool:
    if node is None or NO_AUTO_LABEL not in (node.labels or {}):
        return False
    return str(node.labels[NO_AUTO_LABEL]).strip().lower() not in ("false", "0", "no")


def pool_settings(pool_id: int | None) -> PoolRemediationSettings | None:
    if pool_id is None:
        return None
    return PoolRemediationSettings.objects.get_or_create(pool_id=pool_id)[0]


def _step_label(run: StepRun) -> str:
    return f"step {run.step_index + 1} ({run.title or run.kind})"


# --- creating step runs and moving the incident on -------------------------------------------------------
def run_create(incident: Incident, index: int, attempt: int, *, now: datetime, not_before: datetime | None = None,
               status: str = StepStatus.PENDING, message: str = "") -> StepRun:
    spec = incident.plan[index]
    kind = spec["kind"]
    if incident.node_id is None:
        executor, passed = registered()[MANUAL], []
    else:
        executor, passed = executor_for(node=incident.node, kind=kind)
    reasons = []
    if kind in DESTRUCTIVE_KINDS:
        reasons.append("destructive step")
    if spec.get("requires_approval"):
        reasons.append("the workflow asks for approval")
    if no_auto_remediation(incident.node):
        reasons.append(f"the node is labelled {NO_AUTO_LABEL}")
    output = {}
    if passed:
        output["executors_passed_over"] = passed
    if reasons:
        output["approval_reasons"] = reasons
    return StepRun.objects.create(
        incident=incident, step_index=index, attempt=attempt, kind=kind, title=spec.get("title", "")[:200],
        params=spec.get("params") or {}, executor=executor.name,
        idempotency_key=idempotency_key(incident.key, index, attempt), status=status, message=message[:1000],
        requires_approval=bool(reasons), not_before=not_before, output=output,
        finished_at=now if status in STEP_TERMINAL else None)


def incident_advance(incident: Incident, *, now: datetime, actor=None) -> None:
    """Decide what the incident does next and save it. Call with the incident locked, inside a transaction.
    `actor` is who caused this move (it closes the incident when the last step finished)."""
    if incident.state in CLOSED_STATES or incident.state == IncidentState.QUEUED:
        return
    while True:
        if incident.current_step >= len(incident.plan):
            incident_close(incident, IncidentState.RESOLVED, "workflow complete", now=now, actor=actor)
            return
        run = current_run(incident)
        if run is None:
            run = run_create(incident, incident.current_step, 1, now=now)
        if run.status in (StepStatus.DONE, StepStatus.SKIPPED):
            incident.current_step += 1  # defensive: whoever finished it should have moved on
            continue
        break
    if run.status in (StepStatus.FAILED, StepStatus.CANCELLED):
        incident_set_state(incident, IncidentState.NEEDS_ATTENTION, waiting_on=WaitingOn.OPERATOR,
                           reason=f"{_step_label(run)} {run.status}: {run.message}")
    elif run.status == StepStatus.PENDING:
        _pending_gate(incident, run, now=now)
    elif run.status == StepStatus.AWAITING_APPROVAL:
        incident_set_state(incident, IncidentState.AWAITING_APPROVAL, waiting_on=WaitingOn.OPERATOR,
                           reason=f"{_step_label(run)} needs approval")
    elif run.status == StepStatus.WAITING and incident.state != IncidentState.PAUSED:
        incident_set_state(incident, IncidentState.WAITING, waiting_on=run.waiting_on, reason=run.message)
    elif run.status == StepStatus.RUNNING and incident.state != IncidentState.PAUSED:
        incident_set_state(incident, IncidentState.RUNNING, reason=f"{_step_label(run)} running")
    incident.save()


def _pending_gate(incident: Incident, run: StepRun, *, now: datetime) -> bool:
    """Hold a pending step for a guardrail, or hand it to a worker. True when it was handed over."""
    if incident.cause_kind != CauseKind.MASS_FAILURE:
        breaker = blocking_breaker(pool_id=incident.pool_id, site_id=incident.site_id)
        if breaker is not None:
            reason = (f"automation paused: the {breaker.scope} circuit breaker is open"
                      + (f" (mass-failure incident {breaker.incident.key})" if breaker.incident_id else ""))
            if incident.state != IncidentState.PAUSED:
                timeline_add(incident, TimelineKind.PAUSED, reason, at=now)
            incident_set_state(incident, IncidentState.PAUSED, reason=reason)
            return False
    if run.requires_approval and run.approved_at is None and not incident.dry_run:
        run.status = StepStatus.AWAITING_APPROVAL
        run.save(update_fields=["status"])
        why = "; ".join(run.output.get("approval_reasons", []))
        incident_set_state(incident, IncidentState.AWAITING_APPROVAL, waiting_on=WaitingOn.OPERATOR,
                           reason=f"{_step_label(run)} needs approval by an operator or admin ({why})")
        timeline_add(incident, TimelineKind.APPROVAL_REQUESTED, f"{_step_label(run)} needs approval: {why}",
                     at=now, run=run)
        emit(incident, IncidentEventKind.AWAITING_APPROVAL, at=now, run=run)
        return False
    if run.kind in DISRUPTIVE_KINDS and not incident.workflow.urgent and not incident.dry_run:
        pool = pool_settings(incident.pool_id)
        is_open, next_open = window_status(pool.maintenance_windows if pool else [], now)
        if not is_open:
            run.not_before = next_open
            run.save(update_fields=["not_before"])
            when = f"{next_open:%Y-%m-%d %H:%M} UTC" if next_open else "never (no window recurs)"
            reason = f"{_step_label(run)} is disruptive: waiting for the pool's maintenance window (opens {when})"
            if incident.waiting_on != WaitingOn.MAINTENANCE_WINDOW:
                timeline_add(incident, TimelineKind.STEP_WAITING, reason, at=now, run=run)
            incident_set_state(incident, IncidentState.WAITING, waiting_on=WaitingOn.MAINTENANCE_WINDOW,
                               reason=reason)
            return False
    if run.not_before is not None and run.not_before > now:
        incident_set_state(incident, IncidentState.WAITING, waiting_on=WaitingOn.RETRY,
                           reason=f"{_step_label(run)} attempt {run.attempt} starts at {run.not_before:%H:%M:%S} UTC")
        return False
    incident_set_state(incident, IncidentState.RUNNING, reason=f"{_step_label(run)} starting")
    run_enqueue(run, now=now)
    return True


def run_enqueue(run: StepRun, *, now: datetime) -> None:
    """Hand the step to a worker once the current transaction commits."""
    run.enqueued_at = now
    run.save(update_fields=["enqueued_at"])
    transaction.on_commit(partial(_send, run.incident_id, run.step_index, run.attempt), robust=True)


def _send(incident_id: int, step_index: int, attempt: int) -> None:
    from ..tasks import run_step

    run_step.delay(incident_id, step_index, attempt)


# --- executing one step ----------------------------------------------------------------------------------
def step_execute(*, incident_id: int, step_index: int, attempt: int, now: datetime | None = None) -> str:
    """Run one step attempt as far as it goes now (start, poll, or the engine's own checks). Idempotent: safe to
    call any number of times for the same key. Returns a word on what happened, for the task result."""
    claim = secrets.token_hex(8)
    with transaction.atomic():
        at = now or timezone.now()
        incident = incident_lock(incident_id)
        run = None if incident is None else StepRun.objects.filter(
            incident=incident, step_index=step_index, attempt=attempt).first()
        if incident is None or run is None:
            return "missing"
        if incident.state in CLOSED_STATES:
            return "incident closed"
        if run.status in STEP_TERMINAL:
            return f"already {run.status}"
        if step_index != incident.current_step:
            return "stale"
        if run.status == StepStatus.AWAITING_APPROVAL:
            return "awaiting approval"
        if run.status == StepStatus.RUNNING and run.lease_until is not None and run.lease_until > at:
            return "running elsewhere"
        if run.status == StepStatus.PENDING:
            if incident.state in (IncidentState.QUEUED, IncidentState.PAUSED) or not _pending_gate_for_worker(
                    incident, run, now=at):
                return "held"
            phase = START
        elif run.status == StepStatus.WAITING:
            if run.next_poll_at is None or run.next_poll_at > at:
                return "waiting"
            phase = CHECK if run.executor_done else POLL
        else:  # running, lease expired: the worker that held it died before the outcome was recorded
            phase = run.phase or START
            timeline_add(incident, TimelineKind.STEP_INTERRUPTED,
                         f"{_step_label(run)}: the worker running it was lost before its outcome was recorded; "
                         f"calling {run.executor}.{phase} again with the same idempotency key", at=at, run=run,
                         output={"idempotency_key": run.idempotency_key, "executor_calls": run.executor_calls})
        run.status, run.claim, run.lease_until, run.phase = StepStatus.RUNNING, claim, at + heartbeat_lease(), phase
        if phase == START:
            run.executor_calls += 1
            if run.started_at is None:
                run.started_at = at
                run.deadline_at = _deadline(incident, run, at)
                if run.kind == StepKind.REQUEST_REPLACEMENT and not incident.dry_run:
                    # Set before the request goes out: a replacement may enrol before the executor answers.
                    incident.replacement_requested_at = incident.replacement_requested_at or at
                _record_requested_disruption(incident, run, at)
                timeline_add(incident, TimelineKind.STEP_STARTED,
                             f"{_step_label(run)} started via {run.executor}"
                             + (" (dry run)" if incident.dry_run else ""), at=at, run=run,
                             output={"idempotency_key": run.idempotency_key, "params": run.params})
                emit(incident, IncidentEventKind.STEP_CHANGED, at=at, run=run)
        run.save()
        if incident.state != IncidentState.PAUSED:
            incident_set_state(incident, IncidentState.RUNNING, reason=f"{_step_label(run)} running")
        incident.save()
        ctx = step_context(incident, run)

    with _heartbeat(run.pk, claim):
        outcome = _call(incident, run, ctx, phase)

    with transaction.atomic():
        at = now or timezone.now()
        incident = incident_lock(incident_id)
        run = StepRun.objects.get(pk=run.pk)
        if run.claim != claim or run.status != StepStatus.RUNNING:
            timeline_add(incident, TimelineKind.NOTE,
                         f"{_step_label(run)}: a late answer from {run.executor} ({outcome.status}: "
                         f"{outcome.message[:200]}) was ignored; the step was {run.status} meanwhile", at=at, run=run)
            return "superseded"
        outcome_apply(incident, run, outcome, now=at, actor=run.executor)
    return outcome.status


# Steps that take the node down on purpose, and the change-log field that tells the health engine so: lost GPUs
# or silence until the node comes back are their consequence (docs/health.md, "requested_disruption").
_REQUESTED_DISRUPTIONS = {StepKind.REBOOT: "reboot_requested", StepKind.ROLLBACK_STACK: "driver_change"}


def _record_requested_disruption(incident: Incident, run: StepRun, at: datetime) -> None:
    field = _REQUESTED_DISRUPTIONS.get(run.kind)
    if field is None or incident.dry_run or incident.node_id is None:
        return
    from fleet.telemetry.models import ChangeLogEntry

    ChangeLogEntry.objects.create(node_id=incident.node_id, at=at, field=field, old=None, new=incident.key,
                                  summary=f"{_step_label(run)} started by remediation {incident.key}"[:300])


def _pending_gate_for_worker(incident: Incident, run: StepRun, *, now: datetime) -> bool:
    """A worker got a pending step: the guardrails may have changed since it was enqueued (a breaker tripped, a
    window closed). Re-check without enqueuing it again."""
    if incident.cause_kind != CauseKind.MASS_FAILURE and blocking_breaker(pool_id=incident.pool_id,
                                                                         site_id=incident.site_id):
        incident_advance(incident, now=now)
        return False
    if (run.requires_approval and run.approved_at is None and not incident.dry_run) or (
            run.not_before is not None and run.not_before > now):
        incident_advance(incident, now=now)
        return False
    if run.kind in DISRUPTIVE_KINDS and not incident.workflow.urgent and not incident.dry_run:
        pool = pool_settings(incident.pool_id)
        if not window_status(pool.maintenance_windows if pool else [], now)[0]:
            incident_advance(incident, now=now)
            return False
    return True


def _deadline(incident: Incident, run: StepRun, at: datetime) -> datetime | None:
    spec = incident.plan[run.step_index]
    deadline = at + timedelta(seconds=spec["timeout_s"]) if spec.get("timeout_s") else None
    if run.params.get("before_notice_deadline") and incident.node_id is not None:
        from fleet.telemetry.models import NodeStatus

        notice = NodeStatus.objects.filter(node_id=incident.node_id).values_list("notice_deadline", flat=True).first()
        if notice is not None and notice > at:
            deadline = min(deadline, notice) if deadline else notice
    return deadline


def step_context(incident: Incident, run: StepRun) -> StepContext:
    return StepContext(incident_id=incident.pk, incident_key=incident.key, node_id=incident.node_id,
                       step_index=run.step_index, attempt=run.attempt, kind=run.kind, params=dict(run.params),
                       dry_run=incident.dry_run, idempotency_key=run.idempotency_key, facts=step_facts(incident))


def _call(incident: Incident, run: StepRun, ctx: StepContext, phase: str) -> StepOutcome:
    if phase == CHECK:
        return StepOutcome.done("")
    if phase == POLL:
        watched = watch_met(incident, run)
        if watched:
            return StepOutcome.done(watched)
    executor = executor_named(run.executor)
    if executor is None:
        return StepOutcome.failed(f"executor {run.executor} is not installed on this server any more")
    try:
        outcome = executor.start(ctx) if phase == START else executor.poll(ctx)
    except Exception as exc:  # an executor bug must not wedge the incident: it becomes the step's failure
        logger.exception("executor %s raised on %s", run.executor, run.idempotency_key)
        return StepOutcome.failed(f"{run.executor}.{phase} raised {type(exc).__name__}: {exc}")
    if not isinstance(outcome, StepOutcome) or outcome.status not in ("done", "waiting", "failed"):
        return StepOutcome.failed(f"{run.executor}.{phase} returned {outcome!r}, not a StepOutcome")
    return outcome


def watch_met(incident: Incident, run: StepRun) -> str:
    """A condition the engine watches for a waiting step; the reason it is met, or ''."""
    if run.kind == StepKind.AWAIT_EXTERNAL and run.params.get("until") == "gpu_serial_changed" and incident.node_id:
        gpu_index = step_facts(incident).get("gpu_index")
        change = gpu_serial_changed(node_id=incident.node_id, gpu_index=gpu_index, since=run.started_at)
        if change is not None:
            return f"the node reports a new GPU serial: {change.summary}"
    return ""


def _has_watch(run: StepRun) -> bool:
    return run.kind == StepKind.AWAIT_EXTERNAL and run.params.get("until") == "gpu_serial_changed"


# --- applying outcomes ------------------------------------------------------------------------------------
def outcome_apply(incident: Incident, run: StepRun, outcome: StepOutcome, *, now: datetime, actor) -> None:
    """Record an executor's answer (the incident is locked and `run` is the current step)."""
    run.output = {**run.output, **outcome.output}
    run.claim, run.lease_until = "", None
    if outcome.status == "done":
        executor_done(incident, run, now=now, actor=actor, message=outcome.message)
    elif outcome.status == "waiting":
        if outcome.retry_after is not None:
            next_poll = now + outcome.retry_after
        else:
            next_poll = now + WATCH_POLL if _has_watch(run) else None
        run_wait(incident, run, now=now, message=outcome.message, actor=actor,
                 waiting_on=outcome.waiting_on or WaitingOn.EXECUTOR, next_poll=next_poll)
    else:
        run_fail(incident, run, now=now, message=outcome.message or "failed", actor=actor)


def executor_done(incident: Incident, run: StepRun, *, now: datetime, actor, message: str = "") -> None:
    """The executor (or an operator) finished the step's work; the engine's own checks decide if it is done."""
    run.executor_done = True
    if incident.dry_run:
        step_finish(incident, run, now=now, actor=actor, message=message or "dry run", kind=TimelineKind.DRY_RUN)
        return
    ok, check_message, waiting_on, details = engine_check(incident, run, now=now)
    if details:
        run.output = {**run.output, **details}
    if ok:
        step_finish(incident, run, now=now, actor=actor, message="; ".join(m for m in (message, check_message) if m))
    else:
        run_wait(incident, run, now=now, message=check_message, actor=ENGINE, waiting_on=waiting_on,
                 next_poll=now + CHECK_POLL)


def engine_check(incident: Incident, run: StepRun, *, now: datetime) -> tuple[bool, str, str, dict]:
    """The control plane's own part of a step: (done, message, what it waits for, output to record)."""
    if run.kind == StepKind.COLLECT_EVIDENCE:
        bundle = evidence_capture(incident, run, now=now)
        # What the executor read on the node itself (remote diagnostics over SSH, the agent's evidence) joins the
        # incident's evidence as a bundle of its own, not as step output (it can be large).
        collected = run.output.pop(EXECUTOR_EVIDENCE, None)
        if isinstance(collected, dict) and collected:
            extra, _ = EvidenceBundle.objects.get_or_create(
                incident=incident, step_index=run.step_index, source=run.executor,
                defaults={"collected_at": now, "bundle": jsonable(collected)})
            return True, f"evidence bundles #{bundle.pk} and #{extra.pk} ({run.executor}) captured", "", \
                {"evidence_bundle": bundle.pk, "executor_evidence_bundle": extra.pk}
        return True, f"evidence bundle #{bundle.pk} captured", "", {"evidence_bundle": bundle.pk}
    if run.kind == StepKind.VERIFY:
        target = incident.node
        if run.params.get("target") == "replacement":
            target = incident.replacement_node
            if target is None:
                return False, "waiting for the replacement node to enrol into the pool", WaitingOn.REPLACEMENT, {}
        if target is None:
            return True, "nothing to verify", "", {}
        settings_row = pool_settings(target.pool_id)
        quiet = settings_row.verify_quiet_period_s if settings_row else 300
        gates = verification_gates(node=target, since=run.started_at or now, quiet_period_s=quiet, now=now)
        details = {"gates": [g.as_dict() for g in gates], "verified_node": target.pk}
        failing = [g for g in gates if not g.ok]
        if failing:
            return False, "verification: " + "; ".join(g.detail for g in failing), WaitingOn.VERIFICATION, details
        return True, f"{target.hostname} verified: " + "; ".join(g.detail for g in gates), "", details
    return True, "", "", {}


@in_server_language
def evidence_capture(incident: Incident, run: StepRun, *, now: datetime) -> EvidenceBundle:
    existing = EvidenceBundle.objects.filter(incident=incident, step_index=run.step_index,
                                             source="control_plane").first()
    if existing is not None:
        return existing
    from fleet.health.selectors.evidence import finding_payload, node_evidence

    if incident.node_id is not None:
        bundle = node_evidence(node=Node.objects.select_related("provider", "site", "pool").get(pk=incident.node_id))
    else:
        findings = [link.finding for link in incident.finding_links.select_related(
            "finding__rule", "finding__node", "finding__gpu")]
        bundle = {"scope": {"pool": str(incident.pool or ""), "site": str(incident.site or ""),
                            "provider": str(incident.provider or "")},
                  "nodes": sorted({f.node.hostname for f in findings}),
                  "findings": [finding_payload(f) | {"hostname": f.node.hostname} for f in findings]}
    return EvidenceBundle.objects.create(incident=incident, collected_at=now, source="control_plane",
                                         step_index=run.step_index, bundle=jsonable(bundle))


def step_finish(incident: Incident, run: StepRun, *, now: datetime, actor, message: str,
                kind: str = TimelineKind.STEP_DONE) -> None:
    run.status, run.finished_at, run.message = StepStatus.DONE, now, message[:1000]
    run.finished_by = run.finished_by or actor_label(actor)
    run.next_poll_at = None
    run.save()
    effect = {} if incident.dry_run else _node_effect(incident, run, now=now)
    text = f"{_step_label(run)} done" + (f": {message}" if message else "")
    timeline_add(incident, kind, text, at=now, actor=actor, run=run,
                 output={k: v for k, v in {**run.output, **effect}.items() if k != "runbook"})
    emit(incident, IncidentEventKind.STEP_CHANGED, at=now, run=run)
    incident.current_step = run.step_index + 1
    incident_set_state(incident, IncidentState.RUNNING)
    incident_advance(incident, now=now, actor=actor)


def _node_effect(incident: Incident, run: StepRun, *, now: datetime) -> dict:
    effect = NODE_EFFECTS.get(run.kind)
    if effect is None or incident.node_id is None:
        return {}
    new_state, allowed = effect
    current = Node.objects.filter(pk=incident.node_id).values_list("state", flat=True).first()
    if current is None or current == new_state or current == NodeState.RETIRED:
        return {}
    if allowed is not None and current not in allowed:
        return {}
    Node.objects.filter(pk=incident.node_id).update(state=new_state, updated_at=now)
    return {"node_state": {"from": current, "to": new_state}}


def run_wait(incident: Incident, run: StepRun, *, now: datetime, message: str, actor, waiting_on: str,
             next_poll: datetime | None) -> None:
    # A poll claims the waiting step (status running, phase poll/check) and comes back here: waiting on the same
    # thing with the same words is no news, so no timeline entry and no step_changed message for it.
    was_waiting = run.status == StepStatus.WAITING or (run.status == StepStatus.RUNNING and run.phase in (POLL, CHECK))
    changed = not (was_waiting and (run.message, run.waiting_on) == (message[:1000], waiting_on))
    run.status, run.message, run.waiting_on, run.next_poll_at = StepStatus.WAITING, message[:1000], waiting_on, \
        next_poll
    run.save()
    if changed:
        timeline_add(incident, TimelineKind.STEP_WAITING, f"{_step_label(run)} waiting: {message}", at=now,
                     actor=actor, run=run, output={k: v for k, v in run.output.items() if k != "runbook"})
        emit(incident, IncidentEventKind.STEP_CHANGED, at=now, run=run, waiting_on=waiting_on)
    if incident.state != IncidentState.PAUSED:
        incident_set_state(incident, IncidentState.WAITING, waiting_on=waiting_on, reason=message)
    incident.save()


def run_fail(incident: Incident, run: StepRun, *, now: datetime, message: str, actor) -> None:
    run.status, run.finished_at, run.message, run.next_poll_at = StepStatus.FAILED, now, message[:1000], None
    run.finished_by = actor_label(actor)
    run.save()
    timeline_add(incident, TimelineKind.STEP_FAILED, f"{_step_label(run)} failed: {message}", at=now, actor=actor,
                 run=run, output={k: v for k, v in run.output.items() if k != "runbook"})
    emit(incident, IncidentEventKind.STEP_CHANGED, at=now, run=run)
    policy = incident.plan[run.step_index].get("on_failure") or {"action": OnFailure.WAIT}
    action = policy.get("action", OnFailure.WAIT)
    if action == OnFailure.RETRY and run.attempt < policy.get("max_attempts", 3):
        delay = timedelta(seconds=policy.get("backoff_s", 60) * 2 ** (run.attempt - 1))
        retry = run_create(incident, run.step_index, run.attempt + 1, now=now, not_before=now + delay)
        timeline_add(incident, TimelineKind.STEP_RETRY,
                     f"{_step_label(run)}: attempt {retry.attempt} of {policy.get('max_attempts', 3)} in "
                     f"{int(delay.total_seconds())} s", at=now, run=retry)
        incident_set_state(incident, IncidentState.RUNNING)
        incident_advance(incident, now=now)
        return
    if action == OnFailure.ESCALATE and policy.get("workflow"):
        target = Workflow.objects.filter(slug=policy["workflow"], enabled=True).first()
        if target is not None:
            workflow_escalate(incident, target, now=now, actor=ENGINE,
                              reason=f"{_step_label(run)} failed: {message}")
            return
        message = f"{message} (escalation workflow {policy['workflow']} is missing or disabled)"
    if action == OnFailure.CONTINUE:
        timeline_add(incident, TimelineKind.NOTE, f"{_step_label(run)} is best-effort: going on", at=now, run=run)
        incident.current_step = run.step_index + 1
        incident_set_state(incident, IncidentState.RUNNING)
        incident_advance(incident, now=now)
        return
    exhausted = " (retries exhausted)" if action == OnFailure.RETRY else ""
    incident_set_state(incident, IncidentState.NEEDS_ATTENTION, waiting_on=WaitingOn.OPERATOR,
                       reason=f"{_step_label(run)} failed{exhausted}: {message} — retry, skip, escalate or cancel")
    incident.save()


def workflow_escalate(incident: Incident, workflow: Workflow, *, now: datetime, actor, reason: str) -> None:
    """Continue with another workflow after the current step: its steps are appended to the plan (indexes keep
    growing, so every attempt keeps a unique key); cordon/drain already done in this incident are skipped."""
    if len(incident.plan) + len(workflow.steps) > MAX_PLAN:
        incident_set_state(incident, IncidentState.NEEDS_ATTENTION, waiting_on=WaitingOn.OPERATOR,
                           reason=f"escalating to {workflow.slug} would make the plan longer than {MAX_PLAN} steps "
                                  "(an escalation loop?)")
        incident.save()
        return
    index = incident.current_step
    previous = incident.workflow.slug
    incident.plan = [*incident.plan[:index + 1], *workflow.steps]
    incident.workflow = workflow
    incident.current_step = index + 1
    timeline_add(incident, TimelineKind.ESCALATED, f"escalated from {previous} to {workflow.slug}: {reason}",
                 at=now, actor=actor, output={"from": previous, "to": workflow.slug,
                                              "workflow_version": workflow.version})
    done = set(StepRun.objects.filter(incident=incident, status=StepStatus.DONE, kind__in=SKIP_IF_DONE)
               .values_list("kind", flat=True))
    while incident.current_step < len(incident.plan) and incident.plan[incident.current_step]["kind"] in done:
        skipped = run_create(incident, incident.current_step, 1, now=now, status=StepStatus.SKIPPED,
                             message="already done earlier in this incident")
        timeline_add(incident, TimelineKind.STEP_SKIPPED, f"{_step_label(skipped)} skipped: already done earlier "
                                                          "in this incident", at=now, run=skipped)
        incident.current_step += 1
    incident_set_state(incident, IncidentState.RUNNING)
    incident_advance(incident, now=now)


def incident_close(incident: Incident, state: str, resolution: str, *, now: datetime, actor=None) -> None:
    incident.state, incident.closed_at, incident.resolution = state, now, resolution[:300]
    incident.state_reason, incident.waiting_on = "", ""
    StepRun.objects.filter(incident=incident).exclude(status__in=sorted(STEP_TERMINAL)).update(
        status=StepStatus.CANCELLED, finished_at=now, claim="", lease_until=None, next_poll_at=None)
    incident.save()
    kind = TimelineKind.RESOLVED if state == IncidentState.RESOLVED else TimelineKind.CANCELLED
    timeline_add(incident, kind, f"{state}: {resolution}", at=now, actor=actor)
    emit(incident, IncidentEventKind.CLOSED, at=now, resolution=resolution)
    if incident.cause_kind == CauseKind.MASS_FAILURE and incident.breaker_id is not None:
        from .breakers import breaker_reset

        breaker_reset(breaker=incident.breaker, actor=actor, note=f"incident {incident.key} {state}", now=now)
    transaction.on_commit(partial(incidents_admit_safely, incident.pool_id), robust=True)


# --- admission: the pool's concurrency limit ----------------------------------------------------------------
def incidents_admit_safely(pool_id: int | None) -> None:
    try:
        incidents_admit(pool_id=pool_id)
    except Exception:  # the sweep admits again; a failed hook must not fail the change that triggered it
        logger.exception("admission for pool %s failed; the sweep will retry", pool_id)


def incidents_admit(*, pool_id: int | None, now: datetime | None = None) -> int:
    """Start queued incidents of one pool, oldest first, while the pool has remediation slots. A node being
    remediated holds a slot (`Pool.max_concurrent_replacements`); dry-run and urgent workflows take none; an
    operator's own incidents (cause `manual:…`) start at once. Queued incidents say why they wait. Returns how many
    started."""
    started = 0
    with transaction.atomic():
        now = now or timezone.now()
        pool = Pool.objects.select_for_update().filter(pk=pool_id).first() if pool_id is not None else None
        queued = list(Incident.objects.filter(pool_id=pool_id, state=IncidentState.QUEUED)
                      .order_by("opened_at", "pk").values_list("pk", flat=True))
        if not queued:
            return 0
        active_nodes = set(Incident.objects.filter(pool_id=pool_id, state__in=sorted(ACTIVE_STATES), dry_run=False,
                                                   node__isnull=False).values_list("node_id", flat=True))
        limit = pool.max_concurrent_replacements if pool is not None else None
        position = 0
        for incident_id in queued:
            incident = incident_lock(incident_id)
            if incident is None or incident.state != IncidentState.QUEUED:
                continue
            if _findings_gone(incident):
                incident_close(incident, IncidentState.RESOLVED, "its findings resolved while it waited in the "
                                                                 "queue; nothing to do", now=now)
                continue
            breaker = blocking_breaker(pool_id=incident.pool_id, site_id=incident.site_id)
            busy = incident.node_id in active_nodes
            if incident.cause_kind == CauseKind.MANUAL:  # queued before operators' incidents started at once
                operator_incident_start(incident, now=now)
                if incident.node_id is not None:
                    active_nodes.add(incident.node_id)
                started += 1
                continue
            if breaker is not None:
                reason = f"automation paused: the {breaker.scope} circuit breaker is open"
            elif busy:
                reason = "another incident is running on the same node; this one follows it"
            elif incident.dry_run or incident.workflow.urgent or limit is None or len(active_nodes) < limit:
                incident_start(incident, now=now)
                if not incident.dry_run and incident.node_id is not None:
                    active_nodes.add(incident.node_id)
                started += 1
                continue
            else:
                position += 1
                reason = (f"waiting for a remediation slot: {len(active_nodes)} of {limit} node(s) of pool "
                          f"{pool.name} are being remediated (queue position {position})")
            if incident_set_state(incident, IncidentState.QUEUED, reason=reason):
                incident.save(update_fields=["state", "state_reason", "waiting_on", "updated_at"])
    return started


def _findings_gone(incident: Incident) -> bool:
    if incident.cause_kind in (CauseKind.MANUAL, CauseKind.MASS_FAILURE):
        return False
    states = list(incident.finding_links.values_list("finding__state", flat=True))
    return bool(states) and all(state != "open" for state in states)


def operator_incident_start(incident: Incident, *, now: datetime, actor=None) -> None:
    """An operator's own action (cordon, drain, reboot from the node page) is not automation: no circuit breaker,
    remediation slot or other incident on the node holds it back. The timeline names what it runs alongside."""
    others = list(Incident.objects.filter(node_id=incident.node_id, state__in=sorted(ACTIVE_STATES))
                  .exclude(pk=incident.pk).values_list("key", flat=True)) if incident.node_id is not None else []
    incident_start(incident, now=now, actor=actor,
                   message=f"started workflow {incident.workflow.slug} at once: an operator's action"
                   + (f", alongside {', '.join(others)} on the same node" if others else "")
                   + (" (dry run: nothing is changed)" if incident.dry_run else ""))


def incident_start(incident: Incident, *, now: datetime, actor=None, message: str = "") -> None:
    incident.started_at = incident.started_at or now
    incident_set_state(incident, IncidentState.RUNNING)
    timeline_add(incident, TimelineKind.STARTED, message or f"started workflow {incident.workflow.slug}"
                 + (" (dry run: nothing is changed)" if incident.dry_run else ""), at=now, actor=actor)
    incident_advance(incident, now=now)
