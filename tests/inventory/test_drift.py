import pytest

from fleet.inventory.selectors import baseline_drift, node_drift, stack_drift
from tests.factories import BaselineFactory, GPUFactory, NodeFactory, PoolFactory, SoftwareStackFactory

pytestmark = pytest.mark.django_db


def _node_with_stack(pool=None, **stack):
    node = NodeFactory(pool=pool)
    node.current_stack = SoftwareStackFactory(node=node, **stack)
    node.save()
    return node


def test_no_drift_when_stack_matches():
    pool = PoolFactory()
    BaselineFactory(pool=pool, frameworks=[{"name": "torch", "version": "2.4.0", "cuda": "12.4"}])
    node = _node_with_stack(pool)
    result = node_drift(node=node)
    assert result["drifted"] is False
    assert result["drift"] == []


def test_driver_upgrade_is_reported_field_by_field():
    pool = PoolFactory()
    BaselineFactory(pool=pool, kernel="5.15.0-105-generic")
    node = _node_with_stack(pool, driver_version="560.28.03", cuda_driver_version="12.6")
    drift = {d["field"]: d for d in node_drift(node=node)["drift"]}
    assert drift["driver_version"] == {"field": "driver_version", "expected": "550.54.15", "actual": "560.28.03"}
    assert drift["cuda_driver_version"]["actual"] == "12.6"
    assert "kernel" not in drift


def test_blank_baseline_fields_are_not_pinned():
    pool = PoolFactory()
    BaselineFactory(pool=pool, driver_version="", cuda_driver_version="")
    node = _node_with_stack(pool, driver_version="999.1")
    assert node_drift(node=node)["drift"] == []


def test_framework_version_and_cuda_build_drift():
    pool = PoolFactory()
    BaselineFactory(pool=pool, frameworks=[{"name": "torch", "version": "2.4.0", "cuda": "12.4"}])
    node = _node_with_stack(pool, frameworks=[{"name": "torch", "version": "2.5.1", "cuda": "12.6"}])
    fields = {d["field"] for d in node_drift(node=node)["drift"]}
    assert fields == {"frameworks.torch.version", "frameworks.torch.cuda"}


def test_missing_stack_drifts_on_every_pinned_field():
    pool = PoolFactory()
    baseline = BaselineFactory(pool=pool)
    node = NodeFactory(pool=pool)
    drift = stack_drift(stack=node.current_stack, baseline=baseline)
    assert {d["field"] for d in drift} == {"driver_version", "cuda_driver_version"}
    assert all(d["actual"] is None for d in drift)


def test_node_baseline_takes_precedence_over_pool():
    pool = PoolFactory()
    BaselineFactory(pool=pool, driver_version="550.54.15")
    node = _node_with_stack(pool, driver_version="560.28.03")
    BaselineFactory(node=node, driver_version="560.28.03", cuda_driver_version="12.4")
    result = node_drift(node=node)
    assert result["baseline"].node_id == node.pk
    assert result["drift"] == []


def test_gpu_count_model_and_memory_drift():
    pool = PoolFactory()
    baseline = BaselineFactory(pool=pool, gpu_count=8, gpu_model="NVIDIA H100 80GB HBM3",
                               gpu_memory_bytes=85520809984)
    node = _node_with_stack(pool)
    for i in range(7):
        GPUFactory(node=node, index=i)
    GPUFactory(node=node, index=7, model="NVIDIA A100-SXM4-40GB", memory_total_bytes=42949672960)
    GPUFactory(node=node, index=8, present=False)
    fields = {d["field"] for d in node_drift(node=node)["drift"]}
    assert "gpu_count" not in fields  # the absent GPU does not count; 8 present
    assert {"gpus[7].model", "gpus[7].memory_total_bytes"} <= fields
    assert baseline_drift(baseline=baseline)[0]["hostname"] == node.hostname


def test_baseline_drift_endpoint_lists_only_drifted_nodes(viewer_api):
    pool = PoolFactory()
    baseline = BaselineFactory(pool=pool)
    good = _node_with_stack(pool)
    bad = _node_with_stack(pool, driver_version="535.54.03")
    response = viewer_api.get(f"/api/v1/baselines/{baseline.pk}/drift/")
    assert response.status_code == 200
    hostnames = [row["hostname"] for row in response.json()]
    assert hostnames == [bad.hostname]
    assert good.hostname not in hostnames

    response = viewer_api.get(f"/api/v1/nodes/{bad.pk}/drift/")
    assert response.json()["drifted"] is True
    assert response.json()["drift"][0]["field"] == "driver_version"
