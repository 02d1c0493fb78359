from datetime import timedelta

import pytest

from fleet.core.models import AuditEntry
from fleet.health.models import Rule, RuleOverride, XidPolicy
from fleet.health.services.evaluation import evaluate
from fleet.inventory.models import GPU
from tests.factories import PoolFactory

from .factories import T0, EventFactory, healthy_node
from .harness import open_findings, set_status

pytestmark = pytest.mark.django_db


@pytest.fixture
def findings_fleet():
    pool = PoolFactory()
    cloud = healthy_node(pool=pool, delivery_form="cloud_dedicated")
    owned = healthy_node(delivery_form="bare_metal_owned")
    EventFactory(node=cloud, kind="xid", code=79, at=T0, gpu=GPU.objects.get(node=cloud, index=0))
    EventFactory(node=owned, kind="xid", code=79, at=T0, gpu=GPU.objects.get(node=owned, index=0))
    set_status(owned, tcp_retrans_pct=4.0)
    evaluate(now=T0)
    evaluate(now=T0 + timedelta(minutes=5))
    return {"pool": pool, "cloud": cloud, "owned": owned}


def _ids(response):
    assert response.status_code == 200, response.content
    return sorted(row["id"] for row in response.json()["results"])


def test_findings_filters(viewer_api, findings_fleet):
    cloud, owned, pool = findings_fleet["cloud"], findings_fleet["owned"], findings_fleet["pool"]
    xid_cloud = open_findings("xid", cloud).get()
    xid_owned = open_findings("xid", owned).get()
    tcp = open_findings("tcp_retransmits", owned).get()
    url = "/api/v1/findings/"
    assert _ids(viewer_api.get(url)) == sorted([xid_cloud.pk, xid_owned.pk, tcp.pk])
    assert _ids(viewer_api.get(url, {"node": owned.pk})) == sorted([xid_owned.pk, tcp.pk])
    assert _ids(viewer_api.get(url, {"pool": pool.pk})) == [xid_cloud.pk]
    assert _ids(viewer_api.get(url, {"severity": "warning"})) == [tcp.pk]
    assert _ids(viewer_api.get(url, {"step": "capacity"})) == [tcp.pk]
    assert _ids(viewer_api.get(url, {"layer": "hardware"})) == sorted([xid_cloud.pk, xid_owned.pk])
    assert _ids(viewer_api.get(url, {"responsible_party": "provider"})) == [xid_cloud.pk]
    assert _ids(viewer_api.get(url, {"responsible_party": "hardware_vendor"})) == [xid_owned.pk]
    assert _ids(viewer_api.get(url, {"state": "resolved"})) == []
    assert _ids(viewer_api.get(url, {"rule": "xid", "state": "open"})) == sorted([xid_cloud.pk, xid_owned.pk])


def test_finding_list_and_detail_shapes(viewer_api, findings_fleet):
    finding = open_findings("xid", findings_fleet["cloud"]).get()
    row = viewer_api.get("/api/v1/findings/", {"node": findings_fleet["cloud"].pk}).json()["results"][0]
    assert row["rule"] == "xid"
    assert row["step_number"] == 4
    assert row["gpu_index"] == 0
    assert row["xid_policy_version"] == 1
    assert "evidence" not in row
    detail = viewer_api.get(f"/api/v1/findings/{finding.pk}/").json()
    assert detail["evidence"]["values"]["code"] == 79
    assert detail["recommended_action"] == finding.recommended_action


def test_bad_finding_filter_is_400_naming_the_field(viewer_api):
    response = viewer_api.get("/api/v1/findings/", {"responsible_party": "santa"})
    assert response.status_code == 400
    assert "responsible_party" in response.json()["error"]["fields"]


def test_findings_are_read_only(operator_api, findings_fleet):
    finding = open_findings("xid", findings_fleet["cloud"]).get()
    assert operator_api.patch(f"/api/v1/findings/{finding.pk}/", {"state": "resolved"}).status_code == 405


def test_rule_catalog_lists_every_rule_with_its_parameters(viewer_api):
    rules = viewer_api.get("/api/v1/rules/").json()
    assert len(rules) == Rule.objects.count() >= 26
    memory = next(r for r in rules if r["slug"] == "gpu_memory_pressure")
    assert (memory["step"], memory["layer"], memory["applies_to"]) == ("capacity", "application", "gpu")
    assert memory["params"] == {"threshold_pct": 95.0}
    assert memory["param_specs"][0]["name"] == "threshold_pct"
    assert viewer_api.get("/api/v1/rules/", {"step": "software_chain"}).json()[0]["step"] == "software_chain"


def test_viewer_cannot_edit_a_rule(viewer_api):
    response = viewer_api.patch("/api/v1/rules/gpu_memory_pressure/", {"enabled": False}, format="json")
    assert response.status_code == 403
    assert Rule.objects.get(slug="gpu_memory_pressure").enabled is True


def test_operator_edits_thresholds_and_it_is_audited(operator_api):
    response = operator_api.patch("/api/v1/rules/gpu_memory_pressure/",
                                  {"params": {"threshold_pct": 90}, "duration_s": 120}, format="json")
    assert response.status_code == 200, response.content
    rule = Rule.objects.get(slug="gpu_memory_pressure")
    assert (rule.params, rule.duration_s) == ({"threshold_pct": 90.0}, 120)
    entry = AuditEntry.objects.get(object_type="health.rule", object_id=str(rule.pk))
    assert entry.before["params"] == {"threshold_pct": 95.0}
    assert entry.after["params"] == {"threshold_pct": 90.0}
    assert entry.actor_label == "operator-user"

    assert operator_api.patch("/api/v1/rules/gpu_memory_pressure/", {"enabled": False},
                              format="json").status_code == 200
    assert Rule.objects.get(slug="gpu_memory_pressure").enabled is False


@pytest.mark.parametrize(("payload", "field"), [
    ({"params": {"threshold_pct": 150}}, "params.threshold_pct"),
    ({"params": {"threshold_pct": "high"}}, "params.threshold_pct"),
    ({"params": {"treshold_pct": 90}}, "params.treshold_pct"),
    ({"params": ["threshold_pct"]}, "params"),
    ({"duration_s": -5}, "duration_s"),
    ({"severity": "apocalyptic"}, "severity"),
])
def test_bad_rule_edits_are_400_naming_the_field_and_change_nothing(operator_api, payload, field):
    before = Rule.objects.get(slug="gpu_memory_pressure")
    response = operator_api.patch("/api/v1/rules/gpu_memory_pressure/", payload, format="json")
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"], response.json()
    after = Rule.objects.get(slug="gpu_memory_pressure")
    assert (after.params, after.duration_s, after.severity) == (before.params, before.duration_s, before.severity)
    assert not AuditEntry.objects.filter(object_type="health.rule").exists()


def test_rules_cannot_be_created_or_deleted(admin_api):
    assert admin_api.post("/api/v1/rules/", {"slug": "mine"}, format="json").status_code == 405
    assert admin_api.delete("/api/v1/rules/xid/").status_code == 405


def test_pool_overrides(operator_api, viewer_api):
    pool = PoolFactory()
    payload = {"rule": "checkpoint_stale", "pool": pool.pk, "params": {"max_age_s": 600}}
    assert viewer_api.post("/api/v1/rule-overrides/", payload, format="json").status_code == 403
    response = operator_api.post("/api/v1/rule-overrides/", payload, format="json")
    assert response.status_code == 201, response.content
    override = RuleOverride.objects.get()
    assert (override.rule.slug, override.params, override.enabled) == ("checkpoint_stale", {"max_age_s": 600}, None)
    assert AuditEntry.objects.filter(object_type="health.ruleoverride", action="create").exists()

    again = operator_api.post("/api/v1/rule-overrides/", payload, format="json")
    assert again.status_code == 400
    assert "pool" in again.json()["error"]["fields"]

    bad = operator_api.patch(f"/api/v1/rule-overrides/{override.pk}/", {"params": {"max_age_s": 5}}, format="json")
    assert bad.status_code == 400
    assert "params.max_age_s" in bad.json()["error"]["fields"]
    assert RuleOverride.objects.get().params == {"max_age_s": 600}

    ok = operator_api.patch(f"/api/v1/rule-overrides/{override.pk}/", {"enabled": False}, format="json")
    assert ok.status_code == 200
    assert RuleOverride.objects.get().enabled is False
    assert operator_api.delete(f"/api/v1/rule-overrides/{override.pk}/").status_code == 204
    assert not RuleOverride.objects.exists()


def test_xid_policy_edit_is_audited_and_bumps_the_version(operator_api, viewer_api):
    assert viewer_api.get("/api/v1/xid-policies/version/").json() == {"version": 1,
                                                                      "policies": XidPolicy.objects.count()}
    denied = viewer_api.patch("/api/v1/xid-policies/92/", {"severity": "critical"}, format="json")
    assert denied.status_code == 403

    response = operator_api.patch("/api/v1/xid-policies/92/", {"severity": "critical", "action": "reset_gpu"},
                                  format="json")
    assert response.status_code == 200, response.content
    assert response.json()["changed_in_version"] == 2
    policy = XidPolicy.objects.get(code=92)
    assert (policy.severity, policy.action, policy.changed_in_version) == ("critical", "reset_gpu", 2)
    entry = AuditEntry.objects.get(object_type="health.xidpolicy", object_id=str(policy.pk))
    assert (entry.action, entry.actor_label, entry.note) == ("update", "operator-user", "Xid policy table v2")
    assert (entry.before["severity"], entry.after["severity"]) == ("warning", "critical")
    assert viewer_api.get("/api/v1/xid-policies/version/").json()["version"] == 2

    created = operator_api.post("/api/v1/xid-policies/", {"code": 173, "meaning": "newer than the catalog",
                                                          "severity": "warning", "action": "watch",
                                                          "layer": "gpu_driver"}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["changed_in_version"] == 3

    node = healthy_node()
    EventFactory(node=node, kind="xid", code=92, at=T0, gpu=GPU.objects.get(node=node, index=0))
    evaluate(now=T0)
    finding = open_findings("xid", node).get()
    assert (finding.severity, finding.xid_policy_version) == ("critical", 3)


@pytest.mark.parametrize(("payload", "field"), [
    ({"severity": "meh"}, "severity"),
    ({"action": "pray"}, "action"),
    ({"layer": "kitchen"}, "layer"),
    ({"code": 93}, "code"),
])
def test_bad_xid_policy_edits_change_nothing(operator_api, payload, field):
    response = operator_api.patch("/api/v1/xid-policies/79/", payload, format="json")
    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]
    policy = XidPolicy.objects.get(code=79)
    assert (policy.severity, policy.action, policy.changed_in_version) == ("critical", "reboot", 1)
    assert not AuditEntry.objects.filter(object_type="health.xidpolicy").exists()


def test_duplicate_xid_code_is_400(operator_api):
    response = operator_api.post("/api/v1/xid-policies/", {"code": 79, "meaning": "again", "severity": "warning",
                                                           "action": "watch"}, format="json")
    assert response.status_code == 400
    assert "code" in response.json()["error"]["fields"]
    assert XidPolicy.objects.get(code=79).meaning == "GPU has fallen off the bus"
