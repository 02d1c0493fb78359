import gzip
import json

import pytest
from rest_framework.test import APIClient

from fleet.telemetry.services.enrollment import enrollment_token_create, node_enroll
from tests.factories import PoolFactory, ProviderFactory, UserFactory


@pytest.fixture
def enrollment_token(db):
    operator = UserFactory(username="enroller", role="operator")
    provider = ProviderFactory(slug="aws", cloud="aws")
    pool = PoolFactory(provider=provider)
    _, key = enrollment_token_create(actor=operator, name="t", provider=provider, pool=pool,
                                     delivery_form="cloud_dedicated", billing_mode="spot", labels={"team": "ml"})
    return key


class Agent:
    """A node's HTTP identity: its credential and a client that posts reports like the real agent."""

    def __init__(self, node_id: int, credential: str):
        self.node_id = node_id
        self.credential = credential
        self.client = APIClient()
        self.client.credentials(HTTP_AUTHORIZATION=f"Node {credential}")

    def send(self, *reports, compress: bool = False):
        body = json.dumps({"reports": list(reports)}).encode()
        headers = {}
        if compress:
            body = gzip.compress(body)
            headers["HTTP_CONTENT_ENCODING"] = "gzip"
        return self.client.generic("POST", "/api/v1/agent/reports", body, content_type="application/json",
                                   **headers)


@pytest.fixture
def enroll(enrollment_token):
    def make(machine_id: str = "0123456789abcdef", hostname: str = "gpu-a") -> Agent:
        enrollment = node_enroll(token_key=enrollment_token,
                                 facts={"machine_id": machine_id, "hostname": hostname, "gpu_count": 8})
        return Agent(enrollment.node.pk, enrollment.credential)

    return make
