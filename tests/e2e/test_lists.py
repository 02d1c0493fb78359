"""The triage lists in real Chromium, in English and Simplified Chinese, at desktop width and at 390 px:
nodes (triage columns, severity-first order, has-findings filter, saved views, CSV, bulk cordon), the node
page's header (state, open incident, editable support contact), a forming condition shown amber, a reclaimed
spot node whose deadline finding closed itself, and findings (severity order, age, provider and support
contact, search, provider filter, CSV, bulk acknowledge). Screenshots land in test-artifacts/e2e/lists/."""

import json
import os
import shutil
import subprocess
from datetime import timedelta

import pytest
from django.utils import timezone

from fleet.accounts.choices import Role
from fleet.billing.services import preemption_record_by_operator
from fleet.health.models import HealthCondition, Rule
from tests.factories import NodeFactory, ProviderFactory, UserFactory
from tests.health.factories import NodeStatusFactory
from tests.inventory.test_node_list import finding

from .conftest import ARTIFACTS, CHROMIUM, ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

PASSWORD = "pw-for-tests-123"  # UserFactory's default
CONTACT = "support@acme.example / +1 555 0100"
PASSES = [("en", 1440), ("zh-CN", 1440), ("en", 390), ("zh-CN", 390)]


def _fleet() -> dict:
    now = timezone.now()
    acme = ProviderFactory(name="Acme Cloud", slug="acme", kind="cloud", cloud="aws",
                           support_contact="support@acme.example")
    own = ProviderFactory(name="Own DC", slug="own", kind="own", cloud="")
    operator = UserFactory(username="lists-operator", role=Role.OPERATOR)

    def node(hostname, provider, **kwargs):
        made = NodeFactory(hostname=hostname, provider=provider, state="active", **kwargs)
        NodeStatusFactory(node=made, received_at=now, collected_at=now, interval_s=600,
                          gpu_count_seen=kwargs.get("expected_gpu_count") or 8)
        return made

    critical = node("lists-critical", acme, delivery_form="cloud_dedicated", expected_gpu_count=8)
    critical.status.gpu_count_seen = 7
    critical.status.save()
    finding(critical, "xid", party="provider", opened=now - timedelta(hours=3))
    warning = node("lists-warning", own, delivery_form="bare_metal_owned", expected_gpu_count=8)
    finding(warning, "tcp_retransmits", party="us", opened=now - timedelta(hours=1))
    healthy = node("lists-healthy", own, delivery_form="bare_metal_owned", expected_gpu_count=8)
    silent = NodeFactory(hostname="lists-silent", provider=own, delivery_form="bare_metal_owned", state="active")
    NodeStatusFactory(node=silent, received_at=now - timedelta(hours=2), collected_at=now - timedelta(hours=2),
                      silent=True, silent_since=now - timedelta(hours=2))
    # Forming: the condition holds, the rule's hold time (an hour here) has not passed.
    forming = node("lists-forming", own, delivery_form="bare_metal_owned", expected_gpu_count=8)
    rule = Rule.objects.get(slug="tcp_retransmits")
    Rule.objects.filter(pk=rule.pk).update(duration_s=3600)
    HealthCondition.objects.create(rule=rule, node=forming, subject="node", first_true_at=now - timedelta(seconds=30),
                                   summary="TCP retransmits 4.00 % of segments")
    # Reclaimed: a spot node with a preemption notice, then the preemption recorded.
    reclaimed = node("lists-spot-reclaimed", acme, delivery_form="cloud_dedicated", billing_mode="spot",
                     expected_gpu_count=8)
    finding(reclaimed, "preemption_notice", party="provider", opened=now - timedelta(minutes=10))
    preemption_record_by_operator(node=reclaimed, actor=operator, now=now)
    nodes = {"critical": critical, "warning": warning, "healthy": healthy, "silent": silent, "forming": forming,
             "reclaimed": reclaimed}
    return {role: {"id": n.pk, "hostname": n.hostname, "provider": n.provider.name} for role, n in nodes.items()}


def test_triage_lists_in_both_languages_and_at_390px(live_server_url, committed_db):
    nodes = _fleet()
    artifacts = ARTIFACTS / "lists"
    shutil.rmtree(artifacts, ignore_errors=True)
    artifacts.mkdir(parents=True)
    for index, (lang, width) in enumerate(PASSES):
        result = subprocess.run(
            ["node", str(ROOT / "tests" / "e2e" / "lists.mjs")], cwd=ROOT, capture_output=True, text=True, timeout=240,
            env={**os.environ, "E2E_BASE_URL": live_server_url, "E2E_ARTIFACTS": str(artifacts),
                 "CHROMIUM_PATH": CHROMIUM, "E2E_USERNAME": "lists-operator", "E2E_PASSWORD": PASSWORD,
                 "E2E_LANG": lang, "E2E_WIDTH": str(width), "E2E_NODES": json.dumps(nodes), "E2E_CONTACT": CONTACT,
                 "E2E_EDIT_CONTACT": "1" if index == 0 else "0"})
        output = result.stdout + result.stderr
        assert result.returncode == 0, f"lists e2e ({lang}, {width} px) failed; screenshots in {artifacts}:\n" \
                                       f"{output[-6000:]}"
        for name in ("01-nodes", "02-nodes-saved-view", "03-nodes-bulk-cordon", "04-node-header",
                     "05-node-support-contact", "06-forming", "07-reclaimed-spot", "08-findings",
                     "09-findings-bulk-ack"):
            assert (artifacts / f"{name}-{lang}-{width}.png").stat().st_size > 0
