"""The pool's concurrency limit under real concurrency: 20 faults decided by 20 threads at once, each in its own
database transaction (as 20 workers would), and never more than the limit of nodes in remediation."""

import threading

import pytest
from django.db import connection

from fleet.health.models import Finding
from fleet.health.services.evaluation import evaluate
from fleet.remediation.choices import ACTIVE_STATES, IncidentState
from fleet.remediation.models import Incident
from fleet.remediation.services.intake import findings_intake
from tests.health.factories import T0
from tests.remediation.helpers import node_in, pool_for, xid

pytestmark = pytest.mark.integration


def _active(pool):
    return Incident.objects.filter(pool=pool, state__in=sorted(ACTIVE_STATES))


@pytest.mark.django_db(transaction=True)
def test_the_limit_holds_under_20_simultaneous_faults(seeded_remediation):
    pool = pool_for("cloud_dedicated", max_concurrent=3)
    nodes = [node_in(pool, gpus=4) for _ in range(40)]  # 20 of 40: not more than half, the breaker stays shut
    for node in nodes[:20]:
        xid(node, at=T0)
    evaluate(node_ids=[n.pk for n in nodes[:20]], now=T0)
    finding_ids = list(Finding.objects.filter(node__in=nodes[:20], state="open").values_list("pk", flat=True))
    assert len(finding_ids) == 20
    errors = []

    def worker(ids):
        try:
            findings_intake(finding_ids=ids, now=T0)
        except Exception as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=([fid],)) for fid in finding_ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert Incident.objects.filter(pool=pool).count() == 20
    assert len(set(_active(pool).values_list("node_id", flat=True))) == 3
    assert Incident.objects.filter(pool=pool, state=IncidentState.QUEUED).count() == 17
