"""Schemathesis over the whole OpenAPI schema, as an admin: no generated request, valid or not, gets a 5xx.

Every operation gets FLEET_FUZZ_EXAMPLES schema-valid and as many schema-violating requests (default 8 + 8,
about a minute on PostgreSQL). Hypothesis runs derandomized without an example database, so the same requests
are sent on every run; raise FLEET_FUZZ_EXAMPLES for a deeper search. Path parameters point at seeded rows,
so updates and deletes reach real objects. Each request runs in a savepoint that is rolled back, so no request
sees what an earlier one did and a database error cannot poison the ones after it.

The agent endpoints (`/api/v1/agent/…`) are left out: they take a node credential, not a user's token, so
from here they answer every request with a 401 or 403; fuzzing the agent protocol needs enrolled nodes.
"""

import os
import re
import sys

import pytest
import schemathesis
from django.core.signals import got_request_exception, request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections, transaction
from django.urls import resolve
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.generation.modes import GenerationMode

from fleet.accounts.services import api_token_create
from fleet.inventory.models import Node
from fleet.telemetry.services.enrollment import enrollment_token_create
from tests.billing.factories import (
    BillingPlanFactory,
    CheckpointPolicyFactory,
    CostProfileFactory,
    PreemptionRecordFactory,
    PriceListEntryFactory,
)
from tests.factories import BaselineFactory, GPUFactory, NodeFactory, PoolFactory, SiteFactory, UserFactory
from tests.health.factories import T0, ChangeLogEntryFactory, EventFactory, GPUStatusFactory, NodeStatusFactory

pytestmark = pytest.mark.django_db

EXAMPLES = int(os.environ.get("FLEET_FUZZ_EXAMPLES", "8"))
EXCLUDED = re.compile(r"^/api/v1/agent/")
PARAM = re.compile(r"\{(\w+)\}")


@pytest.fixture
def wsgi_app():
    # Django's test client keeps the test's connection (and its transaction) across requests the same way.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield get_wsgi_application()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def fleet_rows():
    admin = UserFactory(username="fuzz-admin", role="admin")
    _, key = api_token_create(user=admin, name="fuzz", write_enabled=True)
    UserFactory(username="fuzz-viewer")
    pool = PoolFactory()
    site = SiteFactory(provider=pool.provider)
    node = NodeFactory(provider=pool.provider, pool=pool, site=site)
    gpu = GPUFactory(node=node)
    NodeStatusFactory(node=node)
    GPUStatusFactory(gpu=gpu)
    EventFactory(node=node, pci_bus_id=gpu.pci_bus_id)
    ChangeLogEntryFactory(node=node)
    BaselineFactory(pool=pool)
    BillingPlanFactory(pool=pool)
    PriceListEntryFactory(provider=pool.provider)
    CostProfileFactory(provider=pool.provider)
    CheckpointPolicyFactory(pool=pool)
    PreemptionRecordFactory(node=NodeFactory(provider=pool.provider, pool=pool, billing_mode="spot"), at=T0)
    enrollment_token_create(actor=admin, name="fuzz", provider=pool.provider, pool=pool,
                            delivery_form="cloud_dedicated", billing_mode="spot", labels={"team": "ml"})
    return {"Authorization": f"Token {key}"}


def _existing_path_parameters(path: str) -> dict:
    """Point each path parameter at a seeded row of the model the view serves (a node for `node_id`)."""
    names = PARAM.findall(path)
    if not names:
        return {}
    view = getattr(resolve(PARAM.sub("1", path)).func, "cls", None)
    queryset = getattr(view, "queryset", None)
    lookup = getattr(view, "lookup_field", "pk")
    values = {}
    for name in names:
        if name == "node_id" or queryset is None:
            value = Node.objects.values_list("pk", flat=True).first()
        else:
            value = queryset.model._default_manager.values_list(lookup, flat=True).first()
        if value is None:
            return {}
        values[name] = value
    return values


def _fuzz(strategy, *, label: str, headers: dict, failures: list, errors: list) -> int:
    """Send every example of `strategy`, each in a rolled-back savepoint; record the 5xx. Returns the count."""
    sent = 0

    @given(case=strategy)
    @settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])
    def send(case):
        nonlocal sent
        sent += 1
        errors.clear()
        with transaction.atomic():
            response = case.call(headers=headers)
            transaction.set_rollback(True)
        if response.status_code >= 500:
            failures.append(f"{label}: {response.status_code} {errors[:1]}\n    "
                            f"{case.as_curl_command(headers={'Authorization': 'Token …'})}")

    try:
        send()
    except Unsatisfiable:  # nothing to vary (e.g. no parameters to break in negative mode)
        pass
    return sent


def test_no_generated_request_gets_a_server_error(wsgi_app, fleet_rows):
    schema = schemathesis.openapi.from_wsgi("/api/schema/", wsgi_app, headers=fleet_rows)
    failures, errors = [], []

    def record(sender, request=None, **kwargs):
        errors.append(repr(sys.exc_info()[1])[:300])

    got_request_exception.connect(record, weak=False)
    sent = 0
    try:
        operations = [result.ok() for result in schema.get_all_operations()]
        # Deletes last, so a delete that slipped past the rollback could not starve the other operations.
        operations.sort(key=lambda op: op.method.upper() == "DELETE")
        for operation in operations:
            if EXCLUDED.match(operation.path):
                continue
            path_parameters = _existing_path_parameters(operation.path)
            modes = [GenerationMode.POSITIVE]
            if len(operation.query) or len(operation.body):
                # With the path pinned to real rows, an operation without these has nothing left to break.
                modes.append(GenerationMode.NEGATIVE)
            for mode in modes:
                strategy = operation.as_strategy(generation_mode=mode, path_parameters=path_parameters or None)
                sent += _fuzz(strategy, label=f"{operation.label} [{mode.value}]", headers=fleet_rows,
                              failures=failures, errors=errors)
    finally:
        got_request_exception.disconnect(record)
    assert sent > 500, sent
    assert not failures, f"{len(failures)} of {sent} requests got a server error:\n" + "\n".join(failures[:25])
