"""The writes the console's edit forms make on providers, sites, baselines and boundary overrides: operators
edit and delete (audited), viewers are refused and change nothing, and refusals name the field."""

import pytest

from fleet.core.models import AuditEntry
from fleet.inventory.models import Baseline, BoundaryOverride, Provider, Site
from tests.factories import BaselineFactory, NodeFactory, PoolFactory, ProviderFactory, SiteFactory

pytestmark = pytest.mark.django_db


def _objects():
    provider = ProviderFactory(name="IDC One", slug="idc-one", kind="idc", cloud="",
                               support_contact="noc@idc.example")
    site = SiteFactory(name="sh-1", provider=provider, country="CN")
    baseline = BaselineFactory(name="h100", pool=PoolFactory(provider=provider))
    override = BoundaryOverride.objects.create(provider=provider, layer="hardware", owner="us", note="contract")
    return {"providers": provider, "sites": site, "baselines": baseline, "boundary-overrides": override}


EDITS = {
    "providers": {"notes": "changed"},
    "sites": {"support_contact": "remote hands +86 21 5555 0100"},
    "baselines": {"driver_version": "560.35.03"},
    "boundary-overrides": {"owner": "shared", "note": "renegotiated"},
}


@pytest.mark.parametrize("resource", list(EDITS))
def test_a_viewer_can_neither_edit_nor_delete(viewer_api, resource):
    obj = _objects()[resource]
    before = {f: getattr(obj, f) for f in EDITS[resource]}
    patch = viewer_api.patch(f"/api/v1/{resource}/{obj.pk}/", EDITS[resource], format="json")
    assert patch.status_code == 403
    assert "operator" in patch.json()["error"]["message"]
    assert viewer_api.delete(f"/api/v1/{resource}/{obj.pk}/").status_code == 403
    obj.refresh_from_db()
    assert {f: getattr(obj, f) for f in EDITS[resource]} == before
    assert not AuditEntry.objects.filter(action__in=["update", "delete"]).exists()


@pytest.mark.parametrize("resource", list(EDITS))
def test_an_operator_edits_and_the_change_is_audited(operator_api, resource):
    obj = _objects()[resource]
    response = operator_api.patch(f"/api/v1/{resource}/{obj.pk}/", EDITS[resource], format="json")
    assert response.status_code == 200, response.content
    obj.refresh_from_db()
    for field, value in EDITS[resource].items():
        assert getattr(obj, field) == value
        assert response.json()[field] == value
    entry = AuditEntry.objects.get(action="update", object_id=str(obj.pk), object_type=obj._meta.label_lower)
    assert entry.actor_label == "operator-user"
    assert set(EDITS[resource]) <= set(entry.after)


def test_a_site_has_its_own_support_contact_and_shows_the_providers(operator_api):
    provider = ProviderFactory(support_contact="https://support.example")
    created = operator_api.post("/api/v1/sites/", {"name": "fra-1", "provider": provider.pk, "country": "de",
                                                   "support_contact": "fra-1 remote hands"}, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["country"], body["support_contact"], body["provider_support_contact"]) == (
        "DE", "fra-1 remote hands", "https://support.example")
    listed = operator_api.get("/api/v1/sites/").json()["results"]
    assert [s["support_contact"] for s in listed] == ["fra-1 remote hands"]


def test_a_site_name_taken_at_its_provider_is_named_on_the_field(operator_api):
    site = SiteFactory(name="sh-1")
    response = operator_api.post("/api/v1/sites/", {"name": "sh-1", "provider": site.provider_id, "country": "CN"},
                                 format="json")
    assert response.status_code == 400
    assert "name" in response.json()["error"]["fields"]
    other = SiteFactory(name="sh-2", provider=site.provider)
    rename = operator_api.patch(f"/api/v1/sites/{other.pk}/", {"name": "sh-1"}, format="json")
    assert rename.status_code == 400
    assert "name" in rename.json()["error"]["fields"]
    assert Site.objects.get(pk=other.pk).name == "sh-2"
    bad_country = operator_api.patch(f"/api/v1/sites/{other.pk}/", {"country": "Germany"}, format="json")
    assert bad_country.status_code == 400
    assert "country" in bad_country.json()["error"]["fields"]


def test_deleting_a_provider_that_nodes_use_is_a_conflict_not_an_error(operator_api):
    node = NodeFactory()
    response = operator_api.delete(f"/api/v1/providers/{node.provider_id}/")
    assert response.status_code == 409
    assert "nodes" in response.json()["error"]["message"]
    assert Provider.objects.filter(pk=node.provider_id).exists()
    spare = ProviderFactory()
    assert operator_api.delete(f"/api/v1/providers/{spare.pk}/").status_code == 204
    assert AuditEntry.objects.filter(action="delete", object_type="inventory.provider",
                                     object_id=str(spare.pk)).exists()


def test_operator_deletes_a_baseline_and_a_boundary_override(operator_api):
    objects = _objects()
    assert operator_api.delete(f"/api/v1/baselines/{objects['baselines'].pk}/").status_code == 204
    assert operator_api.delete(f"/api/v1/boundary-overrides/{objects['boundary-overrides'].pk}/").status_code == 204
    assert not Baseline.objects.exists() and not BoundaryOverride.objects.exists()
    assert AuditEntry.objects.filter(action="delete").count() == 2


def test_editing_an_override_onto_a_taken_cell_names_the_layer(operator_api):
    provider = ProviderFactory()
    BoundaryOverride.objects.create(provider=provider, layer="hardware", owner="us")
    other = BoundaryOverride.objects.create(provider=provider, layer="os", owner="us")
    response = operator_api.patch(f"/api/v1/boundary-overrides/{other.pk}/", {"layer": "hardware"}, format="json")
    assert response.status_code == 400
    assert "layer" in response.json()["error"]["fields"]
    assert BoundaryOverride.objects.get(pk=other.pk).layer == "os"


def test_a_node_carries_its_sites_contact_beside_its_providers(viewer_api):
    site = SiteFactory(name="fra-1", support_contact="fra-1 remote hands")
    node = NodeFactory(provider=site.provider, site=site)
    body = viewer_api.get(f"/api/v1/nodes/{node.pk}/").json()
    assert (body["site_support_contact"], body["provider_support_contact"]) == (
        "fra-1 remote hands", site.provider.support_contact)
    listed = viewer_api.get("/api/v1/nodes/").json()["results"]
    assert [n["site_support_contact"] for n in listed] == ["fra-1 remote hands"]
