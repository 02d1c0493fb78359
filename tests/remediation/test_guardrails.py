"""Guardrails: the pool's concurrency limit and its visible queue, circuit breakers per pool and site, operator
overrides, the repeat-offender escalation, one incident per node and cause, one workflow at a time per node."""

from datetime import timedelta

import pytest

from fleet.health.models import Finding
from fleet.health.services.evaluation import evaluate
from fleet.inventory.models import GPU
from fleet.remediation.choices import ACTIVE_STATES, IncidentState, StepStatus
from fleet.remediation.models import CircuitBreaker, FindingIntake, Incident, StepRun, Workflow
from fleet.remediation.services.actions import incident_cancel
from fleet.remediation.services.breakers import breaker_reset
from fleet.remediation.services.engine import current_run
from fleet.remediation.services.intake import findings_intake
from fleet.remediation.services.overrides import override_create
from fleet.remediation.services.sweep import remediation_sweep
from tests.factories import SiteFactory, UserFactory
from tests.health.factories import T0

from .helpers import fault_and_intake, node_in, pool_for, tick, xid

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator():
    return UserFactory(username="op", role="operator")


def _active(pool):
    return Incident.objects.filter(pool=pool, state__in=sorted(ACTIVE_STATES))


def test_the_concurrency_limit_queues_the_rest_visibly(operator):
    pool = pool_for("cloud_dedicated", max_concurrent=2)
    nodes = [node_in(pool) for _ in range(12)]  # 5 of 12 faulty: below the breaker's threshold
    fault_and_intake(nodes[:5])
    assert _active(pool).count() == 2
    queued = list(Incident.objects.filter(pool=pool, state=IncidentState.QUEUED).order_by("opened_at", "pk"))
    assert len(queued) == 3
    assert "2 of 2 node(s)" in queued[0].state_reason and "queue position 1" in queued[0].state_reason
    assert "queue position 3" in queued[2].state_reason
    # A slot frees up: the oldest queued incident starts, the others move up.
    incident_cancel(incident_id=_active(pool).first().pk, actor=operator, note="false alarm")
    remediation_sweep(now=T0 + timedelta(minutes=1))
    queued[0].refresh_from_db()
    assert queued[0].state == IncidentState.RUNNING
    assert _active(pool).count() == 2
    queued[1].refresh_from_db()
    assert "queue position 1" in queued[1].state_reason


def test_a_pool_failing_at_once_opens_one_mass_failure_incident_and_no_replacements(operator):
    pool = pool_for("cloud_dedicated", max_concurrent=5)
    nodes = [node_in(pool) for _ in range(10)]
    fault_and_intake(nodes[:6], at=T0)  # 60 % within 5 min
    mass = Incident.objects.get(cause_kind="mass_failure")
    breaker = CircuitBreaker.objects.get(pool=pool)
    assert breaker.state == "open" and breaker.incident == mass
    assert "6 of 10 nodes (60 %)" in mass.title
    assert mass.workflow.slug == "mass-failure" and mass.node is None
    assert mass.responsible_party == "provider"
    assert mass.finding_links.count() == 6
    per_node = Incident.objects.exclude(pk=mass.pk)
    # Intake ran node by node: the ones before the trip opened but are paused; none requested a replacement.
    assert all(i.state in (IncidentState.PAUSED, IncidentState.QUEUED) for i in per_node)
    for incident in per_node:
        tick(incident, at=T0 + timedelta(minutes=1))
    assert not StepRun.objects.filter(kind="request_replacement").exists()
    assert not StepRun.objects.filter(incident__in=per_node, status=StepStatus.RUNNING).exists()
    outcomes = set(FindingIntake.objects.filter(finding__node__in=nodes[:6]).values_list("outcome", flat=True))
    assert "mass_failure" in outcomes
    # A later fault in the pool attaches to the mass failure too.
    fault_and_intake(nodes[6:7], at=T0 + timedelta(minutes=2))
    assert mass.finding_links.count() == 7
    assert Incident.objects.filter(cause_kind="mass_failure").count() == 1

    # Only an operator closes it; paused incidents resume.
    breaker_reset(breaker=breaker, actor=operator, note="provider fixed the switch", now=T0 + timedelta(hours=1))
    mass.refresh_from_db()
    assert mass.state == IncidentState.RESOLVED
    assert not Incident.objects.filter(state=IncidentState.PAUSED).exists()


def test_a_site_breaker_counts_nodes_across_pools(operator):
    site = SiteFactory()
    pools = [pool_for("bare_metal_hosted", max_concurrent=5) for _ in range(2)]
    nodes = []
    for pool in pools:
        pool.site = site
        pool.save()
        nodes += [node_in(pool, site=site) for _ in range(3)]
    CircuitBreaker.objects.filter(pool__in=pools).update(min_nodes=10)  # pools alone never trip
    fault_and_intake(nodes[:2] + nodes[3:5], at=T0)  # 4 of 6 nodes of the site
    breaker = CircuitBreaker.objects.get(site=site)
    assert breaker.state == "open"
    assert Incident.objects.get(cause_kind="mass_failure").site == site


def test_a_small_pool_losing_one_node_is_not_a_mass_failure():
    pool = pool_for("cloud_dedicated")
    nodes = [node_in(pool) for _ in range(2)]
    fault_and_intake(nodes[:1])
    assert CircuitBreaker.objects.get(pool=pool).state == "closed"
    assert not Incident.objects.filter(cause_kind="mass_failure").exists()


def test_snoozed_findings_open_no_incident_until_the_snooze_ends(operator):
    pool = pool_for("bare_metal_owned")
    node = node_in(pool)
    xid(node, at=T0)
    evaluate(node_ids=[node.pk], now=T0)
    finding = Finding.objects.get(node=node, rule__slug="xid")
    override_create(actor=operator, kind="snooze", reason="vendor on site today", finding=finding,
                    until=T0 + timedelta(hours=2), now=T0)
    findings_intake(now=T0)
    assert not Incident.objects.exists()
    intake = FindingIntake.objects.get(finding=finding)
    assert intake.outcome == "snoozed" and "vendor on site today" in intake.message
    remediation_sweep(now=T0 + timedelta(hours=1))
    assert not Incident.objects.exists()
    remediation_sweep(now=T0 + timedelta(hours=2, seconds=1))
    assert Incident.objects.filter(node=node).count() == 1


def test_a_gpu_marked_healthy_opens_no_incident(operator):
    pool = pool_for("bare_metal_owned")
    node = node_in(pool)
    gpu = GPU.objects.get(node=node, index=3)
    override_create(actor=operator, kind="mark_healthy", reason="burn-in passed", gpu=gpu,
                    until=T0 + timedelta(days=1), now=T0)
    fault_and_intake([node])
    assert not Incident.objects.exists()
    assert FindingIntake.objects.get().outcome == "marked_healthy"
    from fleet.core.models import AuditEntry

    assert AuditEntry.objects.filter(object_type="remediation.override", note__contains="burn-in").exists()


def test_five_remediations_in_a_week_send_the_node_to_rma(operator):
    pool = pool_for("bare_metal_owned", max_concurrent=5)
    node = node_in(pool)
    workflow = Workflow.objects.get(slug="owned-reboot")
    for day in range(5):
        when = T0 - timedelta(days=day + 1)
        Incident.objects.create(key=f"inc-old{day}", node=node, pool=pool, cause_kind="xid", cause="xid:79",
                                title="old", state="resolved", workflow=workflow, opened_at=when, started_at=when,
                                closed_at=T0, opened_by="policy")
    fault_and_intake([node])
    incident = Incident.objects.get(node=node, state__in=sorted(ACTIVE_STATES))
    assert incident.workflow.slug == "owned-rma"
    assert incident.policy.min_recent_remediations == 5


def test_a_second_finding_with_the_same_cause_attaches():
    pool = pool_for("bare_metal_owned")
    node = node_in(pool)
    fault_and_intake([node])
    incident = Incident.objects.get(node=node)
    xid(node, at=T0, code=79, gpu_index=5)
    evaluate(node_ids=[node.pk], now=T0 + timedelta(seconds=5))
    findings_intake(now=T0 + timedelta(seconds=5))
    assert Incident.objects.filter(node=node).count() == 1
    assert incident.finding_links.count() == 2
    assert incident.timeline.filter(kind="finding_attached").count() == 1


def test_another_cause_on_a_busy_node_waits_for_the_first_incident(operator):
    pool = pool_for("bare_metal_owned", max_concurrent=5)
    node = node_in(pool)
    fault_and_intake([node])
    first = Incident.objects.get(node=node)
    xid(node, at=T0, code=48, gpu_index=5)  # double-bit ECC: reset first
    evaluate(node_ids=[node.pk], now=T0 + timedelta(seconds=5))
    findings_intake(now=T0 + timedelta(seconds=5))
    second = Incident.objects.exclude(pk=first.pk).get(node=node)
    assert second.workflow.slug == "owned-gpu-reset"
    assert second.state == IncidentState.QUEUED and "same node" in second.state_reason
    incident_cancel(incident_id=first.pk, actor=operator)
    remediation_sweep(now=T0 + timedelta(minutes=1))
    second.refresh_from_db()
    assert second.state == IncidentState.RUNNING


def test_an_interruption_notice_is_urgent_and_not_held_by_the_limit(operator):
    from fleet.telemetry.models import NodeStatus

    pool = pool_for("cloud_dedicated", max_concurrent=1)
    busy, spot = node_in(pool), node_in(pool, billing_mode="spot")
    fault_and_intake([busy])
    deadline = T0 + timedelta(minutes=2)
    NodeStatus.objects.filter(node=spot).update(notice_kind="terminate", notice_deadline=deadline)
    evaluate(node_ids=[spot.pk], now=T0)
    findings_intake(now=T0)
    incident = Incident.objects.get(node=spot)
    assert incident.workflow.slug == "spot-reclaim" and incident.cause == "preemption"
    assert incident.state == IncidentState.RUNNING
    tick(incident, at=T0)
    run = current_run(incident)
    assert run.kind == "checkpoint"
    assert run.deadline_at == deadline  # before the notice's deadline, not 120 s later


def test_a_queued_incident_whose_findings_resolved_closes_without_action(operator):
    pool = pool_for("bare_metal_owned", max_concurrent=1)
    fault_and_intake([node_in(pool), node_in(pool)])
    queued = Incident.objects.get(state=IncidentState.QUEUED)
    running = Incident.objects.get(state=IncidentState.RUNNING)
    Finding.objects.filter(node=queued.node).update(state="resolved", resolved_at=T0)
    incident_cancel(incident_id=running.pk, actor=operator)
    remediation_sweep(now=T0 + timedelta(minutes=1))
    queued.refresh_from_db()
    assert queued.state == IncidentState.RESOLVED and "resolved while it waited" in queued.resolution


def test_completing_the_mass_failure_incident_closes_the_breaker(operator):
    from fleet.remediation.services.actions import incident_step_complete

    pool = pool_for("bare_metal_hosted", max_concurrent=5)
    nodes = [node_in(pool) for _ in range(4)]
    fault_and_intake(nodes[:3], at=T0)  # 3 of 4
    mass = Incident.objects.get(cause_kind="mass_failure")
    tick(mass, at=T0)  # evidence needs nobody: the findings of the whole pool
    assert len(mass.evidence.get().bundle["findings"]) == 3
    at = T0
    while mass.is_open:
        at += timedelta(minutes=1)
        tick(mass, at=at)
        run = current_run(mass)
        if run.status == StepStatus.WAITING:
            incident_step_complete(incident_id=mass.pk, step_index=run.step_index, actor=operator, now=at)
        mass.refresh_from_db()
    assert mass.state == IncidentState.RESOLVED
    breaker = CircuitBreaker.objects.get(pool=pool)
    assert breaker.state == "closed" and breaker.reset_by == "op"



def _five_old_remediations(node, pool, cause: str = "xid:79", *, link: bool = True) -> None:
    """Five remediations of `cause` in the week before T0: the first a real one (its finding names GPU 3), the other
    four copies of it, each linked to the same finding when `link`."""
    from fleet.remediation.models import IncidentFinding

    workflow = Workflow.objects.get(slug="owned-reboot")
    first = None
    if link:
        fault_and_intake([node], at=T0 - timedelta(days=6))
        first = Incident.objects.get(node=node)
        Incident.objects.filter(pk=first.pk).update(state="resolved", closed_at=T0 - timedelta(days=6),
                                                    started_at=T0 - timedelta(days=6))
        from fleet.health.models import Finding

        Finding.objects.filter(node=node).update(state="resolved", resolved_at=T0 - timedelta(days=6))
    for day in range(5 if first is None else 4):
        when = T0 - timedelta(days=day + 1)
        incident = Incident.objects.create(key=f"inc-{node.pk}-{cause}-{day}", node=node, pool=pool,
                                           cause_kind=cause.split(":")[0] if cause.startswith("xid") else "rule",
                                           cause=cause, title="old", state="resolved", workflow=workflow,
                                           opened_at=when, started_at=when, closed_at=T0, opened_by="policy")
        if first is not None:
            trigger = first.finding_links.get().finding
            IncidentFinding.objects.create(incident=incident, finding=trigger, trigger=True, attached_at=when)


def test_unrelated_faults_on_one_node_do_not_add_up_to_an_rma():
    pool = pool_for("bare_metal_owned", max_concurrent=5)
    node = node_in(pool)
    for cause in ("xid:13", "xid:31", "rule:ecc_uncorrectable", "rule:thermal_slowdown", "xid:43"):
        _five_old_remediations(node, pool, cause, link=False)
    fault_and_intake([node])
    assert Incident.objects.get(node=node, state__in=sorted(ACTIVE_STATES)).workflow.slug == "owned-reboot"


def test_the_same_card_again_goes_to_rma_and_a_replaced_card_starts_clean():
    from fleet.health.services.evaluation import evaluate
    from fleet.remediation.services.intake import findings_intake
    from tests.health.factories import EventFactory

    pool = pool_for("bare_metal_owned", max_concurrent=5)
    same, swapped = node_in(pool), node_in(pool)
    for node in (same, swapped):
        GPU.objects.filter(node=node, index=3).update(serial=f"SN-{node.pk}-OLD")
        _five_old_remediations(node, pool)
    # On `swapped` the vendor replaced the card in slot 3: the old one is gone, a new one (new serial) reports.
    old = GPU.objects.get(node=swapped, index=3)
    GPU.objects.filter(pk=old.pk).update(present=False, index=99)
    new = GPU.objects.create(node=swapped, index=3, uuid=f"GPU-new-{swapped.pk}", serial=f"SN-{swapped.pk}-NEW",
                             model=old.model, pci_bus_id=old.pci_bus_id)
    EventFactory(node=same, gpu=GPU.objects.get(node=same, index=3), kind="xid", code=79, at=T0)
    EventFactory(node=swapped, gpu=new, kind="xid", code=79, at=T0)
    evaluate(node_ids=[same.pk, swapped.pk], now=T0)
    findings_intake(now=T0)
    same_card = Incident.objects.get(node=same, state__in=sorted(ACTIVE_STATES))
    assert same_card.workflow.slug == "owned-rma" and "new card" not in same_card.title
    new_card = Incident.objects.get(node=swapped, state__in=sorted(ACTIVE_STATES))
    assert new_card.workflow.slug == "owned-reboot"  # the new card is not sent back on its predecessor's record…
    # …and the incident says where to look instead.
    assert f"new card, same fault: the card it replaced in this slot (SN-{swapped.pk}-OLD)" in new_card.title
    assert "suspect the slot, riser, board or power" in new_card.title
    assert new_card.timeline.first().output["replaced_cards_same_fault"] == [f"SN-{swapped.pk}-OLD"]


def _lose(node, index: int) -> None:
    from tests.health.harness import set_gpu

    set_gpu(GPU.objects.get(node=node, index=index), lost=True, utilization_gpu_pct=None, memory_used_bytes=None)


@pytest.mark.parametrize("form", ["bare_metal_owned", "cloud_dedicated"])
def test_a_gpu_that_falls_off_the_bus_is_one_incident_and_one_slot(form):
    """Xid 79 on GPU 3 and GPU 3 then missing from NVML are one fault: one incident holds both findings, and the
    pool's second slot stays free for the next node's fault."""
    pool = pool_for(form, max_concurrent=2)
    node, other = node_in(pool), node_in(pool)
    xid(node, at=T0, code=79, gpu_index=3)
    _lose(node, 3)
    evaluate(node_ids=[node.pk], now=T0)
    findings_intake(now=T0)
    incident = Incident.objects.get(node=node)
    assert sorted(incident.finding_links.values_list("finding__rule__slug", flat=True)) == ["gpu_lost", "xid"]
    outcomes = dict(FindingIntake.objects.filter(finding__node=node).values_list("finding__rule__slug", "outcome"))
    assert sorted(outcomes.values()) == ["attached", "opened"]
    fault_and_intake([other], at=T0 + timedelta(minutes=1))
    assert Incident.objects.filter(node=other, state__in=sorted(ACTIVE_STATES)).exists(), \
        "the second node's fault got the slot the lost GPU's second finding would have taken"


def test_a_gpu_lost_after_its_xid_79_joins_the_open_incident():
    pool = pool_for("bare_metal_owned")
    node = node_in(pool)
    fault_and_intake([node], at=T0)  # Xid 79 on GPU 3
    incident = Incident.objects.get(node=node)
    _lose(node, 3)  # the next report: GPU 3 gone from NVML
    evaluate(node_ids=[node.pk], now=T0 + timedelta(seconds=30))
    findings_intake(now=T0 + timedelta(seconds=30))
    assert Incident.objects.filter(node=node).count() == 1
    lost = Finding.objects.get(node=node, rule__slug="gpu_lost")
    assert lost.incident_links.get().incident == incident
    assert "the same fault as finding" in FindingIntake.objects.get(finding=lost).message


def test_another_gpu_lost_on_the_same_node_is_its_own_incident():
    """Xid 79 on GPU 3 says nothing about GPU 5: losing GPU 5 is a second fault."""
    pool = pool_for("bare_metal_owned", max_concurrent=2)
    node = node_in(pool)
    fault_and_intake([node], at=T0)
    _lose(node, 5)
    evaluate(node_ids=[node.pk], now=T0 + timedelta(seconds=30))
    findings_intake(now=T0 + timedelta(seconds=30))
    assert sorted(Incident.objects.filter(node=node).values_list("cause", flat=True)) == ["rule:gpu_lost", "xid:79"]
