"""`fleet.core.db.rows_update`: what `bulk_update` writes, in one statement per few thousand rows on PostgreSQL."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from fleet.core import db
from fleet.health.models import Finding, Rule
from tests.factories import GPUFactory, NodeFactory

pytestmark = pytest.mark.django_db

FIELDS = ["state", "resolved_at", "resolution", "last_seen", "gpu", "severity", "summary", "summary_msg", "evidence",
          "xid_policy_version", "updated_at"]


def _findings(count: int) -> list[Finding]:
    rule, node, opened = Rule.objects.get(slug="gpu_lost"), NodeFactory(), timezone.now() - timedelta(hours=1)
    return Finding.objects.bulk_create([Finding(
        rule=rule, node=node, subject=f"gpu:{n}", step=rule.step, layer=rule.layer, severity="warning",
        summary=f"finding {n}", summary_msg={"id": "x", "params": {"n": n}}, responsible_party="provider",
        action_kind="provider_ticket", recommended_action="ticket", evidence={"values": {"n": n}},
        xid_policy_version=1, first_seen=opened, opened_at=opened, last_seen=opened) for n in range(count)])


def test_writes_every_named_field_of_every_row_and_nothing_else():
    findings = _findings(5)
    gpu, now = GPUFactory(node=findings[0].node), timezone.now()
    for finding in findings:
        finding.refresh_from_db()
    changed = findings[1:4]
    for n, finding in enumerate(changed):
        finding.state = "resolved"
        finding.resolved_at = now - timedelta(seconds=n)
        finding.resolution = f"clear for {n} s (it's \"quoted\"; DROP TABLE x; --)"
        finding.last_seen = now
        finding.gpu = gpu if n == 0 else None
        finding.severity = "critical"
        finding.summary = "ünïcode ✓ and a NUL-free string"
        finding.summary_msg = None  # SQL NULL, as bulk_update writes it
        finding.evidence = {"values": {"n": n, "list": [1, 2.5, None, "x"]}, "nested": {"a": {"b": True}}}
        finding.xid_policy_version = None
        finding.updated_at = now
        finding.recommended_action = "not written: not among the fields"

    assert db.rows_update(Finding, changed, FIELDS) == 3

    for n, finding in enumerate(changed):
        stored = Finding.objects.get(pk=finding.pk)
        assert (stored.state, stored.resolved_at, stored.resolution) == ("resolved", now - timedelta(seconds=n),
                                                                         finding.resolution)
        assert stored.last_seen == now and stored.updated_at == now
        assert stored.gpu_id == (gpu.pk if n == 0 else None)
        assert (stored.severity, stored.summary) == ("critical", "ünïcode ✓ and a NUL-free string")
        assert stored.summary_msg is None and stored.xid_policy_version is None
        assert stored.evidence == {"values": {"n": n, "list": [1, 2.5, None, "x"]}, "nested": {"a": {"b": True}}}
        assert stored.recommended_action == "ticket"
    for untouched in (findings[0], findings[4]):
        stored = Finding.objects.get(pk=untouched.pk)
        assert (stored.state, stored.summary, stored.evidence) == ("open", untouched.summary, untouched.evidence)


def test_nothing_to_write_runs_no_statement():
    with CaptureQueriesContext(connection) as queries:
        assert db.rows_update(Finding, [], FIELDS) == 0
    assert len(queries) == 0


@pytest.mark.skipif(connection.vendor != "postgresql", reason="one statement per batch is the PostgreSQL path")
def test_one_statement_per_batch_on_postgresql(monkeypatch):
    findings = _findings(7)
    for finding in findings:
        finding.summary = f"rewritten {finding.pk}"
    with CaptureQueriesContext(connection) as queries:
        assert db.rows_update(Finding, findings, ["summary"]) == 7
    assert len([q for q in queries if q["sql"].startswith("UPDATE")]) == 1
    # Past the statement's parameter budget the rows go in several statements, every one written.
    monkeypatch.setattr(db, "_ROWS_UPDATE_MAX_PARAMS", 6)  # 2 columns (pk, summary): 3 rows per statement
    for finding in findings:
        finding.summary = f"again {finding.pk}"
    with CaptureQueriesContext(connection) as queries:
        assert db.rows_update(Finding, findings, ["summary"]) == 7
    assert len([q for q in queries if q["sql"].startswith("UPDATE")]) == 3
    assert sorted(Finding.objects.values_list("summary", flat=True)) == sorted(f"again {f.pk}" for f in findings)
