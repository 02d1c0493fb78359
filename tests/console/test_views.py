import pytest
from django.urls import Resolver404, resolve

from fleet.console import views


@pytest.fixture
def built_console(tmp_path, settings):
    index = tmp_path / "index.html"
    index.write_text('<!doctype html><div id="root"></div><script src="/static/assets/app.js"></script>')
    settings.CONSOLE_INDEX = index
    return index


@pytest.mark.parametrize("path", ["/", "/nodes", "/nodes/42", "/findings?severity=critical", "/rules", "/enroll",
                                  "/tokens",
                                  "/login?next=/nodes", "/apiary", "/static-pages", "/metricsfoo"])
def test_console_routes_get_the_shell(client, built_console, path):
    response = client.get(path)
    assert response.status_code == 200
    assert b'<div id="root">' in response.content
    assert response["Cache-Control"] == "no-cache"
    assert "csrftoken" in response.cookies  # the login form's POST needs it


@pytest.mark.parametrize("path", ["/api/v1/nope/", "/api", "/admin/", "/static/assets/app.js", "/healthz", "/readyz",
                                  "/metrics", "/install.sh", "/agent/files/x"])
def test_server_paths_never_reach_the_console(path):
    try:
        match = resolve(path)
    except Resolver404:
        return
    assert match.func is not views.console, path


def test_unknown_api_path_is_a_404_not_the_shell(client, built_console):
    response = client.get("/api/v1/does-not-exist/")
    assert response.status_code == 404
    assert b'<div id="root">' not in response.content


def test_unbuilt_console_says_how_to_build_it(client, settings, tmp_path):
    settings.CONSOLE_INDEX = tmp_path / "missing.html"
    response = client.get("/nodes")
    assert response.status_code == 503
    assert b"make frontend" in response.content


def test_console_only_answers_reads(client, built_console):
    assert client.post("/nodes").status_code == 405
