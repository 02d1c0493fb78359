"""Build nodes with faults, open incidents through the real intake, and walk workflows the way a worker and an
operator would — synchronously, with an explicit clock."""

from datetime import timedelta

from fleet.health.models import Finding
from fleet.health.services.evaluation import evaluate
from fleet.inventory.models import GPU
from fleet.remediation.choices import StepStatus
from fleet.remediation.models import Incident, PoolRemediationSettings, StepRun
from fleet.remediation.services.actions import incident_approve, incident_step_complete
from fleet.remediation.services.engine import current_run, step_execute
from fleet.remediation.services.intake import findings_intake
from fleet.telemetry.models import NodeStatus
from tests.factories import PoolFactory, ProviderFactory
from tests.health.factories import T0, ChangeLogEntryFactory, EventFactory, healthy_node

FORMS = {
    "cloud_dedicated": ("cloud", "cloud-replace"),
    "cloud_shared": ("cloud", "cloud-replace"),
    "bare_metal_hosted": ("idc", "hosted-hardware-ticket"),
    "bare_metal_owned": ("own", "owned-reboot"),
}


def pool_for(delivery_form: str, *, max_concurrent: int = 1, quiet_s: int = 0, **settings):
    kind = FORMS[delivery_form][0]
    provider = ProviderFactory(kind=kind, cloud="aws" if kind == "cloud" else "")
    pool = PoolFactory(provider=provider, delivery_form=delivery_form, max_concurrent_replacements=max_concurrent)
    PoolRemediationSettings.objects.filter(pool=pool).update(verify_quiet_period_s=quiet_s, **settings)
    return pool


def node_in(pool, **kwargs):
    return healthy_node(pool=pool, provider=pool.provider, delivery_form=pool.delivery_form, **kwargs)


def xid(node, *, at=T0, code=79, gpu_index=3):
    gpu = GPU.objects.get(node=node, index=gpu_index)
    return EventFactory(node=node, gpu=gpu, kind="xid", code=code, at=at)


def fault_and_intake(nodes, *, at=T0, code=79):
    for node in nodes:
        xid(node, at=at, code=code)
    evaluate(node_ids=[n.pk for n in nodes], now=at)
    return findings_intake(now=at)


def reboot(node, *, at):
    """The node rebooted and reported: its Xid findings resolve after the clear-hold (5 min)."""
    ChangeLogEntryFactory(node=node, at=at, field="boot_id", old="a", new=f"b-{at.timestamp()}")
    report(node, at=at)
    evaluate(node_ids=[node.pk], now=at)
    evaluate(node_ids=[node.pk], now=at + timedelta(minutes=6))


def report(node, *, at):
    NodeStatus.objects.filter(node=node).update(received_at=at, collected_at=at, silent=False)


def tick(incident: Incident, *, at) -> str:
    """What a worker does with the incident's current step right now."""
    incident.refresh_from_db()
    run = current_run(incident)
    if run is None:
        return "none"
    return step_execute(incident_id=incident.pk, step_index=run.step_index, attempt=run.attempt, now=at)


def walk(incident: Incident, operator, *, at, on_step=None, limit: int = 40) -> Incident:
    """Run the workflow to its end: the worker starts each step, the operator approves and marks manual steps
    done. `on_step(run, at)` may act between steps (report, reboot, enrol a replacement)."""
    for _ in range(limit):
        incident.refresh_from_db()
        if not incident.is_open:
            return incident
        at += timedelta(minutes=10)
        run = current_run(incident)
        if run is None:
            raise AssertionError(f"{incident.key} has no current step ({incident.state}: {incident.state_reason})")
        if on_step is not None:
            on_step(run, at)
            run.refresh_from_db()
        if run.status == StepStatus.AWAITING_APPROVAL:
            incident_approve(incident_id=incident.pk, step_index=run.step_index, actor=operator, now=at)
        elif run.status == StepStatus.PENDING:
            tick(incident, at=at)
        elif run.status == StepStatus.WAITING and not run.executor_done:
            incident_step_complete(incident_id=incident.pk, step_index=run.step_index, actor=operator,
                                   note="done by the book", now=at)
        elif run.status == StepStatus.WAITING:
            StepRun.objects.filter(pk=run.pk).update(next_poll_at=at)
            tick(incident, at=at)
        else:
            raise AssertionError(f"unexpected step state {run.status}: {run.message}")
    raise AssertionError(f"{incident.key} did not finish: {incident.state} {incident.state_reason}")


def trigger(incident: Incident) -> Finding:
    return incident.finding_links.get(trigger=True).finding
