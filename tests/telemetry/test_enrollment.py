from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from fleet.inventory.models import Node
from fleet.telemetry.models import EnrollmentToken, NodeCredential
from tests.factories import ProviderFactory

pytestmark = pytest.mark.django_db

FACTS = {"machine_id": "a1b2c3d4e5f60718", "hostname": "gpu-01", "gpu_count": 8, "gpu_model": "NVIDIA H100",
         "cloud": {"provider": "aws", "instance_id": "i-0abc", "instance_type": "p5.48xlarge", "spot": True}}


def _enroll(token, facts=FACTS, **extra):
    return APIClient().post("/api/v1/agent/enroll", {"token": token, "facts": facts, **extra}, format="json")


def test_operator_creates_token_and_sees_key_and_install_command_once(operator_api):
    provider = ProviderFactory()
    response = operator_api.post("/api/v1/enrollment-tokens/", {
        "name": "rack 7", "provider": provider.pk, "delivery_form": "bare_metal_owned", "billing_mode": "reserved",
        "max_uses": 3, "labels": {"rack": "7"}}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["key"].startswith("fe_")
    assert body["install_command"] == (
        f"curl -fsSL http://testserver/install.sh | sudo sh -s -- --token {body['key']}")
    token = EnrollmentToken.objects.get()
    assert body["key"] not in (token.key_hash, token.prefix)
    listed = operator_api.get("/api/v1/enrollment-tokens/").json()["results"][0]
    assert "key" not in listed


def test_viewer_cannot_see_or_create_tokens(viewer_api):
    provider = ProviderFactory()
    assert viewer_api.get("/api/v1/enrollment-tokens/").status_code == 403
    response = viewer_api.post("/api/v1/enrollment-tokens/", {"name": "x", "provider": provider.pk,
                                                              "delivery_form": "cloud_shared"}, format="json")
    assert response.status_code == 403
    assert EnrollmentToken.objects.count() == 0


def test_token_bad_input_names_field(operator_api):
    provider = ProviderFactory()
    response = operator_api.post("/api/v1/enrollment-tokens/", {"name": "x", "provider": provider.pk,
                                                                "delivery_form": "moon", "max_uses": 0},
                                 format="json")
    assert response.status_code == 400
    assert {"delivery_form", "max_uses"} <= set(response.json()["error"]["fields"])


def test_enroll_creates_node_with_token_defaults(enrollment_token):
    response = _enroll(enrollment_token)
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["credential"].startswith("fn_")
    node = Node.objects.get(pk=body["node_id"])
    assert (node.hostname, node.billing_mode, node.delivery_form) == ("gpu-01", "spot", "cloud_dedicated")
    assert node.labels == {"team": "ml"}
    assert node.instance_type == "p5.48xlarge"
    assert node.expected_gpu_count == 8
    assert node.state == "active"
    assert body["credential"] not in NodeCredential.objects.get().key_hash


def test_reenrolling_same_machine_with_its_credential_reuses_node_and_revokes_old_credential(enrollment_token):
    first = _enroll(enrollment_token).json()
    second = _enroll(enrollment_token, {**FACTS, "hostname": "gpu-01-renamed"}, credential=first["credential"])
    assert second.status_code == 200
    assert second.json()["node_id"] == first["node_id"]
    assert Node.objects.count() == 1
    assert Node.objects.get().hostname == "gpu-01-renamed"
    old = APIClient()
    old.credentials(HTTP_AUTHORIZATION=f"Node {first['credential']}")
    response = old.post("/api/v1/agent/reports", {"reports": []}, format="json")
    assert response.status_code == 401
    assert "revoked" in response.json()["error"]["message"]


def test_expired_revoked_and_used_up_tokens_are_refused(enrollment_token, operator_api):
    token = EnrollmentToken.objects.get()
    token.max_uses = 1
    token.save()
    assert _enroll(enrollment_token).status_code == 201
    response = _enroll(enrollment_token, {**FACTS, "machine_id": "ffffffffffffffff"})
    assert response.status_code == 401
    assert Node.objects.count() == 1

    token.max_uses = None
    token.expires_at = timezone.now() - timedelta(minutes=1)
    token.save()
    assert _enroll(enrollment_token, {**FACTS, "machine_id": "eeeeeeeeeeeeeeee"}).status_code == 401

    token.expires_at = None
    token.save()
    assert operator_api.post(f"/api/v1/enrollment-tokens/{token.pk}/revoke/").status_code == 200
    assert _enroll(enrollment_token, {**FACTS, "machine_id": "dddddddddddddddd"}).status_code == 401
    assert _enroll("fe_unknown").status_code == 401


def test_enroll_bad_facts_name_the_field(enrollment_token):
    response = _enroll(enrollment_token, {"machine_id": "short", "hostname": "", "gpu_count": -1})
    assert response.status_code == 400
    fields = response.json()["error"]["fields"]
    assert {"facts.machine_id", "facts.hostname", "facts.gpu_count"} <= set(fields)
    assert Node.objects.count() == 0


# --- Re-enrolment of a known machine (issue 11, item 1) ---------------------------------------------------------
def _token(*, pool=None, provider=None, delivery_form="cloud_dedicated", **kwargs) -> str:
    from fleet.telemetry.services.enrollment import enrollment_token_create
    from tests.factories import PoolFactory, UserFactory

    provider = provider or ProviderFactory()
    pool = pool or PoolFactory(provider=provider)
    _, key = enrollment_token_create(actor=UserFactory(role="operator"), name="t", provider=provider, pool=pool,
                                     delivery_form=delivery_form, billing_mode="spot", **kwargs)
    return key


def _reports_work(credential: str) -> bool:
    """Whether the node credential still authenticates (an empty batch is a 400, a revoked credential a 401)."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Node {credential}")
    return client.post("/api/v1/agent/reports", {"reports": []}, format="json").status_code == 400


def _snapshot():
    node = Node.objects.get()
    return (node.hostname, node.instance_id, node.state,
            sorted(NodeCredential.objects.values_list("id", "revoked_at")),
            sorted(EnrollmentToken.objects.values_list("id", "uses")))


def test_a_token_for_another_pool_cannot_take_over_a_node(enrollment_token):
    victim = _enroll(enrollment_token).json()
    attacker_token = _token()  # a valid token, but for another provider and pool
    before = _snapshot()
    response = _enroll(attacker_token, {**FACTS, "hostname": "evil"})  # the victim's machine id is no secret
    assert response.status_code == 403, response.content
    assert response.json()["error"]["code"] == "token_scope_mismatch"
    assert "credential" not in response.json()
    assert _snapshot() == before  # nothing revoked, nothing renamed, the token not even counted
    assert _reports_work(victim["credential"])
    # Sending a credential does not help a token of the wrong scope either.
    assert _enroll(attacker_token, FACTS, credential=victim["credential"]).status_code == 403


def test_a_matching_token_without_proof_cannot_take_over_a_node(enrollment_token):
    victim = _enroll(enrollment_token).json()
    before = _snapshot()
    response = _enroll(enrollment_token, {**FACTS, "hostname": "evil"})
    assert response.status_code == 409, response.content
    assert response.json()["error"]["code"] == "already_enrolled"
    assert "allow-reenrollment" in response.json()["error"]["message"]
    assert _snapshot() == before
    assert _reports_work(victim["credential"])

    forged = _enroll(enrollment_token, {**FACTS, "hostname": "evil"}, credential="fn_" + "x" * 40)
    assert forged.status_code == 403
    assert forged.json()["error"]["code"] == "invalid_credential"
    assert _snapshot() == before


def test_another_nodes_credential_is_no_proof(enrollment_token):
    victim = _enroll(enrollment_token).json()
    other = _enroll(enrollment_token, {**FACTS, "machine_id": "ffffffffffffffff", "hostname": "gpu-02"}).json()
    response = _enroll(enrollment_token, {**FACTS, "hostname": "evil"}, credential=other["credential"])
    assert response.status_code == 403
    assert Node.objects.get(pk=victim["node_id"]).hostname == "gpu-01"
    assert _reports_work(victim["credential"]) and _reports_work(other["credential"])


def test_refused_reenrolments_are_counted(enrollment_token):
    from fleet.telemetry import metrics

    def refused(reason: str) -> float:
        for line in metrics.render().decode().splitlines():
            if line.startswith(f'fleet_enrollments_refused_total{{reason="{reason}"}}'):
                return float(line.split()[-1])
        return 0.0

    _enroll(enrollment_token)
    before = refused("not_proven")
    _enroll(enrollment_token)
    assert refused("not_proven") == before + 1


def test_an_operator_lets_a_node_that_lost_its_disk_enrol_again_once(enrollment_token, operator_api):
    from fleet.core.models import AuditEntry

    first = _enroll(enrollment_token).json()
    assert _enroll(enrollment_token).status_code == 409  # the reinstalled node has no credential

    allowed = operator_api.post(f"/api/v1/nodes/{first['node_id']}/allow-reenrollment/", {"minutes": 30},
                                format="json")
    assert allowed.status_code == 201, allowed.content
    until = timezone.datetime.fromisoformat(allowed.json()["expires_at"])
    assert timedelta(minutes=29) < until - timezone.now() <= timedelta(minutes=30)

    again = _enroll(enrollment_token, {**FACTS, "hostname": "gpu-01-reimaged"})
    assert again.status_code == 200, again.content
    assert again.json()["node_id"] == first["node_id"]
    assert not _reports_work(first["credential"])
    assert _reports_work(again.json()["credential"])
    notes = list(AuditEntry.objects.filter(object_id=str(first["node_id"])).values_list("note", flat=True))
    assert "re-enrolment allowed" in notes
    assert any(note.startswith("re-enrolled (operator approval") for note in notes)

    # Used up: the next enrolment without the new credential is refused again.
    assert _enroll(enrollment_token).status_code == 409


def test_an_approval_expires_and_can_be_withdrawn(enrollment_token, operator_api):
    from fleet.telemetry.models import ReenrollmentApproval

    node_id = _enroll(enrollment_token).json()["node_id"]
    url = f"/api/v1/nodes/{node_id}/allow-reenrollment/"
    assert operator_api.post(url, {}, format="json").status_code == 201
    assert operator_api.delete(url).status_code == 204
    assert _enroll(enrollment_token).status_code == 409

    assert operator_api.post(url, {}, format="json").status_code == 201
    ReenrollmentApproval.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert _enroll(enrollment_token).status_code == 409


def test_only_operators_allow_reenrolment_and_the_window_is_bounded(enrollment_token, viewer_api, operator_api):
    from fleet.telemetry.models import ReenrollmentApproval

    node_id = _enroll(enrollment_token).json()["node_id"]
    url = f"/api/v1/nodes/{node_id}/allow-reenrollment/"
    assert viewer_api.post(url, {}, format="json").status_code == 403
    for minutes in (0, 7 * 24 * 60 + 1, "soon", 1e30):
        response = operator_api.post(url, {"minutes": minutes}, format="json")
        assert response.status_code == 400, (minutes, response.content)
        assert "minutes" in response.json()["error"]["fields"]
    assert not ReenrollmentApproval.objects.exists()


def test_the_agent_sends_its_current_credential_when_it_enrols_again(enrollment_token, live_server, tmp_path):
    from fleet_agent.credentials import credential_path, load_enrollment
    from fleet_agent.enroll import enroll

    path = credential_path(tmp_path)
    first = enroll(live_server.url, enrollment_token, FACTS, credential_file=path)
    second = enroll(live_server.url, enrollment_token, {**FACTS, "hostname": "gpu-01b"}, credential_file=path)
    assert second.node_id == first.node_id
    assert second.credential != first.credential
    assert load_enrollment(path).credential == second.credential
    assert Node.objects.get().hostname == "gpu-01b"


# --- Enrolment tokens and the enrol body (issue 11, items 5 and 13) --------------------------------------------
def test_a_token_cannot_be_created_already_expired_or_with_absurd_limits(operator_api):
    provider = ProviderFactory()
    base = {"name": "x", "provider": provider.pk, "delivery_form": "cloud_shared"}
    for extra, field in (({"expires_at": (timezone.now() - timedelta(minutes=1)).isoformat()}, "expires_at"),
                         ({"max_uses": 1e30}, "max_uses"),
                         ({"labels": {"a\u0000b": "x"}}, "labels"),
                         ({"labels": {"rack": "a\u0000b"}}, "labels.rack")):
        response = operator_api.post("/api/v1/enrollment-tokens/", {**base, **extra}, format="json")
        assert response.status_code == 400, (extra, response.content)
        assert field in response.json()["error"]["fields"], response.json()
    assert EnrollmentToken.objects.count() == 0
    future = (timezone.now() + timedelta(hours=1)).isoformat()
    created = operator_api.post("/api/v1/enrollment-tokens/", {**base, "expires_at": future}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["billing_mode"] == "on_demand"  # the model's default, not a server error


def test_deeply_nested_enrol_body_is_a_400(enrollment_token):
    depth = 100_000
    body = f'{{"token": "{enrollment_token}", "facts": {"[" * depth + "]" * depth}}}'
    response = APIClient().generic("POST", "/api/v1/agent/enroll", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "parse_error"
    assert Node.objects.count() == 0
    nested = {"a": 1}
    for _ in range(200):
        nested = {"a": nested}
    response = _enroll(enrollment_token, {**FACTS, "cloud": {"provider": nested}})
    assert response.status_code == 400
    assert "facts.cloud.provider" in response.json()["error"]["fields"]
