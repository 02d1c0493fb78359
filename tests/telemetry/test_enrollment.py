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
