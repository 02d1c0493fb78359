"""The rules every app asks inventory for: a node's baseline, its expected GPU count, a GPU's PCI address key."""

import pytest

from fleet.inventory.choices import BASELINE_STACK_FIELDS, STACK_COLUMNS, STACK_FIELD_LABELS, STACK_FIELDS
from fleet.inventory.models import GPU, Baseline, Node, SoftwareStack
from fleet.inventory.selectors import expected_gpu_count, node_baselines, node_expected_gpu_counts
from fleet_agent import protocol
from tests.factories import BaselineFactory, NodeFactory, PoolFactory


def test_stack_columns_follow_the_protocols_stack_fields():
    assert list(STACK_COLUMNS) == list(protocol.STACK_FIELDS)
    stack_columns = {f.name for f in SoftwareStack._meta.get_fields()}
    baseline_columns = {f.name for f in Baseline._meta.get_fields()}
    assert set(STACK_FIELDS) <= stack_columns
    assert set(BASELINE_STACK_FIELDS) <= baseline_columns
    # What a baseline does not pin is exactly what it has no column for.
    assert {f for f in STACK_FIELDS if f not in BASELINE_STACK_FIELDS} == {"python_version"}
    assert "python_version" not in baseline_columns
    assert STACK_FIELD_LABELS.keys() == set(STACK_FIELDS)


@pytest.mark.django_db
def test_a_nodes_own_baseline_wins_over_its_pools_in_one_query(django_assert_num_queries):
    pool, other_pool = PoolFactory(), PoolFactory()
    pool_baseline = BaselineFactory(pool=pool)
    inherits, own, bare, lone = NodeFactory(pool=pool), NodeFactory(pool=pool), NodeFactory(pool=other_pool), \
        NodeFactory(pool=None)
    own_baseline = BaselineFactory(node=own, pool=None)
    with django_assert_num_queries(1):
        found = node_baselines(nodes=[(n.pk, n.pool_id) for n in (inherits, own, bare, lone)])
    assert found == {inherits.pk: pool_baseline, own.pk: own_baseline}
    rows = node_baselines(nodes=[(inherits.pk, pool.pk), (own.pk, pool.pk)], fields=["name", "gpu_count"])
    assert rows[inherits.pk]["name"] == pool_baseline.name and rows[own.pk]["name"] == own_baseline.name


@pytest.mark.django_db
def test_a_whole_fleets_baselines_are_found_without_naming_every_node(django_assert_num_queries):
    pool = PoolFactory()
    BaselineFactory(pool=pool, name="pool")
    nodes = [NodeFactory(pool=pool) for _ in range(3)]
    BaselineFactory(node=nodes[0], pool=None, name="own")
    pairs = [(n.pk, pool.pk) for n in nodes] + [(100_000 + i, None) for i in range(600)]  # over the IN-list limit
    with django_assert_num_queries(1):
        found = node_baselines(nodes=pairs)
    assert {node_id: b.name for node_id, b in found.items()} == {nodes[0].pk: "own", nodes[1].pk: "pool",
                                                                  nodes[2].pk: "pool"}


@pytest.mark.parametrize(("declared", "baseline", "pool", "expected"), [
    (8, 4, 2, 8), (0, 4, 2, 4), (0, None, 2, 2), (0, None, None, 0), (None, None, None, 0), (0, 0, 2, 2),
])
def test_expected_gpu_count_precedence(declared, baseline, pool, expected):
    assert expected_gpu_count(declared=declared, baseline=baseline, pool=pool) == expected


@pytest.mark.django_db
def test_node_expected_gpu_counts_read_baselines_only_for_nodes_that_declare_none(django_assert_num_queries):
    pool = PoolFactory(gpus_per_node=8)
    BaselineFactory(pool=pool, gpu_count=4)
    other_pool = PoolFactory(gpus_per_node=2)
    declared = NodeFactory(pool=pool, expected_gpu_count=16)
    pinned = NodeFactory(pool=pool, expected_gpu_count=0)
    from_pool = NodeFactory(pool=other_pool, expected_gpu_count=0)
    nodes = list(Node.objects.filter(pk__in=[declared.pk, pinned.pk, from_pool.pk]).select_related("pool"))
    with django_assert_num_queries(1):
        counts = node_expected_gpu_counts(nodes=nodes)
    assert counts == {declared.pk: 16, pinned.pk: 4, from_pool.pk: 2}
    only_declared = list(Node.objects.filter(pk=declared.pk))
    with django_assert_num_queries(0):
        assert node_expected_gpu_counts(nodes=only_declared) == {declared.pk: 16}


@pytest.mark.parametrize("spelling", [
    "00000000:91:00.0", "0000:91:00.0", "PCI:0000:91:00", "pci:0000:91:00.0", "91:00.0", " 0000:91:00.0 ",
])
def test_every_spelling_of_a_pci_address_has_one_key(spelling):
    assert GPU.normalize_bus_id(spelling) == "0000:91:00.0"


@pytest.mark.parametrize(("text", "key"), [
    ("0000:3B:00.1", "0000:3b:00.1"), ("00010000:01:00.0", "10000:01:00.0"), ("", ""), (None, ""),
    ("not-a-bus-id", "not-a-bus-id"), ("PCI:Garbage", "garbage"),
])
def test_pci_address_keys_keep_the_function_and_a_long_domain_and_pass_other_text_through(text, key):
    assert GPU.normalize_bus_id(text) == key
