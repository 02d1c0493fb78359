import pytest
from django.apps import apps
from django.contrib import admin
from django.db import models

pytestmark = pytest.mark.django_db

APPS = ["accounts", "core", "inventory", "telemetry", "health", "billing", "remediation"]


def _admin_capable(model) -> bool:
    # Django's admin refuses models with a composite primary key (the history tables, docs/telemetry.md).
    return not isinstance(model._meta.pk, models.CompositePrimaryKey)


def test_every_model_has_an_admin():
    missing = [model._meta.label for label in APPS for model in apps.get_app_config(label).get_models()
               if _admin_capable(model) and model not in admin.site._registry]
    assert missing == []
    assert [m._meta.label for label in APPS for m in apps.get_app_config(label).get_models()
            if not _admin_capable(m)] == ["telemetry.NodeSample", "telemetry.GPUSample", "telemetry.NodeSampleRollup",
                                          "telemetry.GPUSampleRollup"]


def test_admin_changelists_render(admin_client):
    for label in APPS:
        for model in [m for m in apps.get_app_config(label).get_models() if _admin_capable(m)]:
            url = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
            assert admin_client.get(url).status_code == 200, url
