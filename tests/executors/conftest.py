import pytest

from fleet.telemetry.services.enrollment import enrollment_token_create, node_enroll
from tests.factories import PoolFactory, ProviderFactory, UserFactory
from tests.telemetry.conftest import Agent


@pytest.fixture
def enroll(db):
    """Enrol a node and return its HTTP identity (credential + a client that posts reports)."""
    operator = UserFactory(username="enroller", role="operator")
    provider = ProviderFactory(kind="own", cloud="")
    pool = PoolFactory(provider=provider, delivery_form="bare_metal_owned")
    _, key = enrollment_token_create(actor=operator, name="t", provider=provider, pool=pool,
                                     delivery_form="bare_metal_owned", billing_mode="reserved")

    def make(machine_id: str = "0123456789abcdef", hostname: str = "gpu-a") -> Agent:
        enrollment = node_enroll(token_key=key, facts={"machine_id": machine_id, "hostname": hostname,
                                                       "gpu_count": 8})
        return Agent(enrollment.node.pk, enrollment.credential)

    return make
