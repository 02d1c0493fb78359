"""Integrators' API rules: unknown query parameters and ordering fields are a 400 naming them, comma lists work
where repeating a parameter does, ranked ordering, and the schema lists what is allowed."""

import pytest

from tests.factories import NodeFactory, ProviderFactory

pytestmark = pytest.mark.django_db


def _error_fields(response):
    assert response.status_code == 400, response.content
    return response.json()["error"]["fields"]


def test_unknown_parameter_is_400_naming_it(viewer_api):
    NodeFactory()
    fields = _error_fields(viewer_api.get("/api/v1/nodes/", {"severty": "critical", "hostname": "x"}))
    assert list(fields) == ["severty"]
    assert "Unknown query parameter 'severty'" in fields["severty"][0]
    assert "has_findings" in fields["severty"][0]  # the message lists what is accepted


@pytest.mark.parametrize("url", ["/api/v1/findings/", "/api/v1/incidents/", "/api/v1/events/", "/api/v1/rules/",
                                 "/api/v1/preemptions/", "/api/v1/node-billing/", "/api/v1/cost-report/"])
def test_every_list_refuses_unknown_parameters(viewer_api, url):
    assert "bogus" in _error_fields(viewer_api.get(url, {"bogus": "1"}))


def test_filters_search_ordering_pagination_and_format_are_known(viewer_api):
    NodeFactory(hostname="n1")
    params = {"hostname": "n", "search": "n", "ordering": "-hostname", "page": 1, "page_size": 5, "format": "json",
              "state": "active", "has_findings": "false"}
    response = viewer_api.get("/api/v1/nodes/", params)
    assert response.status_code == 200, response.content


def test_view_declared_parameters_are_known(viewer_api):
    """Parameters a view documents with extend_schema (here the cost query serializer) are accepted."""
    node = NodeFactory()
    assert viewer_api.get(f"/api/v1/nodes/{node.pk}/billing/", {"period_days": 7}).status_code == 200
    assert "nonsense" in _error_fields(viewer_api.get(f"/api/v1/nodes/{node.pk}/billing/", {"nonsense": 1}))


def test_unknown_ordering_field_is_400_naming_it(viewer_api):
    fields = _error_fields(viewer_api.get("/api/v1/nodes/", {"ordering": "hostname,-colour"}))
    assert "'-colour'" in fields["ordering"][0]
    assert "hostname" in fields["ordering"][0]


def test_comma_list_equals_repeated_parameter(viewer_api):
    NodeFactory(hostname="a", state="active")
    NodeFactory(hostname="b", state="cordoned")
    NodeFactory(hostname="c", state="draining")
    repeated = viewer_api.get("/api/v1/nodes/?state=active&state=cordoned&ordering=hostname").json()
    comma = viewer_api.get("/api/v1/nodes/?state=active,cordoned&ordering=hostname").json()
    assert [n["hostname"] for n in comma["results"]] == [n["hostname"] for n in repeated["results"]] == ["a", "b"]
    assert "state" in _error_fields(viewer_api.get("/api/v1/nodes/?state=active,melted"))


def test_label_values_with_commas_are_not_split(viewer_api):
    NodeFactory(hostname="a", labels={"team": "ml,infra"})
    body = viewer_api.get("/api/v1/nodes/", {"label": "team=ml,infra"}).json()
    assert [n["hostname"] for n in body["results"]] == ["a"]


def test_schema_lists_ordering_fields_and_new_filters(viewer_api, settings):
    settings.API_DOCS_PUBLIC = True
    schema = viewer_api.get("/api/schema/", {"format": "json"}).json()
    nodes = {p["name"]: p for p in schema["paths"]["/api/v1/nodes/"]["get"]["parameters"]}
    ordering = nodes["ordering"]["schema"]
    assert ordering["type"] == "array"
    assert {"severity", "-severity", "last_report_at", "open_findings"} <= set(ordering["items"]["enum"])
    assert "has_findings" in nodes
    findings = {p["name"]: p for p in schema["paths"]["/api/v1/findings/"]["get"]["parameters"]}
    assert {"updated_after", "resolved_after", "provider"} <= set(findings)
    assert "severity" in findings["ordering"]["schema"]["items"]["enum"]
    assert "/api/v1/nodes/by-hostname/{hostname}/" in schema["paths"]


def test_provider_list_refuses_unknown_and_accepts_filters(viewer_api):
    ProviderFactory(slug="x")
    assert viewer_api.get("/api/v1/providers/", {"kind": "cloud"}).status_code == 200
    assert "kinds" in _error_fields(viewer_api.get("/api/v1/providers/", {"kinds": "cloud"}))


def test_every_documented_query_parameter_is_accepted(admin_api):
    """The schema and the 400 agree: a parameter the API docs list for a GET is never refused as unknown."""
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    refused = []
    for path, operations in schema["paths"].items():
        get = operations.get("get")
        if get is None or "{" in path or path.startswith("/api/v1/agent/"):
            continue
        names = [p["name"] for p in get.get("parameters", []) if p["in"] == "query"]
        if not names:
            continue
        response = admin_api.get(path, {name: "" for name in names})
        if response.status_code == 400 and response.json()["error"]["code"] == "unknown_parameter":
            refused.append(f"{path}: {sorted(response.json()['error']['fields'])}")
    assert refused == []


# --- Every GET of the API, detail routes and plain views included --------------------------------------------

def _api_views():
    """(route, view class) of every DRF view under /api/v1/, from the URL resolver itself."""
    from django.urls import URLPattern, URLResolver, get_resolver

    found = []

    def walk(patterns, prefix):
        for entry in patterns:
            route = prefix + str(entry.pattern)
            if isinstance(entry, URLResolver):
                walk(entry.url_patterns, route)
            elif isinstance(entry, URLPattern) and hasattr(entry.callback, "cls"):
                found.append((route, entry.callback.cls))

    walk(get_resolver().url_patterns, "")
    return [(route, cls) for route, cls in found if route.startswith("api/v1/")]


def test_every_api_view_has_the_strict_query_params_mixin():
    from fleet.core.api.mixins import StrictQueryParamsMixin

    missing = sorted({f"{cls.__module__}.{cls.__name__}" for _, cls in _api_views()
                      if not issubclass(cls, StrictQueryParamsMixin)})
    assert missing == [], "add StrictQueryParamsMixin as the first base of these views"


def _get_paths() -> list[str]:
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    return sorted(path for path, operations in schema["paths"].items() if "get" in operations)


GET_PATHS = _get_paths()


def test_the_walk_covers_the_routes_the_issue_named():
    assert {"/api/v1/nodes/by-hostname/{hostname}/", "/api/v1/nodes/{id}/boundary/", "/api/v1/nodes/{id}/series/",
            "/api/v1/gpus/{id}/series/", "/api/v1/nodes/{id}/", "/api/v1/findings/{id}/"} <= set(GET_PATHS)
    assert len(GET_PATHS) > 100


@pytest.mark.parametrize("path", GET_PATHS)
def test_every_get_route_refuses_an_unknown_parameter(admin_api, path):
    """The check runs before the handler, so a detail route answers 400 for its query whether or not the object
    exists; `seeded` below checks the same on real objects."""
    import re

    url = re.sub(r"\{[^}]+\}", "1", path)
    response = admin_api.get(url, {"bogus_param": "1"})
    assert response.status_code == 400, (url, response.status_code, response.content[:300])
    error = response.json()["error"]
    assert error["code"] == "unknown_parameter" and list(error["fields"]) == ["bogus_param"]
    assert "bogus_param" in error["fields"]["bogus_param"][0]


def test_detail_routes_of_real_objects_refuse_and_accept(viewer_api):
    node = NodeFactory(hostname="gpu-a1")
    for url in (f"/api/v1/nodes/{node.pk}/", f"/api/v1/nodes/{node.pk}/boundary/",
                "/api/v1/nodes/by-hostname/gpu-a1/"):
        assert viewer_api.get(url).status_code == 200, url
        assert "bogus_param" in _error_fields(viewer_api.get(url, {"bogus_param": 1}))
        assert viewer_api.get(url, {"format": "json"}).status_code == 200, url
    series = f"/api/v1/nodes/{node.pk}/series/"
    assert viewer_api.get(series, {"metric": "cpu_busy_pct"}).status_code == 200
    assert list(_error_fields(viewer_api.get(series, {"metric": "cpu_busy_pct", "stepp": 60}))) == ["stepp"]


def test_anonymous_callers_get_401_before_the_parameter_check(client):
    response = client.get("/api/v1/nodes/1/boundary/", {"bogus_param": 1})
    assert response.status_code in (401, 403)
