import pytest

from fleet.health.selectors import findings_by_severity
from fleet.health.services.evaluation import evaluate
from fleet.inventory.models import GPU

from .factories import T0, EventFactory, healthy_node

pytestmark = pytest.mark.django_db


def test_findings_by_severity_counts_open_findings_only():
    assert findings_by_severity() == {"critical": 0, "warning": 0, "info": 0}
    node = healthy_node()
    EventFactory(node=node, kind="xid", code=79, at=T0, gpu=GPU.objects.get(node=node, index=0))
    EventFactory(node=node, kind="xid", code=13, at=T0, gpu=GPU.objects.get(node=node, index=1))
    evaluate(now=T0)
    assert findings_by_severity() == {"critical": 1, "warning": 1, "info": 0}
    node.state = "retired"
    node.save(update_fields=["state"])
    evaluate(now=T0)
    assert findings_by_severity() == {"critical": 0, "warning": 0, "info": 0}
