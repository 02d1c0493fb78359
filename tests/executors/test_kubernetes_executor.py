"""The `kubernetes` executor through the official client, against a small local server that speaks the few API
endpoints it uses (tests/kube_api.py; no API server can run here): cordon + taint in one merge patch, drain by
evictions that wait out PodDisruptionBudgets and leave DaemonSet and static pods, return removes only our taint."""

import pytest

from fleet.executors import interface as steps
from fleet.executors.backends.kubernetes import KubernetesExecutor
from fleet.executors.services.executor_configs import executor_config_save
from tests.factories import NodeFactory, PoolFactory, UserFactory
from tests.kube_api import FakeKubeAPI, pod

pytestmark = pytest.mark.django_db
TOKEN = "sa-token-for-tests"


@pytest.fixture
def cluster():
    api = FakeKubeAPI(TOKEN)
    api.add_node("gpu-node-3")
    api.pods += [pod("train-0", "gpu-node-3"), pod("train-1", "gpu-node-3", namespace="ml"),
                 pod("dcgm-exporter", "gpu-node-3", daemonset=True), pod("kube-proxy", "gpu-node-3", mirror=True),
                 pod("elsewhere", "gpu-node-9")]
    yield api
    api.close()


@pytest.fixture
def node(cluster):
    pool = PoolFactory()
    executor_config_save(actor=UserFactory(role="admin"), pool=pool, executor="kubernetes", secret=TOKEN,
                         settings={"api_url": cluster.url, "eviction_retry_s": 5})
    return NodeFactory(pool=pool, hostname="host-17", labels={"kubernetes-node": "gpu-node-3"})


def ctx(node, kind, step=0):
    return steps.StepContext(incident_id=2, incident_key="INC-2", node_id=node.pk, step_index=step, attempt=1,
                             kind=kind, params={}, dry_run=False, idempotency_key=f"INC-2:{step}:1",
                             facts={"title": "Xid 79: GPU has fallen off the bus"})


def test_cordon_taints_drain_respects_budgets_and_return_untaints(cluster, node):
    executor = KubernetesExecutor()
    assert steps.executor_named("kubernetes") is not None

    cordoned = executor.start(ctx(node, "cordon"))
    assert cordoned.status == "done", cordoned.message
    state = cluster.node("gpu-node-3")
    assert state["spec"]["unschedulable"] is True
    assert {"key": "fleet.io/unhealthy", "value": "Xid-79-GPU-has-fallen-off-the-bus", "effect": "NoSchedule"} \
        in state["spec"]["taints"]
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in state["spec"]["taints"]
    assert all(ctype == "application/merge-patch+json" for method, _, ctype in cluster.calls if method == "PATCH")

    cluster.pdb_blocked.add("ml/train-1")
    draining = executor.start(ctx(node, "drain", 1))
    assert (draining.status, draining.waiting_on) == ("waiting", "executor"), draining.message
    assert draining.output["evicted"] == ["default/train-0"]
    assert draining.output["blocked_by_pdb"] == ["ml/train-1"]
    assert sorted(draining.output["left_alone"]) == ["default/dcgm-exporter", "default/kube-proxy"]
    assert "PodDisruptionBudget" in draining.message
    cluster.pdb_blocked.clear()  # the budget allows it now
    evicting = executor.poll(ctx(node, "drain", 1))
    assert evicting.status == "waiting" and evicting.output["evicted"] == ["ml/train-1"]
    drained = executor.poll(ctx(node, "drain", 1))  # done only once a fresh listing shows no evictable pod
    assert drained.status == "done", drained.message
    assert [p["metadata"]["name"] for p in cluster.pods] == ["dcgm-exporter", "kube-proxy", "elsewhere"]

    back = executor.start(ctx(node, "return_to_service", 2))
    assert back.status == "done"
    state = cluster.node("gpu-node-3")
    assert not state["spec"].get("unschedulable")
    assert state["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]


def test_errors_are_named(cluster, node):
    unknown = NodeFactory(pool=node.pool, hostname="not-a-k8s-node")
    missing = KubernetesExecutor().start(ctx(unknown, "cordon"))
    assert missing.status == "failed" and "not-a-k8s-node: not found" in missing.message
    cluster.token = "rotated"
    refused = KubernetesExecutor().start(ctx(node, "cordon"))
    assert refused.status == "failed" and "refused the token (401" in refused.message
    assert KubernetesExecutor().start(ctx(NodeFactory(pool=PoolFactory()), "drain")).waiting_on == "operator"
