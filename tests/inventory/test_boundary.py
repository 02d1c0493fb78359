import pytest

from fleet.inventory.boundary import DEFAULT_MATRIX
from fleet.inventory.choices import DeliveryForm, Layer, Owner
from fleet.inventory.models import BoundaryOverride
from fleet.inventory.selectors import boundary_matrices, node_boundary
from tests.factories import NodeFactory, ProviderFactory

pytestmark = pytest.mark.django_db


def _cells(node):
    return {c.layer: c for c in node_boundary(node=node)}


@pytest.mark.parametrize(
    ("form", "layer", "owner"),
    [
        (DeliveryForm.CLOUD_SHARED, Layer.HOST_OS, Owner.PROVIDER),
        (DeliveryForm.CLOUD_SHARED, Layer.GPU_DRIVER, Owner.PROVIDER),
        (DeliveryForm.CLOUD_DEDICATED, Layer.HARDWARE, Owner.PROVIDER),
        (DeliveryForm.CLOUD_DEDICATED, Layer.HOST_OS, Owner.US),
        (DeliveryForm.BARE_METAL_HOSTED, Layer.VIRTUALIZATION, Owner.NOT_APPLICABLE),
        (DeliveryForm.BARE_METAL_HOSTED, Layer.HARDWARE, Owner.PROVIDER),
        (DeliveryForm.BARE_METAL_OWNED, Layer.HARDWARE, Owner.HARDWARE_VENDOR),
        (DeliveryForm.BARE_METAL_OWNED, Layer.GPU_DRIVER, Owner.US),
        (DeliveryForm.CLOUD_SHARED, Layer.APPLICATION, Owner.US),
    ],
)
def test_default_matrix_follows_design(form, layer, owner):
    node = NodeFactory(delivery_form=form)
    cell = _cells(node)[layer]
    assert cell.owner == owner
    assert cell.source == "default"


def test_matrix_covers_every_layer_and_form():
    for layer in Layer:
        assert set(DEFAULT_MATRIX[layer]) == set(DeliveryForm)


def test_boundary_is_ordered_top_layer_first():
    node = NodeFactory()
    layers = [c.layer for c in node_boundary(node=node)]
    assert layers[0] == Layer.APPLICATION
    assert layers[-1] == Layer.FACILITY
    assert len(layers) == len(Layer)


def test_provider_override_applies_to_its_nodes_only():
    colo = ProviderFactory(kind="own", cloud="")
    node = NodeFactory(provider=colo, delivery_form=DeliveryForm.BARE_METAL_OWNED)
    other = NodeFactory(delivery_form=DeliveryForm.BARE_METAL_OWNED)
    BoundaryOverride.objects.create(provider=colo, layer=Layer.FACILITY, owner=Owner.US, note="our own DC")

    assert _cells(node)[Layer.FACILITY].owner == Owner.US
    assert _cells(node)[Layer.FACILITY].source == "provider"
    assert _cells(node)[Layer.FACILITY].note == "our own DC"
    assert _cells(other)[Layer.FACILITY].owner == Owner.PROVIDER


def test_form_specific_provider_override_beats_provider_wide():
    provider = ProviderFactory()
    node = NodeFactory(provider=provider, delivery_form=DeliveryForm.CLOUD_DEDICATED)
    BoundaryOverride.objects.create(provider=provider, layer=Layer.HOST_OS, owner=Owner.SHARED)
    BoundaryOverride.objects.create(provider=provider, delivery_form=DeliveryForm.CLOUD_DEDICATED,
                                    layer=Layer.HOST_OS, owner=Owner.PROVIDER)
    assert _cells(node)[Layer.HOST_OS].owner == Owner.PROVIDER


def test_node_override_beats_provider_override():
    provider = ProviderFactory()
    node = NodeFactory(provider=provider, delivery_form=DeliveryForm.CLOUD_DEDICATED)
    BoundaryOverride.objects.create(provider=provider, layer=Layer.GPU_DRIVER, owner=Owner.US)
    BoundaryOverride.objects.create(node=node, layer=Layer.GPU_DRIVER, owner=Owner.PROVIDER,
                                    note="driver comes with the provider's GPU image")
    cell = _cells(node)[Layer.GPU_DRIVER]
    assert (cell.owner, cell.source) == (Owner.PROVIDER, "node")


def test_many_nodes_in_constant_queries(django_assert_max_num_queries):
    nodes = NodeFactory.create_batch(20)
    BoundaryOverride.objects.create(node=nodes[3], layer=Layer.HOST_OS, owner=Owner.PROVIDER)
    with django_assert_max_num_queries(1):
        matrices = boundary_matrices(nodes=nodes)
    assert matrices[nodes[3].pk][Layer.HOST_OS].owner == Owner.PROVIDER
    assert matrices[nodes[4].pk][Layer.HOST_OS].owner == Owner.US


def test_boundary_endpoint(viewer_api):
    node = NodeFactory(delivery_form=DeliveryForm.BARE_METAL_OWNED)
    response = viewer_api.get(f"/api/v1/nodes/{node.pk}/boundary/")
    assert response.status_code == 200
    by_layer = {c["layer"]: c for c in response.json()}
    assert by_layer["hardware"] == {"layer": "hardware", "owner": "hardware_vendor", "source": "default", "note": ""}


def test_override_api_rejects_both_scopes(operator_api):
    node = NodeFactory()
    response = operator_api.post("/api/v1/boundary-overrides/", {
        "provider": node.provider_id, "node": node.pk, "layer": "hardware", "owner": "us"}, format="json")
    assert response.status_code == 400
    assert "provider" in response.json()["error"]["fields"]
    assert BoundaryOverride.objects.count() == 0


def test_override_api_rejects_duplicate_cell(operator_api):
    node = NodeFactory()
    body = {"node": node.pk, "layer": "hardware", "owner": "us"}
    assert operator_api.post("/api/v1/boundary-overrides/", body, format="json").status_code == 201
    response = operator_api.post("/api/v1/boundary-overrides/", body, format="json")
    assert response.status_code == 400
    assert "layer" in response.json()["error"]["fields"]
