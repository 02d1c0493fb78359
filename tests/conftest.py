import pytest
from rest_framework.test import APIClient

from fleet.accounts.choices import Role
from fleet.accounts.services import api_token_create
from tests.clock import _now_marker, clock, pytest_configure  # noqa: F401 (a frozen or moved clock: tests/clock.py)
from tests.factories import UserFactory


@pytest.fixture
def api():
    return APIClient()


def _client_for(role: str) -> APIClient:
    user = UserFactory(username=f"{role}-user", role=role)
    client = APIClient()
    client.force_authenticate(user=user)
    client.user = user
    return client


@pytest.fixture
def viewer_api(db):
    return _client_for(Role.VIEWER)


@pytest.fixture
def operator_api(db):
    return _client_for(Role.OPERATOR)


@pytest.fixture
def admin_api(db):
    return _client_for(Role.ADMIN)


@pytest.fixture
def token_for(db):
    """Return (user, key) for a user of the given role holding a real API token."""

    def make(role: str = Role.OPERATOR, **kwargs):
        kwargs.setdefault("write_enabled", True)  # tokens are read-only unless asked for; these tests ask
        user = UserFactory(username=f"tok-{role}-{UserFactory._meta.model.objects.count()}", role=role)
        _, key = api_token_create(user=user, name="test", **kwargs)
        return user, key

    return make


@pytest.fixture
def history_days(db):
    """For tests that write history rows with the ORM: make sure their days have partitions (PostgreSQL)."""
    from fleet.telemetry.services import partitions

    def make(*moments):
        partitions.ensure_range(min(moments), max(moments))

    return make


@pytest.fixture(autouse=True)
def _clear_cache():
    from django.core.cache import cache

    from fleet.core import failopen, ratelimit

    cache.clear()
    # A dependency that failed in one test (a Redis the test stopped) must not be skipped in the next.
    ratelimit.store_health.reset()
    failopen.broker.reset()
    # History partitions created inside a test's transaction are gone after its rollback.
    from fleet.telemetry.services import partitions

    partitions.forget()
    yield
    # The test client runs requests in this thread: LocaleMiddleware leaves the last request's language active
    # (a server activates it anew per request), so the next test starts from the server's language again.
    from django.utils import translation

    translation.deactivate()


@pytest.fixture
def seeded_catalog(transactional_db):
    """Transactional tests end with a flush that also empties what data migrations seeded (the rule catalog
    and the Xid policy table); put it back. (Serialized rollback would clash with the content types that
    the flush's post_migrate recreates.)"""
    from fleet.health.models import XidPolicy
    from fleet.health.services.catalog import rule_catalog_sync
    from fleet.health.xid_seed import seed_xid_policies

    rule_catalog_sync()
    seed_xid_policies(XidPolicy)


@pytest.fixture
def seeded_remediation(seeded_catalog):
    """Likewise for the remediation workflows and policies that migration seeded."""
    from fleet.remediation.models import RemediationPolicy, Workflow
    from fleet.remediation.seed import seed_remediation

    seed_remediation(Workflow, RemediationPolicy)


def _reseed() -> None:
    """Put back what the data migrations seeded (the rule catalog, the Xid policy table, the remediation workflows
    and policies), as the seeded_* fixtures do."""
    from fleet.core.models import AuditEntry
    from fleet.health.models import XidPolicy
    from fleet.health.services.catalog import rule_catalog_sync
    from fleet.health.xid_seed import seed_xid_policies
    from fleet.remediation.models import RemediationPolicy, Workflow
    from fleet.remediation.seed import seed_remediation

    rule_catalog_sync()
    seed_xid_policies(XidPolicy)
    seed_remediation(Workflow, RemediationPolicy)
    # The live models audit what they create; a migration's seed leaves no entries (the flush had emptied them).
    AuditEntry.objects.all().delete()


@pytest.fixture(autouse=True, scope="session")
def _flush_survives_a_deadlock():
    """A transactional test ends with a flush (TRUNCATE). A real worker still finishing a task the test caused can
    deadlock with it on PostgreSQL; PostgreSQL then aborts one side, so trying the flush again is safe.

    The flush also empties what the data migrations seeded, which every other test may read: put it back, so a
    test finds the database as migrated whichever tests ran before it (CI's shuffled pass found tests that did
    not when a transactional test ran first)."""
    import time

    from django.core.management.base import CommandError
    from django.core.management.commands import flush

    original = flush.Command.handle

    def handle(self, **options):
        for attempt in range(5):
            try:
                result = original(self, **options)
            except CommandError as exc:
                if attempt == 4 or "deadlock" not in str(exc.__cause__).lower():
                    raise
                time.sleep(0.5)
            else:
                _reseed()
                return result

    flush.Command.handle = handle
    yield
    flush.Command.handle = original
