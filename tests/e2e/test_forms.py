"""The console's edit forms in real Chromium against a live server, as an admin in English and Chinese at 1440
and 390 px: edit a baseline, create and delete (after confirming) a boundary override and a per-pool rule
override, edit a site's own support contact, change a user's role; then a viewer finds no write control on those
pages, and an admin-issued password reset link lets its user set a password and sign in. The database afterwards
holds exactly what the browser did, each write audited. Screenshots land in test-artifacts/e2e/forms/.
"""

import pytest

from fleet.accounts.choices import Role
from fleet.core.models import AuditEntry
from fleet.health.models import RuleOverride
from fleet.inventory.models import Baseline, BoundaryOverride, Site
from tests.factories import BaselineFactory, PoolFactory, ProviderFactory, SiteFactory, UserFactory

from .conftest import ARTIFACTS, run_console_script

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

PASSWORD = "pw-for-tests-123"  # UserFactory's default
NEW_PASSWORD = "chosen-from-the-link-57"
ROUNDS = ["en-1440", "en-390", "zh-CN-1440", "zh-CN-390"]


def test_admin_edits_every_form_in_both_languages_and_widths_and_a_viewer_cannot(live_server_url, committed_db):
    UserFactory(username="forms-admin", role=Role.ADMIN)
    UserFactory(username="forms-viewer", role=Role.VIEWER)
    target = UserFactory(username="forms-target", role=Role.VIEWER)
    provider = ProviderFactory(name="IDC One", slug="idc-one", kind="idc", cloud="", support_contact="noc@idc.example")
    site = SiteFactory(name="sh-1", provider=provider, country="CN")
    pool = PoolFactory(name="train-a", provider=provider)
    baseline = BaselineFactory(name="h100-train", pool=pool, driver_version="550.54.15")

    artifacts = ARTIFACTS / "forms"
    result = run_console_script(base_url=live_server_url, artifacts=artifacts, timeout=180, script="forms.mjs", env={
        "E2E_USERNAME": "forms-admin", "E2E_VIEWER_USERNAME": "forms-viewer", "E2E_PASSWORD": PASSWORD,
        "E2E_BASELINE": baseline.name, "E2E_SITE": site.name, "E2E_PROVIDER": provider.name,
        "E2E_TARGET_USER": target.username, "E2E_NEW_PASSWORD": NEW_PASSWORD,
    })
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"forms e2e failed (screenshots in {artifacts}):\n{output[-8000:]}"

    for tag in ROUNDS:
        for name in ("baseline-edit", "overrides", "providers", "users"):
            assert (artifacts / f"{tag}-{name}.png").stat().st_size > 0
        assert f"{tag}: the boundary override is deleted after confirmation" in output
        assert f"{tag}: the rule override is deleted after confirmation" in output
    for size in ("1440", "390"):
        for path in ("/baselines", "/overrides", "/providers", "/users"):
            assert f"viewer-{size}: {path} has no write controls (0 found)" in output
    assert "en-390: the baseline-form stacks into one column" in output

    # What the browser did, and only that, is in the database and the audit log.
    assert Baseline.objects.get(pk=baseline.pk).driver_version == "560.35.04"
    assert Site.objects.get(pk=site.pk).support_contact == "remote hands zh-CN-390"
    target.refresh_from_db()
    assert target.role == Role.VIEWER  # operator, viewer, operator, viewer
    assert target.check_password(NEW_PASSWORD)
    assert "the reset page drops the token from the address bar" in output
    assert (artifacts / "en-1440-reset-link.png").stat().st_size > 0
    assert not BoundaryOverride.objects.exists() and not RuleOverride.objects.exists()
    audited = AuditEntry.objects.filter(actor_label="forms-admin")
    assert audited.filter(object_type="inventory.baseline", action="update").count() == 4
    assert audited.filter(object_type="inventory.site", action="update").count() == 4
    for kind in ("inventory.boundaryoverride", "health.ruleoverride"):
        assert audited.filter(object_type=kind, action="create").count() == 4
        assert audited.filter(object_type=kind, action="delete").count() == 4
    assert audited.filter(object_type="accounts.user", object_id=str(target.pk), action="update").count() == 4
    assert audited.filter(object_type="accounts.user", object_id=str(target.pk), action="action",
                          note__startswith="password reset link issued").count() == 1
    assert AuditEntry.objects.filter(actor_label="forms-target", object_id=str(target.pk), action="update",
                                     after={"password": "[changed]"}).count() == 1
    assert not AuditEntry.objects.filter(actor_label="forms-viewer").exclude(object_type="accounts.login").exists()
