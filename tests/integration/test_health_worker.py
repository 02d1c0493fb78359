"""A real Celery worker evaluates a node after an urgent event, as ingestion triggers it."""

import time

import pytest
from django.utils import timezone

from fleet.health.models import Finding
from fleet.health.tasks import evaluate_nodes
from fleet.inventory.models import GPU
from tests.health.factories import EventFactory, healthy_node
from tests.processes import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("seeded_catalog")]


def test_worker_opens_the_finding_after_an_urgent_event(celery_worker):
    now = timezone.now()
    node = healthy_node(delivery_form="bare_metal_owned", at=now)
    gpu = GPU.objects.get(node=node, index=4)
    EventFactory(node=node, gpu=gpu, kind="xid", code=79, at=now,
                 raw="NVRM: Xid (PCI:0000:1c:00): 79, pid=<unknown>, name=<unknown>, GPU has fallen off the bus.")

    started = time.monotonic()
    evaluate_nodes.delay(node_ids=[node.pk])
    finding = wait_for(lambda: Finding.objects.filter(node=node, rule__slug="xid", state="open").first(),
                       what=f"an open xid finding (worker log: {celery_worker.log_path})")
    assert time.monotonic() - started < 30
    assert (finding.step, finding.layer, finding.responsible_party) == ("platform_hardware", "hardware",
                                                                         "hardware_vendor")
    assert finding.gpu_id == gpu.pk
    assert "health.evaluate_nodes" in celery_worker.log_path.read_text()
