"""The writes the console's rule override form makes: an edit is a PUT of the whole override, so a parameter
taken out of the JSON is dropped (a PATCH merges); viewers are refused every write."""

import pytest

from fleet.core.models import AuditEntry
from fleet.health.models import Rule, RuleOverride
from tests.factories import PoolFactory

pytestmark = pytest.mark.django_db


def _rule_with_two_params() -> Rule:
    return next(rule for rule in Rule.objects.order_by("slug") if len(rule.params or {}) >= 2)


def test_a_put_replaces_the_parameters_and_a_patch_merges_them(operator_api):
    rule = _rule_with_two_params()
    (first, a), (second, b) = list(rule.params.items())[:2]
    override = RuleOverride.objects.create(rule=rule, pool=PoolFactory(), params={first: a, second: b})
    body = {"rule": rule.slug, "pool": override.pool_id, "params": {first: a}, "enabled": False, "duration_s": 120,
            "note": "quieter"}
    response = operator_api.put(f"/api/v1/rule-overrides/{override.pk}/", body, format="json")
    assert response.status_code == 200, response.content
    override.refresh_from_db()
    assert (override.params, override.enabled, override.duration_s, override.note) == (
        {first: a}, False, 120, "quieter")
    assert AuditEntry.objects.filter(object_type="health.ruleoverride", action="update").count() == 1

    merged = operator_api.patch(f"/api/v1/rule-overrides/{override.pk}/", {"params": {second: b}}, format="json")
    assert merged.status_code == 200
    override.refresh_from_db()
    assert override.params == {first: a, second: b}


def test_a_viewer_cannot_edit_or_delete_an_override(viewer_api):
    rule = _rule_with_two_params()
    override = RuleOverride.objects.create(rule=rule, pool=PoolFactory(), params={}, enabled=True)
    body = {"rule": rule.slug, "pool": override.pool_id, "enabled": False}
    for response in (viewer_api.put(f"/api/v1/rule-overrides/{override.pk}/", body, format="json"),
                     viewer_api.patch(f"/api/v1/rule-overrides/{override.pk}/", {"enabled": False}, format="json"),
                     viewer_api.delete(f"/api/v1/rule-overrides/{override.pk}/")):
        assert response.status_code == 403
        assert "operator" in response.json()["error"]["message"]
    override.refresh_from_db()
    assert override.enabled is True
    assert not AuditEntry.objects.filter(object_type="health.ruleoverride").exclude(action="create").exists()
