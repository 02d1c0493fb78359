import pytest

from fleet.core.models import AuditEntry
from fleet.inventory.models import Node
from tests.factories import NodeFactory, PoolFactory, ProviderFactory, SiteFactory

pytestmark = pytest.mark.django_db


def _hostnames(response):
    assert response.status_code == 200, response.content
    return sorted(row["hostname"] for row in response.json()["results"])


def test_filters_by_every_dimension(viewer_api):
    aws, gcp = ProviderFactory(slug="aws"), ProviderFactory(slug="gcp", cloud="gcp")
    pool = PoolFactory()
    site = SiteFactory(provider=aws)
    NodeFactory(hostname="a-spot", provider=aws, billing_mode="spot", pool=pool, site=site, labels={"team": "ml"})
    NodeFactory(hostname="b-owned", provider=gcp, delivery_form="bare_metal_owned", state="cordoned",
                labels={"team": "infra"})
    NodeFactory(hostname="c-gcp", provider=gcp, labels={"rack": "r1"})

    assert _hostnames(viewer_api.get("/api/v1/nodes/", {"provider": aws.pk})) == ["a-spot"]
    assert _hostnames(viewer_api.get("/api/v1/nodes/", {"provider_slug": "gcp"})) == ["b-owned", "c-gcp"]
    assert _hostnames(viewer_api.get("/api/v1/nodes/", {"billing_mode": "spot"})) == ["a-spot"]
    assert _hostnames(viewer_api.get("/api/v1/nodes/", {"delivery_form": "bare_metal_owned"})) == ["b-owned"]
    assert _hostnames(viewer_api.get("/api/v1/nodes/", {"state": "cordoned"})) == ["b-owned"]
    assert _hostnames(viewer_api.get("/api/v1/nodes/", {"pool": pool.pk})) == ["a-spot"]
    assert _hostnames(viewer_api.get("/api/v1/nodes/", {"site": site.pk})) == ["a-spot"]
    assert _hostnames(viewer_api.get("/api/v1/nodes/", {"label": "team=ml"})) == ["a-spot"]
    assert _hostnames(viewer_api.get("/api/v1/nodes/", {"label": "rack"})) == ["c-gcp"]
    assert _hostnames(viewer_api.get("/api/v1/nodes/", {"search": "owned"})) == ["b-owned"]


def test_pagination(viewer_api):
    NodeFactory.create_batch(7)
    body = viewer_api.get("/api/v1/nodes/", {"page_size": 5}).json()
    assert body["count"] == 7
    assert len(body["results"]) == 5
    assert body["next"] is not None
    assert len(viewer_api.get("/api/v1/nodes/", {"page_size": 5, "page": 2}).json()["results"]) == 2


def test_bad_filter_value_is_400_naming_the_field(viewer_api):
    response = viewer_api.get("/api/v1/nodes/", {"billing_mode": "free"})
    assert response.status_code == 400
    assert "billing_mode" in response.json()["error"]["fields"]


def test_operator_creates_node_and_it_is_audited(operator_api):
    provider = ProviderFactory()
    response = operator_api.post("/api/v1/nodes/", {
        "hostname": "gpu-new", "provider": provider.pk, "delivery_form": "cloud_dedicated",
        "billing_mode": "reserved", "expected_gpu_count": 8, "labels": {"team": "ml"}}, format="json")
    assert response.status_code == 201, response.content
    node = Node.objects.get(hostname="gpu-new")
    entry = AuditEntry.objects.get(object_type="inventory.node", object_id=str(node.pk))
    assert entry.action == "create"
    assert entry.actor_label == "operator-user"
    assert entry.after["billing_mode"] == "reserved"

    response = operator_api.patch(f"/api/v1/nodes/{node.pk}/", {"state": "cordoned"}, format="json")
    assert response.status_code == 200
    update = AuditEntry.objects.filter(action="update").get()
    assert (update.before["state"], update.after["state"]) == ("enrolling", "cordoned")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"delivery_form": "on_a_boat"}, "delivery_form"),
        ({"billing_mode": 3}, "billing_mode"),
        ({"expected_gpu_count": "eight"}, "expected_gpu_count"),
        ({"hostname": None}, "hostname"),
        ({"labels": ["not", "a", "dict"]}, "labels"),
        ({"state": "exploded"}, "state"),
    ],
)
def test_bad_input_is_400_naming_the_field_and_writes_nothing(operator_api, body, field):
    provider = ProviderFactory()
    payload = {"hostname": "gpu-x", "provider": provider.pk, "delivery_form": "cloud_dedicated", **body}
    entries = AuditEntry.objects.count()  # the provider's creation
    response = operator_api.post("/api/v1/nodes/", payload, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert field in error["fields"]
    assert field in error["message"]
    assert Node.objects.count() == 0
    assert AuditEntry.objects.count() == entries


def test_missing_required_field(operator_api):
    response = operator_api.post("/api/v1/nodes/", {"hostname": "x"}, format="json")
    assert response.status_code == 400
    assert {"provider", "delivery_form"} <= set(response.json()["error"]["fields"])


def test_viewer_cannot_write(viewer_api):
    provider = ProviderFactory()
    node = NodeFactory(provider=provider)
    response = viewer_api.post("/api/v1/nodes/", {"hostname": "x", "provider": provider.pk,
                                                  "delivery_form": "cloud_dedicated"}, format="json")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    assert viewer_api.delete(f"/api/v1/nodes/{node.pk}/").status_code == 403
    assert Node.objects.count() == 1
    assert viewer_api.get(f"/api/v1/nodes/{node.pk}/").status_code == 200


def test_site_in_mainland_china_requires_icp(operator_api):
    response = operator_api.post("/api/v1/sites/", {"name": "cn-hangzhou", "country": "cn"}, format="json")
    assert response.status_code == 201
    assert response.json()["icp_filing_required"] is True
    response = operator_api.post("/api/v1/sites/", {"name": "hk", "country": "HK"}, format="json")
    assert response.json()["icp_filing_required"] is False


def test_audit_log_readable_by_operator_not_viewer(operator_api, viewer_api):
    operator_api.post("/api/v1/providers/", {"name": "AWS", "slug": "aws", "kind": "cloud", "cloud": "aws"},
                      format="json")
    assert viewer_api.get("/api/v1/audit/").status_code == 403
    body = operator_api.get("/api/v1/audit/").json()
    assert body["results"][0]["object_type"] == "inventory.provider"


def test_provider_cloud_only_for_cloud_kind(operator_api):
    response = operator_api.post("/api/v1/providers/", {"name": "IDC", "slug": "idc", "kind": "idc",
                                                        "cloud": "aws"}, format="json")
    assert response.status_code == 400
    assert "cloud" in response.json()["error"]["fields"]


def test_gpus_are_read_only(operator_api):
    response = operator_api.post("/api/v1/gpus/", {"uuid": "GPU-x"}, format="json")
    assert response.status_code == 405
