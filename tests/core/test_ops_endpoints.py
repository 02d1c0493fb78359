import pytest
from django.test import Client

from config.celery_app import app

pytestmark = pytest.mark.django_db


def test_healthz():
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_ok_when_database_and_broker_reachable():
    response = Client().get("/readyz")
    assert response.status_code == 200, response.content
    assert response.json()["checks"] == ["broker", "database"]


def test_readyz_names_the_unreachable_broker():
    original = app.conf.broker_url
    app.conf.broker_url = "redis://127.0.0.1:1/0"
    try:
        response = Client().get("/readyz")
    finally:
        app.conf.broker_url = original
    assert response.status_code == 503
    body = response.json()
    assert set(body["failed"]) == {"broker"}
    assert "broker" in body["message"]


def test_openapi_schema_and_docs_need_a_signed_in_user_by_default(viewer_api):
    schema = Client().get("/api/schema/")
    assert schema.status_code == 401
    assert schema.json()["error"]["code"] == "not_authenticated"
    docs = Client().get("/api/docs/")
    assert docs.status_code == 401
    assert b"Sign in" in docs.content
    schema = viewer_api.get("/api/schema/")
    assert schema.status_code == 200
    assert b"/api/v1/nodes/{id}/boundary/" in schema.content
    docs = viewer_api.get("/api/docs/")
    assert docs.status_code == 200
    assert b"swagger" in docs.content.lower()


def test_openapi_schema_and_docs_public_when_configured(settings):
    settings.API_DOCS_PUBLIC = True
    assert Client().get("/api/schema/").status_code == 200
    assert b"swagger" in Client().get("/api/docs/").content.lower()


def test_docs_are_public_in_local_settings_only():
    from config.settings import local, test

    assert local.API_DOCS_PUBLIC is True
    assert test.API_DOCS_PUBLIC is False  # as production: both take the base default


def test_unknown_api_route_uses_error_shape(viewer_api):
    response = viewer_api.get("/api/v1/nodes/999999/")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
