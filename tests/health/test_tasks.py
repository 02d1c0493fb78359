import pytest
from django.utils import timezone

from config.celery_app import app
from fleet.health.tasks import evaluate_fleet, evaluate_nodes
from fleet.inventory.models import GPU

from .factories import EventFactory, healthy_node
from .harness import open_findings

pytestmark = pytest.mark.django_db


def test_task_names_match_the_beat_schedule_and_the_ingestion_contract():
    from django.conf import settings

    assert settings.CELERY_BEAT_SCHEDULE["health-evaluate-fleet"]["task"] == "health.evaluate_fleet"
    assert {"health.evaluate_fleet", "health.evaluate_nodes"} <= set(app.tasks)
    registered = app.tasks["health.evaluate_nodes"]
    assert registered.name == evaluate_nodes.name
    assert (registered.soft_time_limit, registered.time_limit, registered.max_retries) == (60, 90, 3)


def test_evaluate_nodes_runs_the_service_for_those_nodes():
    node, other = healthy_node(at=timezone.now()), healthy_node(at=timezone.now())
    for target in (node, other):
        EventFactory(node=target, kind="xid", code=79, at=timezone.now(), gpu=GPU.objects.get(node=target, index=0))
    result = evaluate_nodes.apply(kwargs={"node_ids": [node.pk]}).get()
    assert (result["nodes"], result["opened"], result["skipped"]) == (1, 1, False)
    assert result["opened_ids"] == [open_findings("xid", node).get().pk]
    assert not open_findings("xid", other).exists()


def test_evaluate_fleet_covers_every_node():
    nodes = [healthy_node(at=timezone.now()) for _ in range(3)]
    result = evaluate_fleet.apply().get()
    assert result["nodes"] == 3
    assert result["queries"] > 0
    assert all(not open_findings("xid", n).exists() for n in nodes)
