"""Only a superuser may change a superuser or what it owns. Walks every write operation of the API (from the
OpenAPI schema the server serves) whose object is a user or belongs to one, as an admin, against the superuser's
objects: none may change anything. The same walk as the superuser itself proves the requests were well-formed."""

import re

import pytest
from django.forms.models import model_to_dict
from django.urls import resolve
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from fleet.accounts.models import APIToken, SavedView, User
from fleet.accounts.services import api_token_create
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

WRITE_METHODS = ("post", "put", "patch", "delete")


def _owned_by_a_user(model) -> bool:
    if model is User:
        return True
    return any(getattr(field, "related_model", None) is User and field.name == "user"
               for field in model._meta.get_fields() if field.is_relation and field.many_to_one)


def _user_object_operations() -> list[tuple[str, str, type]]:
    """(method, path template, model) for each write operation on one object that is a user or a user's."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    found = []
    for path, operations in schema["paths"].items():
        if "{id}" not in path:
            continue
        view = resolve(path.replace("{id}", "1")).func
        cls = getattr(view, "cls", None)
        queryset = getattr(cls, "queryset", None)
        model = getattr(queryset, "model", None)
        if model is None and hasattr(cls, "get_queryset"):
            continue
        if model is None or not _owned_by_a_user(model):
            continue
        for method in WRITE_METHODS:
            if method in operations:
                found.append((method, path, model))
    return found


def _superusers_objects(superuser: User) -> dict[type, object]:
    token, _ = api_token_create(user=superuser, name="break-glass automation", write_enabled=True)
    view = SavedView.objects.create(user=superuser, page="nodes", name="mine", query="state=active")
    return {User: superuser, APIToken: token, SavedView: view}


def _snapshot(obj) -> dict:
    obj = type(obj).objects.filter(pk=obj.pk).first()
    return model_to_dict(obj) if obj is not None else {}


def _client(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user=user)
    return client


def _walk(client: APIClient, objects: dict, reader: APIClient) -> list[tuple[str, str, int, bool]]:
    results = []
    for method, path, model in _user_object_operations():
        obj = objects.get(model)
        assert obj is not None, f"the walk has no object of {model.__name__} for {method.upper()} {path}"
        url = path.replace("{id}", str(obj.pk))
        current = reader.get(url)
        body = current.json() if current.status_code == 200 and method in ("put", "patch") else {}
        if model is User and body:
            body = {**body, "email": "taken-over@example.com"}
        before = _snapshot(obj)
        response = getattr(client, method)(url, body, format="json")
        results.append((method, url, response.status_code, _snapshot(obj) != before))
    return results


def test_no_write_operation_lets_an_admin_change_a_superuser_or_what_it_owns():
    superuser = User.objects.create_superuser(username="root", password="x" * 20, email="")
    admin = UserFactory(username="an-admin", role="admin")
    objects = _superusers_objects(superuser)
    walked = _walk(_client(admin), objects, _client(superuser))
    paths = {re.sub(r"/\d+/", "/{id}/", url) for _, url, _, _ in walked}
    # The walk reaches users, tokens (revoke) and saved views: if the schema loses one, this says so.
    assert {"/api/v1/users/{id}/", "/api/v1/users/{id}/password-reset/", "/api/v1/tokens/{id}/revoke/",
            "/api/v1/saved-views/{id}/"} <= paths, paths
    allowed = [(method, url, status) for method, url, status, changed in walked if status < 400 or changed]
    assert allowed == [], allowed
    assert User.objects.filter(pk=superuser.pk, is_active=True, email="").exists()
    assert APIToken.objects.get(pk=objects[APIToken].pk).revoked_at is None


def test_the_same_requests_from_the_superuser_are_accepted():
    """The walk's requests are well-formed: the owner (here, the superuser) gets them through."""
    superuser = User.objects.create_superuser(username="root", password="x" * 20, email="")
    objects = _superusers_objects(superuser)
    token = objects[APIToken]
    response = _client(superuser).post(f"/api/v1/tokens/{token.pk}/revoke/")
    assert response.status_code == 200
    other_root = User.objects.create_superuser(username="root2", password="y" * 20, email="")
    response = _client(other_root).patch(f"/api/v1/users/{superuser.pk}/", {"email": "root@example.com"},
                                         format="json")
    assert response.status_code == 200


def test_an_admin_still_revokes_an_ordinary_users_token():
    admin = UserFactory(username="an-admin", role="admin")
    operator = UserFactory(username="an-operator", role="operator")
    token, _ = api_token_create(user=operator, name="ci")
    assert _client(admin).post(f"/api/v1/tokens/{token.pk}/revoke/").status_code == 200
