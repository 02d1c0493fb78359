"""The node-status part of the cycle's facts: the fabric digest that many nodes share is read once per distinct
digest, and the `system` section is read whole and cut down to what the host rules read. Each node must still
get exactly its own values, however many others share them and however the row was last written."""

import pytest
from django.db import connection

from fleet.health.services.facts import FactWindows, facts_load
from fleet.telemetry.models import NodeStatus
from fleet.telemetry.services.fabric import fabric_digest

from .factories import T0, bus_id, healthy_node
from .harness import set_status

pytestmark = pytest.mark.django_db

WINDOWS = FactWindows(events_s=3600, history_s=86400)


def _digest(*, down_link: int | None = None) -> dict:
    gpus = [{"index": i, "uuid": f"GPU-{i}", "name": "NVIDIA H100 80GB HBM3", "pci_bus_id": bus_id(i),
             "persistence_mode": True, "nvlink": [1] * 18, "nvlink_errors": []} for i in range(8)]
    if down_link is not None:
        gpus[0]["nvlink"][down_link] = 0
    return fabric_digest({"gpus": gpus, "fabric": {"pci": {"gpus": [], "nvswitches": 4},
                                                   "fabric_manager": {"installed": True, "running": True}}})


def _facts(nodes) -> dict:
    return facts_load(node_ids=[n.pk for n in nodes], now=T0, windows=WINDOWS, gpu_filter=None)


def test_every_node_gets_its_own_fabric_digest_when_most_share_one():
    healthy, faulty = _digest(), _digest(down_link=3)
    assert healthy != faulty
    nodes = [healthy_node(gpus=1) for _ in range(6)]
    for node in nodes:
        set_status(node, fabric=healthy)
    set_status(nodes[2], fabric=faulty)
    set_status(nodes[4], fabric={})  # an agent older than the fabric checks

    facts = _facts(nodes)

    expected = {n.pk: healthy for n in nodes} | {nodes[2].pk: faulty, nodes[4].pk: {}}
    assert {node_id: f.status["fabric"] for node_id, f in facts.items()} == expected
    assert all("fabric_key" not in f.status and "fabric_text" not in f.status for f in facts.values())


def test_the_content_key_follows_every_write_of_the_digest():
    """The key is computed by the database from the digest, so an update through any path moves it (a stale key
    would hand one node another's digest)."""
    first, second = healthy_node(gpus=1), healthy_node(gpus=1)
    set_status(first, fabric=_digest())
    set_status(second, fabric=_digest())
    keys = dict(NodeStatus.objects.values_list("node_id", "fabric_key"))
    if connection.vendor == "postgresql":
        assert keys[first.pk] == keys[second.pk] and len(keys[first.pk]) == 64
    else:
        assert keys == {first.pk: None, second.pk: None}  # no hash function in SQLite: every row read on its own

    status = NodeStatus.objects.get(node=second)
    status.fabric = _digest(down_link=7)
    status.save()

    keys = dict(NodeStatus.objects.values_list("node_id", "fabric_key"))
    if connection.vendor == "postgresql":
        assert keys[first.pk] != keys[second.pk]
    facts = _facts([first, second])
    assert facts[first.pk].status["fabric"] == _digest()
    assert facts[second.pk].status["fabric"] == _digest(down_link=7)


def test_the_host_rules_part_of_the_system_section():
    reporting, silent_on_oom = healthy_node(gpus=1), healthy_node(gpus=1)
    set_status(reporting, system={
        "swap_in_pages_per_s": 120, "swap_out_pages_per_s": "80.5", "swap_total_bytes": 8 << 30,
        "swap_free_bytes": True,  # not a number, whatever JSON calls it
        "oom_kills": 2, "oom_kill_last_at": "2026-12-02T11:58:00Z",
        "pressure": {"memory": {"some_avg10": 12.5, "full_avg10": 3.0}, "io": {"some_avg10": 1.0}},
        "volumes": [{"mount": "/", "used_pct": 97.0, "read_only": False}], "peermem": {"loaded": True},
        "clock": None, "disks": {"nvme0n1": {"await_ms": 1.2}},
    })
    set_status(silent_on_oom, system={"pressure": "not an object", "gpu_d_state": []})

    facts = _facts([reporting, silent_on_oom])

    status = NodeStatus.objects.get(node=reporting)
    assert facts[reporting.pk].status["system"] == _memory(reporting) | {
        "swap_in_pages_per_s": 120, "swap_out_pages_per_s": 80.5, "swap_total_bytes": 8 << 30,
        "swap_free_bytes": None, "oom_kills": 2, "oom_kill_last_at": "2026-12-02T11:58:00Z",
        "pressure": {"memory": {"some_avg10": 12.5, "full_avg10": 3.0}},
        "volumes": [{"mount": "/", "used_pct": 97.0, "read_only": False}], "peermem": {"loaded": True}}
    # The report's time is read only for a node that reported an OOM kill (the rule measures the kill's age).
    assert facts[reporting.pk].status["collected_at_oom"] == status.collected_at
    assert facts[silent_on_oom.pk].status["system"] == _memory(silent_on_oom) | {"gpu_d_state": []}
    assert facts[silent_on_oom.pk].status["collected_at_oom"] is None


def _memory(node) -> dict:
    """The node-level columns the host rules read beside the section."""
    status = NodeStatus.objects.get(node=node)
    return {"mem_total_bytes": status.mem_total_bytes, "mem_available_bytes": status.mem_available_bytes,
            "cpu_busy_pct": status.cpu_busy_pct}
