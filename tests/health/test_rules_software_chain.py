from datetime import timedelta

import pytest

from fleet.health.models import Rule
from fleet.health.rules.compat import arch_supported, parse_cuda
from fleet.health.services.evaluation import evaluate
from fleet.inventory.models import GPU, SoftwareStack
from tests.factories import BaselineFactory, PoolFactory

from .factories import T0, healthy_node
from .harness import lifecycle, open_findings

pytestmark = pytest.mark.django_db

TORCH_124 = [{"name": "torch", "version": "2.4.0", "cuda": "12.4", "arch_list": ["sm_80", "sm_90"]}]
TORCH_121 = [{"name": "torch", "version": "2.4.0", "cuda": "12.1", "arch_list": ["sm_80", "sm_90"]}]


def _stack(node, **fields):
    SoftwareStack.objects.filter(pk=node.current_stack_id).update(**fields)


def test_framework_built_for_newer_cuda_than_the_driver():
    node = healthy_node(delivery_form="cloud_shared")

    def fault(at):
        _stack(node, driver_version="535.54.03", cuda_driver_version="12.2", frameworks=TORCH_124,
               cuda_toolkits=["12.2"])

    def clear(at):
        _stack(node, frameworks=TORCH_121)

    result = lifecycle("cuda_driver_too_old", node, fault=fault, clear=clear)
    finding = result.opened
    assert (finding.step, finding.layer, finding.responsible_party) == ("software_chain", "framework", "us")
    assert finding.summary == "driver 535.54.03 supports CUDA ≤ 12.2, torch 2.4.0 was built for CUDA 12.4"
    assert finding.evidence["values"]["driver_max_cuda"] == "12.2"
    assert "install a torch build for CUDA ≤ 12.2" in finding.recommended_action


def test_minor_version_compatibility_is_a_parameter():
    node = healthy_node()
    _stack(node, driver_version="535.54.03", cuda_driver_version="12.2", frameworks=TORCH_124)
    Rule.objects.filter(slug="cuda_driver_too_old").update(params={"allow_minor_version_compat": True})
    evaluate(now=T0)
    assert not open_findings("cuda_driver_too_old", node).exists()
    _stack(node, cuda_driver_version="11.8")
    evaluate(now=T0 + timedelta(seconds=15))
    assert open_findings("cuda_driver_too_old", node).exists(), "a newer major version never runs"


def test_gpu_architecture_missing_from_the_arch_list():
    node = healthy_node(delivery_form="bare_metal_owned")

    def fault(at):
        GPU.objects.filter(node=node).update(compute_capability="10.0", model="NVIDIA B200")

    def clear(at):
        _stack(node, frameworks=[{**TORCH_124[0], "arch_list": ["sm_90", "sm_100"]}])

    result = lifecycle("arch_not_supported", node, fault=fault, clear=clear)
    finding = result.opened
    assert (finding.step, finding.layer, finding.responsible_party) == ("software_chain", "framework", "us")
    assert "torch 2.4.0 has no kernel image for sm_100" in finding.summary
    assert "no kernel image is available for execution on the device" in finding.summary
    assert finding.evidence["values"]["problems"][0]["gpus"] == 8


@pytest.mark.parametrize(("arch_list", "capability", "supported"), [
    (["sm_80", "sm_90"], (9, 0), True),
    (["sm_80", "sm_86"], (8, 9), True),          # same major, newer minor runs the sm_86 cubin
    (["sm_80", "sm_86"], (9, 0), False),         # no cubin for Hopper and no PTX
    (["sm_80", "compute_80"], (9, 0), True),     # PTX for 8.0 JIT-compiles on 9.0
    (["sm_90", "compute_90"], (8, 0), False),    # PTX never runs on an older GPU
    (["sm_90a"], (9, 0), True),
    (["sm_90a"], (10, 0), False),                # arch-specific targets are not forward compatible
    (["8.0", "9.0+PTX"], (10, 0), True),         # TORCH_CUDA_ARCH_LIST spelling
    ([], (9, 0), None),
])
def test_arch_compatibility(arch_list, capability, supported):
    assert arch_supported(arch_list, capability) is supported


@pytest.mark.parametrize(("value", "parsed"), [("12.2", (12, 2)), ("12.4.1", (12, 4)), (12020, (12, 2)),
                                               ("12040", (12, 4)), ("", None), (None, None), ("n/a", None)])
def test_cuda_version_parsing(value, parsed):
    assert parse_cuda(value) == parsed


def test_stack_drift_from_the_pool_baseline_sits_on_the_lowest_drifted_layer():
    pool = PoolFactory()
    BaselineFactory(pool=pool, driver_version="550.54.15", cuda_driver_version="12.4",
                    frameworks=[{"name": "torch", "version": "2.4.0", "cuda": "12.4"}])
    node = healthy_node(pool=pool, delivery_form="cloud_dedicated")

    def fault(at):
        _stack(node, driver_version="560.35.03", cuda_driver_version="12.6",
               frameworks=[{**TORCH_124[0], "version": "2.5.1"}])

    def clear(at):
        _stack(node, driver_version="550.54.15", cuda_driver_version="12.4", frameworks=TORCH_124)

    result = lifecycle("stack_drift", node, fault=fault, clear=clear)
    finding = result.opened
    assert (finding.step, finding.layer, finding.responsible_party) == ("software_chain", "gpu_driver", "us")
    assert "driver_version 560.35.03 (pinned 550.54.15)" in finding.summary
    assert "frameworks.torch.version 2.5.1 (pinned 2.4.0)" in finding.summary
    assert {d["field"] for d in finding.evidence["values"]["drift"]} == {
        "driver_version", "cuda_driver_version", "frameworks.torch.version"}


def test_stack_drift_can_ignore_fields_and_uses_the_framework_layer_then():
    pool = PoolFactory()
    BaselineFactory(pool=pool, driver_version="550.54.15", cuda_driver_version="12.4",
                    frameworks=[{"name": "torch", "version": "2.4.0"}])
    node = healthy_node(pool=pool)
    _stack(node, driver_version="560.35.03", frameworks=[{**TORCH_124[0], "version": "2.5.1"}])
    Rule.objects.filter(slug="stack_drift").update(params={"ignore_fields": ["driver_version"]})
    evaluate(now=T0)
    finding = open_findings("stack_drift", node).get()
    assert finding.layer == "framework"
    assert "driver_version" not in finding.summary


def test_node_baseline_wins_over_the_pool_baseline():
    pool = PoolFactory()
    BaselineFactory(pool=pool, driver_version="535.54.03")
    node = healthy_node(pool=pool)
    BaselineFactory(pool=None, node=node, driver_version="550.54.15", cuda_driver_version="12.4")
    evaluate(now=T0)
    assert not open_findings("stack_drift", node).exists()
