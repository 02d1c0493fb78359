"""The remediation API: lists and filters, detail, timeline, evidence, actions with their roles, and bad input
that names the problem and changes nothing."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from fleet.core.models import AuditEntry
from fleet.health.models import Finding
from fleet.inventory.models import Pool
from fleet.remediation.models import CircuitBreaker, Incident, RemediationPolicy, StepRun, TimelineEntry, Workflow
from fleet.remediation.services.engine import incident_advance, incident_lock

from .helpers import fault_and_intake, node_in, pool_for, tick

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet():
    cloud_pool, owned_pool = pool_for("cloud_dedicated"), pool_for("bare_metal_owned")
    cloud, owned = node_in(cloud_pool), node_in(owned_pool)
    fault_and_intake([cloud, owned])
    return {"cloud": Incident.objects.get(node=cloud), "owned": Incident.objects.get(node=owned),
            "cloud_pool": cloud_pool, "owned_pool": owned_pool}


def _ids(response):
    assert response.status_code == 200, response.content
    return sorted(row["id"] for row in response.json()["results"])


def _error(response, status, code=None):
    assert response.status_code == status, response.content
    error = response.json()["error"]
    if code:
        assert error["code"] == code, error
    return error


def test_incident_filters(viewer_api, fleet):
    cloud, owned = fleet["cloud"], fleet["owned"]
    url = "/api/v1/incidents/"
    assert _ids(viewer_api.get(url)) == sorted([cloud.pk, owned.pk])
    assert _ids(viewer_api.get(url, {"pool": fleet["owned_pool"].pk})) == [owned.pk]
    assert _ids(viewer_api.get(url, {"provider": cloud.provider_id})) == [cloud.pk]
    assert _ids(viewer_api.get(url, {"party": "provider"})) == [cloud.pk]
    assert _ids(viewer_api.get(url, {"party": "hardware_vendor"})) == [owned.pk]
    assert _ids(viewer_api.get(url, {"cause": "xid"})) == sorted([cloud.pk, owned.pk])
    assert _ids(viewer_api.get(url, {"cause": "manual"})) == []
    assert _ids(viewer_api.get(url, {"state": "running"})) == sorted([cloud.pk, owned.pk])
    assert _ids(viewer_api.get(url, {"open": "false"})) == []
    assert _ids(viewer_api.get(url, {"workflow": "owned-reboot"})) == [owned.pk]
    error = _error(viewer_api.get(url, {"party": "santa"}), 400)
    assert "party" in error["fields"]


def test_incident_detail_shows_the_boundary_row_policy_plan_and_findings(viewer_api, fleet):
    incident = fleet["owned"]
    detail = viewer_api.get(f"/api/v1/incidents/{incident.pk}/").json()
    assert detail["boundary"] == {"delivery_form": "bare_metal_owned", "layer": "hardware",
                                  "responsible_party": "hardware_vendor", "responsibility_source": "default"}
    assert detail["policy"]["priority"] == 70 and detail["policy"]["version"] == 1
    assert [step["kind"] for step in detail["plan"]] == ["cordon", "drain", "collect_evidence", "reboot",
                                                         "run_diagnostics", "verify", "return_to_service"]
    assert detail["plan"][0]["current"] and detail["plan"][0]["status"] == "pending"
    assert detail["findings"][0]["rule"] == "xid" and detail["findings"][0]["trigger"]
    assert detail["workflow"] == "owned-reboot" and detail["cause"] == "xid:79"
    finding = Finding.objects.get(pk=detail["findings"][0]["id"])
    assert detail["findings"][0]["summary"] == finding.summary
    chinese = viewer_api.get(f"/api/v1/incidents/{incident.pk}/", HTTP_ACCEPT_LANGUAGE="zh-CN").json()
    assert "上出现 Xid 79：GPU 已掉出总线" in chinese["findings"][0]["summary"]  # the request's language
    timeline = viewer_api.get(f"/api/v1/incidents/{incident.pk}/timeline/").json()
    assert [entry["kind"] for entry in timeline] == ["opened", "started"]
    assert "policy #70" in timeline[0]["message"]


def test_viewers_cannot_act_and_nothing_changes(viewer_api, fleet):
    incident = fleet["owned"]
    tick(incident, at=timezone.now())
    before = TimelineEntry.objects.count()
    for name in ("approve", "complete", "fail", "retry", "skip", "cancel"):
        response = viewer_api.post(f"/api/v1/incidents/{incident.pk}/{name}/", {"step_index": 0, "note": "x"})
        _error(response, 403)
    assert TimelineEntry.objects.count() == before
    assert StepRun.objects.get(incident=incident, step_index=0).status == "waiting"


def test_an_operator_completes_the_current_step_and_steps_out_of_order_are_refused(operator_api, fleet):
    incident = fleet["owned"]
    tick(incident, at=timezone.now())
    url = f"/api/v1/incidents/{incident.pk}/complete/"
    error = _error(operator_api.post(url, {"note": "cordoned"}), 400)
    assert "step_index" in error["fields"]
    error = _error(operator_api.post(url, {"step_index": 2, "note": "drained"}), 409, "step_out_of_order")
    assert "step_index" in error["fields"] and "at step 0 (cordon)" in error["message"]
    assert StepRun.objects.get(incident=incident, step_index=0).status == "waiting"
    response = operator_api.post(url, {"step_index": 0, "note": "cordoned in Slurm", "output": {"by": "slurm"}})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["current_step"] == 1 and body["steps"][0]["status"] == "done"
    assert body["steps"][0]["output"]["by"] == "slurm"
    assert AuditEntry.objects.filter(object_type="remediation.incident", note__startswith="complete").exists()
    # Completing it again is out of order now.
    _error(operator_api.post(url, {"step_index": 0}), 409, "step_out_of_order")


def test_approval_is_refused_for_a_step_that_does_not_wait_for_it(operator_api, fleet):
    incident = fleet["owned"]
    error = _error(operator_api.post(f"/api/v1/incidents/{incident.pk}/approve/", {"step_index": 0}), 409,
                   "not_awaiting_approval")
    assert "step_index" in error["fields"]


def test_approving_a_destructive_step_as_operator_and_admin(operator_api, admin_api, viewer_api, fleet):
    incident = fleet["cloud"]
    incident.current_step = 7  # retire
    incident.save()
    with transaction.atomic():
        incident_advance(incident_lock(incident.pk), now=timezone.now())
    run = StepRun.objects.get(incident=incident, step_index=7)
    assert run.status == "awaiting_approval"
    _error(viewer_api.post(f"/api/v1/incidents/{incident.pk}/approve/", {"step_index": 7}), 403)
    response = admin_api.post(f"/api/v1/incidents/{incident.pk}/approve/", {"step_index": 7, "note": "ok"})
    assert response.status_code == 200, response.content
    run.refresh_from_db()
    assert run.approved_by == "admin-user"
    assert TimelineEntry.objects.filter(incident=incident, kind="approved", actor_label="admin-user").exists()


def test_open_a_manual_incident_from_the_node_page(operator_api, viewer_api, fleet):
    node = node_in(fleet["owned_pool"])
    url = "/api/v1/incidents/"
    _error(viewer_api.post(url, {"node": node.pk, "workflow": "operator-reboot"}), 403)
    error = _error(operator_api.post(url, {"node": node.pk, "workflow": "no-such-thing"}), 400)
    assert "workflow" in error["fields"]
    response = operator_api.post(url, {"node": node.pk, "workflow": "operator-reboot", "note": "flaky"})
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["cause_kind"] == "manual" and body["opened_by"] == "operator-user"
    # The pool's one slot is taken by the Xid incident, and that incident is on this node: an operator's own
    # action starts at once all the same, and says what it runs alongside.
    assert body["state"] == "running", body
    started = TimelineEntry.objects.get(incident_id=body["id"], kind="started")
    assert "at once: an operator's action" in started.message
    _error(operator_api.post(url, {"node": node.pk, "workflow": "operator-reboot"}), 409, "incident_exists")
    assert Incident.objects.filter(node=node).count() == 1
    listed = operator_api.get(f"/api/v1/nodes/{node.pk}/incidents/").json()
    assert [row["key"] for row in listed] == [body["key"]]


def test_escalate_and_cancel(operator_api, fleet):
    incident = fleet["owned"]
    tick(incident, at=timezone.now())
    error = _error(operator_api.post(f"/api/v1/incidents/{incident.pk}/escalate/", {"workflow": "nope"}), 400)
    assert "workflow" in error["fields"]
    response = operator_api.post(f"/api/v1/incidents/{incident.pk}/escalate/", {"workflow": "owned-rma",
                                                                                 "note": "known bad"})
    assert response.status_code == 200, response.content
    assert response.json()["workflow"] == "owned-rma"
    response = operator_api.post(f"/api/v1/incidents/{incident.pk}/cancel/", {"note": "handled by hand"})
    assert response.json()["state"] == "cancelled"
    _error(operator_api.post(f"/api/v1/incidents/{incident.pk}/cancel/", {"note": "again"}), 409, "incident_closed")


def test_workflows_are_validated_and_a_running_one_cannot_change(operator_api, fleet):
    url = "/api/v1/workflows/"
    bad = {"slug": "mine", "name": "Mine", "steps": [{"kind": "cordon"}, {"kind": "teleport"},
                                                      {"kind": "verify", "params": {"target": "moon"}},
                                                      {"kind": "reboot", "on_failure": {"action": "escalate",
                                                                                       "workflow": "nope"}}]}
    error = _error(operator_api.post(url, bad, format="json"), 400)
    assert {"steps[1].kind", "steps[2].params.target", "steps[3].on_failure.workflow"} <= set(error["fields"])
    assert not Workflow.objects.filter(slug="mine").exists()
    good = {"slug": "mine", "name": "Mine", "steps": [{"kind": "cordon", "timeout_s": 60},
                                                       {"kind": "reboot", "on_failure": {"action": "retry",
                                                                                        "max_attempts": 3,
                                                                                        "backoff_s": 30}}]}
    response = operator_api.post(url, good, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["steps"][1]["on_failure"] == {"action": "retry", "max_attempts": 3, "backoff_s": 30}

    running = Workflow.objects.get(slug="owned-reboot")
    error = _error(operator_api.patch(f"{url}owned-reboot/", {"steps": [{"kind": "reboot"}]}, format="json"), 409,
                   "workflow_in_use")
    assert fleet["owned"].key in error["message"] and "steps" in error["fields"]
    running.refresh_from_db()
    assert running.version == 1 and len(running.steps) == 7
    # A field that does not change the steps is fine.
    assert operator_api.patch(f"{url}owned-reboot/", {"description": "ours"}, format="json").status_code == 200
    assert AuditEntry.objects.filter(object_type="remediation.workflow").count() == 2


def test_policies_are_versioned_and_audited(operator_api, viewer_api):
    url = "/api/v1/remediation-policies/"
    assert viewer_api.get(f"{url}version/").json() == {"version": 1, "policies": RemediationPolicy.objects.count()}
    error = _error(operator_api.post(url, {"name": "x", "priority": 5, "xid_actions": ["pray"],
                                           "rules": ["nope"], "workflow": "owned-rma"}, format="json"), 400)
    assert {"xid_actions.0", "rules"} <= set(error["fields"])
    response = operator_api.post(url, {"name": "Pool A: Xid 79 → RMA at once", "priority": 5, "xid_codes": [79],
                                       "workflow": "owned-rma"}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["changed_in_version"] == 2
    policy_id = response.json()["id"]
    operator_api.patch(f"{url}{policy_id}/", {"enabled": False}, format="json")
    assert viewer_api.get(f"{url}version/").json()["version"] == 3
    notes = list(AuditEntry.objects.filter(object_type="remediation.remediationpolicy").values_list("note",
                                                                                                     flat=True))
    assert sorted(notes) == ["remediation policy table v2", "remediation policy table v3"]
    assert operator_api.delete(f"{url}{policy_id}/").status_code == 405


def test_pool_settings(operator_api, viewer_api, fleet):
    pool = fleet["owned_pool"]
    url = f"/api/v1/pool-remediation/{pool.pk}/"
    assert viewer_api.get(url).json()["max_concurrent_replacements"] == 1
    error = _error(operator_api.patch(url, {"executors": ["ipmi"]}, format="json"), 400)
    assert "executors" in error["fields"] and "manual" in str(error["fields"]) and "ipmi" in str(error["fields"])
    error = _error(operator_api.patch(url, {"maintenance_windows": [{"days": ["sat"], "start": "25:00",
                                                                     "duration_minutes": 60}]}, format="json"), 400)
    assert "maintenance_windows[0].start" in error["fields"]
    response = operator_api.patch(url, {"max_concurrent_replacements": 3, "dry_run": True, "maintenance_windows": [
        {"days": ["sat", "sun"], "start": "02:00", "duration_minutes": 240, "timezone": "Asia/Shanghai"}]},
        format="json")
    assert response.status_code == 200, response.content
    assert Pool.objects.get(pk=pool.pk).max_concurrent_replacements == 3
    overview = viewer_api.get("/api/v1/pool-remediation/overview/").json()
    row = next(r for r in overview if r["pool"] == pool.pk)
    assert row["active_nodes"] == 1 and row["dry_run"] and row["breaker_state"] == "closed"
    assert _error(viewer_api.get("/api/v1/pool-remediation/999999/"), 404)


def test_breaker_thresholds_and_reset(operator_api, viewer_api, fleet):
    breaker = CircuitBreaker.objects.get(pool=fleet["cloud_pool"])
    url = f"/api/v1/circuit-breakers/{breaker.pk}/"
    error = _error(operator_api.patch(url, {"threshold_pct": 0}, format="json"), 400)
    assert "threshold_pct" in error["fields"]
    assert operator_api.patch(url, {"threshold_pct": 30, "window_s": 600}, format="json").status_code == 200
    _error(viewer_api.post(f"{url}reset/", {"note": "x"}), 403)
    error = _error(operator_api.post(f"{url}reset/", {}), 400)
    assert "note" in error["fields"]
    assert operator_api.post(f"{url}reset/", {"note": "nothing to reset"}).json()["state"] == "closed"


def test_overrides(operator_api, viewer_api, fleet):
    finding = Finding.objects.get(node=fleet["owned"].node, rule__slug="xid")
    url = "/api/v1/overrides/"
    _error(viewer_api.post(url, {"kind": "acknowledge", "finding": finding.pk, "reason": "seen"}), 403)
    error = _error(operator_api.post(url, {"kind": "snooze", "finding": finding.pk, "reason": "later"}), 400)
    assert "until" in error["fields"]
    far = (timezone.now() + timedelta(days=60)).isoformat()
    error = _error(operator_api.post(url, {"kind": "snooze", "finding": finding.pk, "reason": "later",
                                           "until": far}), 400)
    assert "until" in error["fields"]
    error = _error(operator_api.post(url, {"kind": "acknowledge", "reason": "seen"}), 400)
    assert "finding" in error["fields"]
    response = operator_api.post(url, {"kind": "acknowledge", "finding": finding.pk, "reason": "on it"})
    assert response.status_code == 201, response.content
    override_id = response.json()["id"]
    assert response.json()["active"]
    revoked = operator_api.post(f"{url}{override_id}/revoke/").json()
    assert revoked["revoked_at"] and not revoked["active"]
    intake = viewer_api.get("/api/v1/finding-intakes/", {"finding": finding.pk}).json()["results"]
    assert intake[0]["outcome"] == "opened" and intake[0]["incident_key"] == fleet["owned"].key


def test_evidence_and_executors(viewer_api, operator_api, fleet):
    incident = fleet["owned"]
    _error(viewer_api.get(f"/api/v1/incidents/{incident.pk}/evidence/"), 404)
    now = timezone.now()
    for index in range(2):
        tick(incident, at=now)
        operator_api.post(f"/api/v1/incidents/{incident.pk}/complete/", {"step_index": index})
    tick(incident, at=now)  # collect_evidence completes by itself
    bundle = viewer_api.get(f"/api/v1/incidents/{incident.pk}/evidence/")
    assert bundle.status_code == 200
    assert bundle.json()["node"]["hostname"] == incident.node.hostname
    text = viewer_api.get(f"/api/v1/incidents/{incident.pk}/evidence/", {"format": "text"})
    assert text["Content-Type"].startswith("text/plain") and incident.node.hostname in text.content.decode()
    executors = viewer_api.get("/api/v1/executors/").json()
    manual = next(row for row in executors if row["name"] == "manual")
    assert "rma" in manual["kinds"]


@pytest.mark.parametrize("action", ["approve", "complete", "fail", "retry", "skip", "escalate", "cancel", "note"])
def test_an_incident_id_that_is_not_a_number_is_a_404(operator_api, action):
    response = operator_api.post(f"/api/v1/incidents/null/{action}/", {}, format="json")
    assert response.status_code == 404
    assert response.json()["error"]["code"]


def test_a_node_id_beyond_64_bits_is_a_404(operator_api):
    response = operator_api.patch("/api/v1/node-remediation/54757769345512545557228677437407100928/", {},
                                  format="json")
    assert response.status_code == 404
