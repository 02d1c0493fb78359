"""Saved views: named filter sets per user, each user's own."""

import pytest

from fleet.accounts.models import SavedView
from fleet.core.models import AuditEntry

pytestmark = pytest.mark.django_db

URL = "/api/v1/saved-views/"


def test_any_role_keeps_its_own_views(viewer_api, operator_api):
    created = viewer_api.post(URL, {"page": "findings", "name": "Critical, ours",
                                    "query": "?severity=critical&responsible_party=us"}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["query"] == "severity=critical&responsible_party=us"
    operator_api.post(URL, {"page": "nodes", "name": "Sick", "query": "has_findings=true"}, format="json")
    assert [v["name"] for v in viewer_api.get(URL).json()] == ["Critical, ours"]
    assert [v["name"] for v in operator_api.get(URL, {"page": "nodes"}).json()] == ["Sick"]
    view_id = created.json()["id"]
    # Another user's view is not there for them: 404, not 403, and nothing changes.
    assert operator_api.patch(f"{URL}{view_id}/", {"name": "mine"}, format="json").status_code == 404
    assert operator_api.delete(f"{URL}{view_id}/").status_code == 404
    assert viewer_api.patch(f"{URL}{view_id}/", {"name": "Renamed"}, format="json").json()["name"] == "Renamed"
    assert AuditEntry.objects.filter(object_type="accounts.savedview").count() >= 2
    assert viewer_api.delete(f"{URL}{view_id}/").status_code == 204
    assert not SavedView.objects.filter(pk=view_id).exists()


@pytest.mark.parametrize("payload, field", [
    ({"page": "billing", "name": "x", "query": ""}, "page"),
    ({"page": "nodes", "name": "  ", "query": ""}, "name"),
    ({"page": "nodes", "name": "x", "query": "page=3&state=active"}, "query"),
    ({"page": "nodes", "name": "x", "query": "Drop Table=1"}, "query"),
    ({"page": "nodes", "name": "x" * 81, "query": ""}, "name"),
])
def test_bad_saved_views_are_400_naming_the_field(viewer_api, payload, field):
    response = viewer_api.post(URL, payload, format="json")
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]
    assert not SavedView.objects.exists()


def test_names_are_unique_per_user_and_page(viewer_api, operator_api):
    assert viewer_api.post(URL, {"page": "nodes", "name": "A", "query": ""}, format="json").status_code == 201
    again = viewer_api.post(URL, {"page": "nodes", "name": "A", "query": "state=active"}, format="json")
    assert again.status_code == 400 and "name" in again.json()["error"]["fields"]
    assert viewer_api.post(URL, {"page": "findings", "name": "A", "query": ""}, format="json").status_code == 201
    assert operator_api.post(URL, {"page": "nodes", "name": "A", "query": ""}, format="json").status_code == 201
