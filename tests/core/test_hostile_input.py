"""Requests a fuzzer or an attacker sends: each is a 4xx in the API's error shape, never a 500, and changes
nothing."""

import importlib
import pkgutil

import pytest
from django.test import Client
from django.urls import URLResolver, get_resolver
from rest_framework import serializers
from rest_framework.test import APIClient

import fleet
from fleet.inventory.models import Provider
from fleet.telemetry.models import EnrollmentToken
from tests.factories import NodeFactory, ProviderFactory

pytestmark = pytest.mark.django_db

SESSION = "/api/v1/auth/session/"


def _error(response, status: int) -> dict:
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    return response.json()["error"]


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# --- Bodies ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("depth", [33, 5_000, 100_000])
def test_deep_json_on_the_unauthenticated_login_is_a_400(depth):
    body = '{"username": "a", "password": ' + _nested(depth) + "}"
    error = _error(APIClient().generic("POST", SESSION, body, content_type="application/json"), 400)
    assert error["code"] == "parse_error"
    assert "nested" in error["message"] or "depth" in error["message"]


def test_json_within_the_depth_limit_still_parses(operator_api):
    labels = {"a": "b"}
    body = {"name": "P", "slug": "p", "kind": "cloud", "cloud": "aws", "labels": labels}
    assert operator_api.post("/api/v1/providers/", body, format="json").status_code == 201


@pytest.mark.parametrize("labels, field", [
    ({"team": "ml\x00"}, "labels.team"),
    ({"te\x00am": "ml"}, "labels"),
])
def test_nul_in_labels_is_a_400_naming_the_field(operator_api, labels, field):
    provider = ProviderFactory()
    response = operator_api.post("/api/v1/enrollment-tokens/", {"name": "t", "provider": provider.pk,
                                                                "delivery_form": "cloud_dedicated",
                                                                "billing_mode": "spot", "labels": labels},
                                 format="json")
    assert field in _error(response, 400)["fields"]
    assert not EnrollmentToken.objects.exists()


def test_nul_in_a_form_encoded_field_is_a_400(operator_api):
    response = operator_api.post("/api/v1/providers/", "name=a%00b&slug=ab&kind=cloud",
                                 content_type="application/x-www-form-urlencoded")
    assert "name" in _error(response, 400)["fields"]
    assert not Provider.objects.exists()


def test_nested_object_where_a_scalar_belongs_is_a_400():
    response = APIClient().post(SESSION, {"username": {"$gt": ""}, "password": ["x"]}, format="json")
    assert set(_error(response, 400)["fields"]) == {"username", "password"}


@pytest.mark.parametrize("max_uses", ["1" + "0" * 30, "1e30", "2147483648", '"99999999999999999999"'])
def test_out_of_range_integer_is_a_400_naming_the_field(operator_api, max_uses):
    provider = ProviderFactory()
    body = (f'{{"name": "t", "provider": {provider.pk}, "delivery_form": "cloud_dedicated", '
            f'"billing_mode": "spot", "max_uses": {max_uses}}}')
    response = operator_api.generic("POST", "/api/v1/enrollment-tokens/", body, content_type="application/json")
    assert "max_uses" in _error(response, 400)["fields"]
    assert not EnrollmentToken.objects.exists()


def test_integers_beyond_64_bits_are_refused_anywhere_in_a_body(operator_api):
    body = '{"name": "P", "slug": "p", "kind": "cloud", "labels": {"x": {"deep": [%d]}}}'.replace("%d", str(2**63))
    fields = _error(operator_api.generic("POST", "/api/v1/providers/", body, content_type="application/json"),
                     400)["fields"]
    assert "labels.x.deep[0]" in fields


def test_lone_surrogate_and_nan_are_parse_errors(operator_api):
    for body in ('{"name": "\\ud800"}', '{"name": NaN}', '{"name": 1e999}'):
        response = operator_api.generic("POST", "/api/v1/providers/", body, content_type="application/json")
        assert _error(response, 400)["code"] == "parse_error"


def test_every_writable_integer_in_an_input_serializer_is_bounded():
    """The general rule behind `max_uses: 1e30`: an unbounded IntegerField reaches the database (or Python
    arithmetic) with any size of number. ModelSerializer derives bounds from the column; a hand-declared field
    must state them."""
    for module in pkgutil.walk_packages(fleet.__path__, "fleet."):
        if module.name.endswith(".serializers"):
            importlib.import_module(module.name)

    def views(patterns):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from views(pattern.url_patterns)
            elif getattr(pattern.callback, "cls", None) is not None:
                yield pattern.callback.cls

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    writers = {getattr(view, "serializer_class", None) for view in views(get_resolver().url_patterns)
               if any(hasattr(view, name) for name in ("post", "put", "patch", "create", "update"))}
    queries = {cls for cls in subclasses(serializers.Serializer)
               if cls.__module__.startswith("fleet.") and cls.__name__.endswith(("QuerySerializer", "Request"
                                                                                 "Serializer"))}
    inputs = (writers | queries) - {None}
    assert len(inputs) > 15

    def numbers(serializer, path):
        for name, field in serializer.fields.items():
            if field.read_only:
                continue
            child = getattr(field, "child", None)
            if hasattr(field, "fields"):
                yield from numbers(field, f"{path}.{name}")
            elif child is not None and hasattr(child, "fields"):
                yield from numbers(child, f"{path}.{name}[]")
            else:
                for candidate in (field, child):
                    if isinstance(candidate, serializers.IntegerField | serializers.FloatField):
                        yield f"{path}.{name}", candidate

    unbounded = [path for cls in inputs for path, field in numbers(cls(), cls.__name__)
                 if field.min_value is None or field.max_value is None]
    assert unbounded == []


# --- Query strings, paths, filters ----------------------------------------------------------------------

def test_nul_in_a_search_term_is_a_400(viewer_api):
    assert "search" in _error(viewer_api.get("/api/v1/nodes/", {"search": "gpu\x00"}), 400)["fields"]


def test_nul_in_a_lookup_path_is_a_400(viewer_api):
    _error(viewer_api.get("/api/v1/rules/abc%00def/"), 400)


@pytest.mark.parametrize("since, status", [
    ("2026-01-01T00:00:00+23:45", 200),  # Python's offsets reach ±23:59, PostgreSQL's only ±15:59
    ("0001-01-01T00:00:00+14:00", 400),  # before year 1 in UTC
    ("9999-12-31T23:59:59-14:00", 400),  # after year 9999 in UTC
])
def test_datetime_filters_at_the_edges_of_the_calendar(viewer_api, since, status):
    NodeFactory()
    response = viewer_api.get("/api/v1/events/", {"since": since})
    assert response.status_code == status, response.content[:300]
    if status == 400:
        assert "since" in response.json()["error"]["fields"]


def test_too_many_query_parameters_is_a_400_in_the_error_shape(viewer_api, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 10
    query = "&".join(f"p{n}=1" for n in range(20))
    error = _error(viewer_api.get(f"/api/v1/nodes/?{query}"), 400)
    assert error["code"] == "too_many_fields"


def test_unknown_api_route_is_a_404_in_the_error_shape(viewer_api):
    assert _error(viewer_api.get("/api/v1/no-such-thing/"), 404)["code"] == "not_found"
    assert _error(Client().get("/api/nothing"), 404)["code"] == "not_found"


def test_non_api_404_stays_django_html():
    response = Client().get("/static/nope.css")
    assert response.status_code == 404
    assert not response["Content-Type"].startswith("application/json")


# --- Body size (item 8) ------------------------------------------------------------------------------

def test_oversized_json_body_is_a_413_in_the_error_shape(operator_api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = '{"name": "' + "x" * 2000 + '", "slug": "p", "kind": "cloud"}'
    assert _error(operator_api.generic("POST", "/api/v1/providers/", body, content_type="application/json"),
                  413)["code"] == "too_large"
    assert not Provider.objects.exists()


def test_oversized_form_body_on_the_login_is_a_413_in_the_error_shape(settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = "username=a&password=" + "x" * 2000
    response = APIClient().generic("POST", SESSION, body, content_type="application/x-www-form-urlencoded")
    assert _error(response, 413)["code"] == "too_large"


def test_too_many_form_fields_is_a_400_in_the_error_shape(operator_api, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 10
    body = "&".join(f"f{n}=1" for n in range(20))
    response = operator_api.generic("POST", "/api/v1/providers/", body,
                                    content_type="application/x-www-form-urlencoded")
    assert _error(response, 400)["code"] == "too_many_fields"


def test_too_many_multipart_fields_is_a_400_in_the_error_shape(operator_api, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 10
    response = operator_api.post("/api/v1/providers/", {f"f{n}": "1" for n in range(20)}, format="multipart")
    assert _error(response, 400)["code"] == "too_many_fields"


# --- Deleting what others point at ---------------------------------------------------------------------

def test_deleting_a_referenced_row_is_a_409_not_a_500(operator_api):
    node = NodeFactory()
    error = _error(operator_api.delete(f"/api/v1/providers/{node.provider_id}/"), 409)
    assert error["code"] == "protected" and "nodes" in error["message"]
    assert Provider.objects.filter(pk=node.provider_id).exists()


@pytest.mark.parametrize("param", ["gpu", "node", "pool", "code"])
def test_number_filters_beyond_64_bits_are_a_400(viewer_api, param):
    NodeFactory()
    response = viewer_api.get("/api/v1/events/", {param: "1.1e39"})
    assert param in _error(response, 400)["fields"]
    assert viewer_api.get("/api/v1/events/", {param: "12"}).status_code == 200
