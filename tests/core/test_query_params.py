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
