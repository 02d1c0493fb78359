"""Reserved terms: the hourly check renews what renews itself and notes what is about to run out."""

from datetime import date, timedelta

import pytest
from django.utils import timezone

from fleet.billing.models import BillingPlan
from fleet.billing.selectors import expiring_reserved_terms
from fleet.billing.services import check_reserved_terms as check_service
from fleet.billing.tasks import check_reserved_terms
from fleet.core.models import AuditEntry
from tests.billing.factories import ReservedPlanFactory
from tests.factories import NodeFactory, PoolFactory

pytestmark = pytest.mark.django_db


def test_expiring_terms_list_the_nodes_they_price():
    now = timezone.now()
    today = timezone.localdate(now)
    soon = ReservedPlanFactory(term_start=today - timedelta(days=300), term_end=today + timedelta(days=20))
    members = [NodeFactory(pool=soon.pool, billing_mode="reserved") for _ in range(2)]
    NodeFactory(pool=soon.pool, billing_mode="spot")  # not priced by a reserved plan
    NodeFactory(pool=soon.pool, billing_mode="reserved", state="retired")
    own = NodeFactory(pool=soon.pool, billing_mode="reserved")
    ReservedPlanFactory(pool=None, node=own, term_start=today - timedelta(days=10),
                        term_end=today + timedelta(days=355))
    ReservedPlanFactory(term_start=today - timedelta(days=300), term_end=today + timedelta(days=10), auto_renew=True)
    ReservedPlanFactory(term_start=today - timedelta(days=300), term_end=today + timedelta(days=40))
    ReservedPlanFactory(term_start=today - timedelta(days=365), term_end=today)  # already over

    (term,) = expiring_reserved_terms(now=now)

    assert (term.plan_id, term.days_left, term.scope) == (soon.pk, 20, "pool")
    assert term.node_ids == sorted(n.pk for n in members)
    assert len(expiring_reserved_terms(now=now, include_auto_renew=True)) == 2
    assert len(expiring_reserved_terms(now=now, within_days=45)) == 2


def test_task_stamps_expiring_terms_and_renews_ended_auto_renewing_ones():
    today = timezone.localdate()
    expiring = ReservedPlanFactory(term_start=today - timedelta(days=300), term_end=today + timedelta(days=5))
    renewing = ReservedPlanFactory(term_start=date(2020, 3, 1), term_end=date(2021, 3, 1), auto_renew=True,
                                   pool=PoolFactory(billing_mode="reserved"))

    result = check_reserved_terms()

    assert result["expiring"] == [expiring.pk]
    assert result["renewed"] == [renewing.pk]
    expiring.refresh_from_db()
    assert expiring.expiry_noticed_at is not None
    renewing.refresh_from_db()
    # Rolled forward a year at a time until the term covers today.
    assert renewing.term_start <= today < renewing.term_end
    assert (renewing.term_end.month, renewing.term_end.day) == (3, 1)
    assert renewing.term_end.year - renewing.term_start.year == 1
    entry = AuditEntry.objects.get(object_type="billing.billingplan", object_id=str(renewing.pk), action="update")
    assert entry.before == {"term_start": "2020-03-01", "term_end": "2021-03-01"}

    # A term extended out of the window loses its stamp, so a later expiry is noticed afresh.
    stamp = expiring.expiry_noticed_at
    assert check_service(now=timezone.now())["expiring"] == [expiring.pk]
    assert BillingPlan.objects.get(pk=expiring.pk).expiry_noticed_at == stamp
    BillingPlan.objects.filter(pk=expiring.pk).update(term_end=today + timedelta(days=400))
    check_service(now=timezone.now())
    assert BillingPlan.objects.get(pk=expiring.pk).expiry_noticed_at is None
