from datetime import timedelta

import pytest

from fleet.health.routing import route
from fleet.health.services.evaluation import evaluate
from fleet.inventory.models import GPU, BoundaryOverride
from fleet.inventory.selectors import boundary_matrices
from tests.factories import NodeFactory, ProviderFactory

from .factories import T0, EventFactory, healthy_node
from .harness import open_findings, set_status

pytestmark = pytest.mark.django_db


def _route(node, layer, remedy="reboot the machine", **kwargs):
    cells = boundary_matrices(nodes=[node])[node.pk]
    return route(layer=layer, cells=cells, delivery_form=node.delivery_form, provider_name=node.provider.name,
                 remedy=remedy, **kwargs)


def test_hardware_on_a_cloud_instance_is_a_provider_ticket_asking_for_a_replacement():
    node = NodeFactory(delivery_form="cloud_dedicated", provider=ProviderFactory(name="AWS"))
    routing = _route(node, "hardware")
    assert (routing.party, routing.action_kind, routing.source) == ("provider", "provider_ticket", "default")
    assert routing.action == ("AWS owns the hardware of this instance: open a ticket with AWS and attach the "
                              "evidence bundle (first step: reboot the machine). If it repeats, ask for the "
                              "instance to be replaced.")


def test_hardware_on_owned_bare_metal_is_drain_reboot_once_then_rma():
    node = NodeFactory(delivery_form="bare_metal_owned")
    routing = _route(node, "hardware")
    assert (routing.party, routing.action_kind) == ("hardware_vendor", "vendor_rma")
    assert routing.action.startswith("Our hardware, with vendor support: drain the node, then reboot the machine.")
    assert "open an RMA with the hardware vendor" in routing.action


def test_hardware_on_hosted_bare_metal_asks_the_host_for_on_site_inspection():
    node = NodeFactory(delivery_form="bare_metal_hosted", provider=ProviderFactory(name="Equinix Metal"))
    routing = _route(node, "hardware")
    assert routing.party == "provider"
    assert "drain the node, open a ticket with Equinix Metal" in routing.action
    assert "on-site inspection" in routing.action


def test_driver_layer_depends_on_the_delivery_form():
    shared = NodeFactory(delivery_form="cloud_shared", provider=ProviderFactory(name="Alibaba Cloud"))
    dedicated = NodeFactory(delivery_form="cloud_dedicated")
    assert _route(shared, "gpu_driver").party == "provider"
    assert "Alibaba Cloud manages the gpu driver on this node" in _route(shared, "gpu_driver").action
    routing = _route(dedicated, "gpu_driver", remedy="load the driver")
    assert (routing.party, routing.action_kind) == ("us", "internal_fix")
    assert routing.action == "Ours to fix (gpu driver on Cloud, dedicated GPU): load the driver."


def test_a_node_override_moves_the_driver_to_the_providers_image():
    node = NodeFactory(delivery_form="cloud_dedicated")
    BoundaryOverride.objects.create(node=node, layer="gpu_driver", owner="provider", note="provider GPU image")
    routing = _route(node, "gpu_driver")
    assert (routing.party, routing.source) == ("provider", "node")


def test_a_layer_that_does_not_exist_for_the_form_falls_to_the_layer_below():
    node = NodeFactory(delivery_form="bare_metal_owned")
    routing = _route(node, "virtualization")
    assert (routing.layer, routing.party) == ("hardware", "hardware_vendor")


def test_shared_ownership_is_a_joint_investigation():
    provider = ProviderFactory(name="GPU Cloud Co")
    node = NodeFactory(delivery_form="cloud_dedicated", provider=provider)
    BoundaryOverride.objects.create(provider=provider, layer="host_os", owner="shared")
    routing = _route(node, "host_os", remedy="check the NIC")
    assert (routing.party, routing.action_kind) == ("shared", "joint_investigation")
    assert "Open a ticket with GPU Cloud Co in parallel" in routing.action


def test_a_provider_initiated_event_never_asks_for_a_ticket():
    node = NodeFactory(delivery_form="cloud_dedicated", provider=ProviderFactory(name="GCP"))
    routing = _route(node, "virtualization", remedy="checkpoint now", provider_initiated=True)
    assert (routing.party, routing.action_kind) == ("provider", "internal_fix")
    assert routing.action == "GCP initiated this on purpose (virtualization); no ticket is needed. Checkpoint now."


def test_the_same_fault_routes_differently_on_cloud_and_owned_bare_metal_end_to_end():
    cloud = healthy_node(delivery_form="cloud_dedicated")
    owned = healthy_node(delivery_form="bare_metal_owned")
    for node in (cloud, owned):
        EventFactory(node=node, kind="gpu_lost", code=None, at=T0, gpu=GPU.objects.get(node=node, index=1))
        set_status(node, lost_gpus=[GPU.objects.get(node=node, index=1).pci_bus_id])
    evaluate(now=T0 + timedelta(seconds=2))
    on_cloud, on_owned = open_findings("gpu_lost", cloud).get(), open_findings("gpu_lost", owned).get()
    assert on_cloud.layer == on_owned.layer == "hardware"
    assert (on_cloud.responsible_party, on_cloud.action_kind) == ("provider", "provider_ticket")
    assert (on_owned.responsible_party, on_owned.action_kind) == ("hardware_vendor", "vendor_rma")
    assert on_cloud.recommended_action != on_owned.recommended_action
    assert on_cloud.evidence["routing"]["party"] == "provider"


def test_routing_follows_a_boundary_change_on_the_next_cycle():
    node = healthy_node(delivery_form="cloud_dedicated")
    set_status(node, nvml_status="driver_not_loaded")
    evaluate(now=T0)
    evaluate(now=T0 + timedelta(seconds=30))
    assert open_findings("nvml_unavailable", node).get().responsible_party == "us"
    BoundaryOverride.objects.create(node=node, layer="gpu_driver", owner="provider")
    evaluate(now=T0 + timedelta(seconds=45))
    finding = open_findings("nvml_unavailable", node).get()
    assert (finding.responsible_party, finding.responsibility_source) == ("provider", "node")
