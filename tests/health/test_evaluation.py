import dataclasses
from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from fleet.health.models import Finding, HealthCondition, Rule, RuleOverride
from fleet.health.rules.catalog import RULES
from fleet.health.services import evaluation
from fleet.health.services.evaluation import evaluate
from fleet.inventory.models import GPU
from tests.factories import BaselineFactory, PoolFactory

from .factories import H100_MEMORY, T0, EventFactory, healthy_node
from .harness import open_findings, set_gpu, set_status

pytestmark = pytest.mark.django_db

FULL = int(H100_MEMORY * 0.99)
HALF = int(H100_MEMORY * 0.5)


def test_a_pending_condition_restarts_when_it_flaps():
    node = healthy_node()
    gpu = GPU.objects.get(node=node, index=0)
    set_gpu(gpu, memory_used_bytes=FULL)
    assert evaluate(now=T0).pending == 1
    condition = HealthCondition.objects.get(node=node, rule__slug="gpu_memory_pressure")
    assert (condition.first_true_at, condition.subject) == (T0, f"gpu:{gpu.pk}")

    set_gpu(gpu, memory_used_bytes=HALF)
    evaluate(now=T0 + timedelta(seconds=200))
    assert not HealthCondition.objects.filter(node=node).exists(), "a pending condition that clears starts over"

    set_gpu(gpu, memory_used_bytes=FULL)
    evaluate(now=T0 + timedelta(seconds=260))
    evaluate(now=T0 + timedelta(seconds=559))
    assert not open_findings("gpu_memory_pressure", node).exists()
    result = evaluate(now=T0 + timedelta(seconds=560))
    assert result.opened == 1
    finding = open_findings("gpu_memory_pressure", node).get()
    assert finding.first_seen == T0 + timedelta(seconds=260)
    assert finding.opened_at == T0 + timedelta(seconds=560)
    assert result.opened_ids == [finding.pk]


def test_a_relapse_during_the_clear_hold_keeps_the_same_finding_open():
    node = healthy_node()
    gpu = GPU.objects.get(node=node, index=0)
    set_gpu(gpu, ecc_volatile_uncorrected=1)
    evaluate(now=T0)
    finding = open_findings("ecc_uncorrectable", node).get()

    set_gpu(gpu, ecc_volatile_uncorrected=0)
    evaluate(now=T0 + timedelta(seconds=60))
    assert HealthCondition.objects.get(node=node).first_false_at == T0 + timedelta(seconds=60)
    set_gpu(gpu, ecc_volatile_uncorrected=2)
    result = evaluate(now=T0 + timedelta(seconds=120))
    assert (result.opened, result.updated, result.resolved) == (0, 1, 0)
    assert HealthCondition.objects.get(node=node).first_false_at is None

    set_gpu(gpu, ecc_volatile_uncorrected=0)
    evaluate(now=T0 + timedelta(seconds=180))
    evaluate(now=T0 + timedelta(seconds=479))
    assert open_findings("ecc_uncorrectable", node).get().pk == finding.pk
    evaluate(now=T0 + timedelta(seconds=480))
    finding.refresh_from_db()
    assert finding.state == "resolved"
    assert finding.last_seen == T0 + timedelta(seconds=120)
    assert finding.evidence["values"]["ecc_volatile_uncorrected"] == 2
    assert Finding.objects.filter(node=node).count() == 1
    assert not HealthCondition.objects.filter(node=node).exists()


def test_result_counts_and_last_seen():
    node = healthy_node()
    set_status(node, tcp_retrans_pct=3.0, gpu_count_seen=7)
    first = evaluate(now=T0)
    assert (first.nodes, first.opened, first.pending) == (1, 0, 2)
    second = evaluate(now=T0 + timedelta(seconds=30))
    assert (second.opened, second.pending) == (1, 1)
    third = evaluate(now=T0 + timedelta(seconds=300))
    assert (third.opened, third.updated) == (1, 1)
    assert open_findings("gpu_count_low", node).get().last_seen == T0 + timedelta(seconds=300)
    assert third.queries > 0 and third.duration_ms > 0


def test_disabling_a_rule_resolves_its_findings_at_once():
    node = healthy_node()
    set_status(node, gpu_count_seen=6)
    evaluate(now=T0)
    evaluate(now=T0 + timedelta(seconds=30))
    finding = open_findings("gpu_count_low", node).get()
    Rule.objects.filter(slug="gpu_count_low").update(enabled=False)
    result = evaluate(now=T0 + timedelta(seconds=45))
    finding.refresh_from_db()
    assert (finding.state, finding.resolution, result.resolved) == ("resolved", "rule disabled", 1)
    assert not HealthCondition.objects.filter(node=node).exists()


def test_a_pool_override_disables_a_rule_for_that_pool_only():
    pool = PoolFactory()
    inside, outside = healthy_node(pool=pool), healthy_node()
    for node in (inside, outside):
        set_status(node, gpu_count_seen=6)
    RuleOverride.objects.create(rule=Rule.objects.get(slug="gpu_count_low"), pool=pool, enabled=False)
    evaluate(now=T0)
    evaluate(now=T0 + timedelta(seconds=30))
    assert list(open_findings("gpu_count_low").values_list("node_id", flat=True)) == [outside.pk]


def test_a_pool_override_of_the_duration():
    pool = PoolFactory()
    node = healthy_node(pool=pool)
    RuleOverride.objects.create(rule=Rule.objects.get(slug="tcp_retransmits"), pool=pool, duration_s=0)
    set_status(node, tcp_retrans_pct=5.0)
    evaluate(now=T0)
    assert open_findings("tcp_retransmits", node).exists()


def test_retired_nodes_have_their_findings_resolved():
    node = healthy_node()
    set_status(node, gpu_count_seen=6)
    evaluate(now=T0)
    evaluate(now=T0 + timedelta(seconds=30))
    node.state = "retired"
    node.save(update_fields=["state"])
    evaluate(now=T0 + timedelta(seconds=45))
    assert Finding.objects.get(node=node).resolution == "node retired"


def test_evaluating_named_nodes_leaves_the_others_alone():
    one, two = healthy_node(), healthy_node()
    for node in (one, two):
        EventFactory(node=node, kind="xid", code=79, at=T0)
    result = evaluate(node_ids=[one.pk], now=T0)
    assert (result.nodes, result.opened) == (1, 1)
    assert open_findings("xid", one).exists()
    assert not open_findings("xid", two).exists()


def test_missing_catalog_rows_are_created_by_the_next_cycle():
    Rule.objects.filter(slug="tcp_retransmits").delete()
    evaluate(now=T0)
    assert Rule.objects.filter(slug="tcp_retransmits").exists()
    assert Rule.objects.count() == len(RULES)


def test_invalid_stored_parameters_fall_back_to_the_default():
    node = healthy_node()
    Rule.objects.filter(slug="tcp_retransmits").update(params={"threshold_pct": "a lot"}, duration_s=0)
    set_status(node, tcp_retrans_pct=1.5)
    evaluate(now=T0)
    assert open_findings("tcp_retransmits", node).get().evidence["rule"]["params"]["threshold_pct"] == 1.0


def test_a_failing_rule_does_not_stop_the_others(monkeypatch):
    def boom(node, params, ctx):
        raise RuntimeError("bug in a rule")

    rules = [dataclasses.replace(r, check=boom) if r.slug == "gpu_count_low" else r for r in RULES]
    monkeypatch.setattr(evaluation, "RULES", rules)
    node = healthy_node()
    set_status(node, gpu_count_seen=6, tcp_retrans_pct=9.0)
    Rule.objects.filter(slug="tcp_retransmits").update(duration_s=0)
    evaluate(now=T0)
    assert open_findings("tcp_retransmits", node).exists()
    assert not open_findings("gpu_count_low", node).exists()


def test_only_one_open_finding_per_rule_node_and_subject():
    node = healthy_node()
    EventFactory(node=node, kind="xid", code=79, at=T0)
    evaluate(now=T0)
    finding = open_findings("xid", node).get()
    duplicate = Finding(**{f.attname: getattr(finding, f.attname) for f in Finding._meta.concrete_fields
                           if f.attname != "id"})
    with pytest.raises(IntegrityError), transaction.atomic():
        duplicate.save()
    duplicate.state = "resolved"
    duplicate.save()  # resolved history rows may repeat
    assert Finding.objects.filter(node=node).count() == 2


def _fleet(size: int, faulty: int):
    pool = PoolFactory()
    BaselineFactory(pool=pool, gpu_model="NVIDIA H100 80GB HBM3")
    nodes = [healthy_node(pool=pool, gpus=2, expected_gpu_count=2) for _ in range(size)]
    for node in nodes[:faulty]:
        gpu = GPU.objects.filter(node=node).first()
        set_gpu(gpu, ecc_volatile_uncorrected=1, memory_used_bytes=FULL)
        set_status(node, lost_gpus=["00000000:19:00.0"], tcp_retrans_pct=5.0)
        EventFactory(node=node, kind="xid", code=79, at=T0, gpu=gpu)
        EventFactory(node=node, kind="sxid", code=20034, at=T0, message="Fatal")
    return nodes


# Reads, lock, catalog and state loads, plus the bulk writes of one cycle; independent of the fleet size.
MAX_QUERIES_PER_CYCLE = 25


def _cycle_queries(now) -> tuple[int, int]:
    with CaptureQueriesContext(connection) as captured:
        result = evaluate(now=now)
    assert result.queries == len(captured.captured_queries)
    return result.queries, result.opened + result.updated + result.pending + result.resolved


def _counts(size: int, faulty: int) -> list[int]:
    nodes = _fleet(size, faulty)
    counts = []
    for step in (0, 30, 300, 330):  # pending → opened → more opened → steady updates
        queries, changes = _cycle_queries(T0 + timedelta(seconds=step))
        assert changes > 0
        counts.append(queries)
    for node in nodes:
        node.delete()
    return counts


def test_query_count_does_not_grow_with_healthy_nodes(django_assert_max_num_queries):
    small = _counts(5, faulty=3)
    large = _counts(50, faulty=3)
    assert small == large
    assert max(large) <= MAX_QUERIES_PER_CYCLE
    _fleet(50, faulty=0)
    with django_assert_max_num_queries(MAX_QUERIES_PER_CYCLE):
        assert evaluate(now=T0).nodes == 50


def test_query_count_does_not_grow_with_faulty_nodes():
    small = _counts(5, faulty=5)
    large = _counts(50, faulty=50)
    if connection.vendor == "postgresql":
        assert small == large
        assert max(large) <= MAX_QUERIES_PER_CYCLE
    else:
        # SQLite caps a statement at 999 parameters, so Django splits big bulk writes into batches; the reads
        # (the part that scales with the fleet) stay constant.
        assert all(0 <= b - a <= 8 for a, b in zip(small, large, strict=True)), (small, large)


@pytest.fixture
def other_session():
    """A second PostgreSQL session, as another worker running a cycle would have."""
    if connection.vendor != "postgresql":
        pytest.skip("advisory locks are PostgreSQL's; SQLite serialises writers instead")
    import psycopg

    db = connection.settings_dict
    with psycopg.connect(host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432, user=db["USER"],
                         password=db["PASSWORD"] or None, dbname=db["NAME"], autocommit=True) as session:
        yield session


def test_the_periodic_cycle_skips_while_another_cycle_runs(other_session):
    node = healthy_node()
    EventFactory(node=node, kind="xid", code=79, at=T0)
    other_session.execute("SELECT pg_advisory_lock(%s)", [evaluation.ADVISORY_LOCK_KEY])
    result = evaluate(now=T0)
    assert result.skipped is True
    assert not open_findings("xid", node).exists()
    other_session.execute("SELECT pg_advisory_unlock(%s)", [evaluation.ADVISORY_LOCK_KEY])
    assert evaluate(now=T0).opened == 1


def test_an_urgent_node_cycle_waits_for_the_lock_and_gives_up_after_the_timeout(other_session, monkeypatch):
    from django.db import OperationalError

    node = healthy_node()
    EventFactory(node=node, kind="xid", code=79, at=T0)
    monkeypatch.setattr(evaluation, "NODE_CYCLE_LOCK_TIMEOUT", "300ms")
    other_session.execute("SELECT pg_advisory_lock(%s)", [evaluation.ADVISORY_LOCK_KEY])
    with pytest.raises(OperationalError):  # the task retries it (autoretry_for=OperationalError)
        evaluate(node_ids=[node.pk], now=T0)
    other_session.execute("SELECT pg_advisory_unlock(%s)", [evaluation.ADVISORY_LOCK_KEY])
    assert evaluate(node_ids=[node.pk], now=T0).opened == 1
