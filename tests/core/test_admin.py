import pytest
from django.apps import apps
from django.contrib import admin

pytestmark = pytest.mark.django_db

APPS = ["accounts", "core", "inventory", "telemetry", "health", "billing", "remediation"]


def test_every_model_has_an_admin():
    missing = [model._meta.label for label in APPS for model in apps.get_app_config(label).get_models()
               if model not in admin.site._registry]
    assert missing == []


def test_admin_changelists_render(admin_client):
    for label in APPS:
        for model in apps.get_app_config(label).get_models():
            url = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
            assert admin_client.get(url).status_code == 200, url
