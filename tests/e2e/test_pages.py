"""The charts and the pages of every API capability in real Chromium against the demo fleet, in English and
Simplified Chinese, on a desktop and at 390 px: fleet trends, node and GPU charts with the range picker and the
Xid mark, server-written texts (triage headline, recommended action, a finding's summary, the rule catalogue)
in the console's language, billing (cost report, CSV, what-if side by side), providers and sites with support contacts,
baselines, boundary and rule overrides, the audit log and users — with field errors from the server shown next
to the field. Screenshots land in test-artifacts/e2e/pages/.
"""

import pytest

from fleet.inventory.models import Node
from fleet.telemetry.services.history import rollup_history
from fleet_agent.timeutil import utc_now

from .conftest import ARTIFACTS, run_console_script
from .test_console import PASSWORD, run_demo_fleet

pytestmark = [pytest.mark.e2e, pytest.mark.integration]


def test_charts_and_capability_pages_in_both_languages_and_at_390px(live_server_url, committed_db, tmp_path):
    hostnames = run_demo_fleet(live_server_url, tmp_path)
    rollup_history(now=utc_now())
    assert Node.objects.exists()
    artifacts = ARTIFACTS / "pages"
    result = run_console_script(base_url=live_server_url, artifacts=artifacts, timeout=420, script="pages.mjs", env={
        "E2E_USERNAME": "e2e-admin", "E2E_PASSWORD": PASSWORD, "E2E_NODE": hostnames["own-bm-xid79"],
    })
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"pages e2e failed (screenshots in {artifacts}):\n{output[-8000:]}"
    for language in ("en", "zh-CN"):
        for size in ("desktop", "390"):
            for name in ("trends", "billing", "providers", "baselines", "overrides", "audit", "users", "node-charts",
                         "findings", "rules"):
                assert (artifacts / f"{language}-{size}-{name}.png").stat().st_size > 0
        assert f"{language}-390: a menu button is shown" in output
        assert f"{language}-390: the matrix keeps its layer column in view while it scrolls" in output
        assert f"{language}-desktop: the GPU's Xid event is marked on the time axis" in output
        for size in ("desktop", "390"):  # server-written texts follow the console's language (issue #18)
            assert f"{language}-{size}: the triage headline is the server's, in {language}" in output
            assert f"{language}-{size}: the recommended action is in {language}" in output
            assert f"{language}-{size}: the Xid finding's summary is in {language}" in output
            assert f"{language}-{size}: the rule catalogue's titles are in {language}" in output
    assert "a taken slug is named next to the slug field" in output
    assert "the refused rule override changed nothing" in output
    assert "the audit log, filtered to creations, lists the new provider" in output
    assert "the cost report downloads as CSV" in output
