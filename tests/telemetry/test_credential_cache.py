"""The agent credential cache (Redis, real server): a report costs no credential query while the entry lives, and
whatever revokes a credential or gives its node work takes effect on the very next request."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from fleet.inventory.models import Node
from fleet.telemetry.models import NodeCredential
from fleet.telemetry.services import credentials, stream
from fleet.telemetry.services.enrollment import node_enroll
from tests.processes import RedisServer
from tests.telemetry.reports import ReportBuilder

pytestmark = pytest.mark.django_db


@pytest.fixture
def cache_on(tmp_path):
    with RedisServer(tmp_path / "redis") as server, override_settings(AGENT_CREDENTIAL_CACHE_S=30,
                                                                       INGEST_QUEUE_URL=server.url):
        stream.redis_client.cache_clear()
        credentials.cache_health.reset()
        yield server
    stream.redis_client.cache_clear()
    credentials.cache_health.reset()


def _credential_queries(agent, builder) -> tuple[int, int]:
    table = NodeCredential._meta.db_table
    with CaptureQueriesContext(connection) as queries:
        response = agent.send(builder.report())
    return response.status_code, sum(1 for q in queries.captured_queries if table in q["sql"])


def test_a_known_credential_is_read_from_the_database_once(cache_on, enroll):
    agent = enroll()
    builder = ReportBuilder(agent.node_id)
    assert agent.send(builder.report(with_inventory=True)).status_code == 200
    assert _credential_queries(agent, builder) == (200, 0)
    assert _credential_queries(agent, builder) == (200, 0)


def test_re_enrolment_revokes_the_old_credential_at_once(cache_on, enroll, enrollment_token):
    agent = enroll()
    builder = ReportBuilder(agent.node_id)
    assert agent.send(builder.report(with_inventory=True)).status_code == 200  # now cached
    node_enroll(token_key=enrollment_token, credential=agent.credential,
                facts={"machine_id": "0123456789abcdef", "hostname": "gpu-a", "gpu_count": 8})
    response = agent.send(builder.report())
    assert response.status_code == 401
    assert "revoked" in response.json()["error"]["message"]


def test_revocation_in_the_admin_and_node_deletion_take_effect_at_once(cache_on, enroll):
    agent, other = enroll(), enroll(machine_id="fedcba9876543210", hostname="gpu-b")
    builders = [ReportBuilder(agent.node_id), ReportBuilder(other.node_id)]
    for a, b in zip((agent, other), builders, strict=True):
        assert a.send(b.report(with_inventory=True)).status_code == 200
        assert _credential_queries(a, b) == (200, 0)
    credential = NodeCredential.objects.get(node_id=agent.node_id)
    credential.revoked_at = timezone.now()
    credential.save()  # what the admin does
    assert agent.send(builders[0].report()).status_code == 401
    Node.objects.filter(pk=other.node_id).delete()
    assert other.send(builders[1].report()).status_code == 401


def test_a_lookup_that_raced_a_revocation_cannot_put_the_old_answer_back(cache_on, enroll):
    """The row was read live before the revocation committed; the lookup writes the cache after both drops."""
    from fleet.telemetry.secrets import hash_secret

    agent = enroll()
    builder = ReportBuilder(agent.node_id)
    assert agent.send(builder.report(with_inventory=True)).status_code == 200
    key_hash = hash_secret(agent.credential)
    stream.redis_client().delete(f"fleet:credential:{key_hash}")
    missed, generation = credentials.credential_cached(key_hash)  # the racing lookup misses the cache...
    assert missed is None
    live = (NodeCredential.objects.get(node_id=agent.node_id).pk, agent.node_id, None, "", False)  # ...reads it live
    credential = NodeCredential.objects.get(node_id=agent.node_id)
    credential.revoked_at = timezone.now()
    credential.save()
    credentials.credential_cache_put(key_hash, live, generation)  # and writes the cache after the revocation
    assert credentials.credential_cached(key_hash)[0] is None
    assert agent.send(builder.report()).status_code == 401
    # Without a change in between, the same sequence caches the row.
    other = enroll(machine_id="fedcba9876543210", hostname="gpu-b")
    other_hash = hash_secret(other.credential)
    stream.redis_client().delete(f"fleet:credential:{other_hash}")
    _, generation = credentials.credential_cached(other_hash)
    credentials.credential_cache_put(other_hash, (1, other.node_id, None, "", False), generation)
    assert credentials.credential_cached(other_hash)[0] == (1, other.node_id, None, "", False)


def test_an_entry_outlives_the_agents_interval(cache_on, enroll, settings):
    """At the default TTL a node reporting every 30 s finds its entry on the next report (at 30 s it had expired)."""
    from fleet.telemetry.secrets import hash_secret

    settings.AGENT_CREDENTIAL_CACHE_S = 300
    agent = enroll()
    assert agent.send(ReportBuilder(agent.node_id).report(with_inventory=True)).status_code == 200
    assert 150 <= stream.redis_client().ttl(f"fleet:credential:{hash_secret(agent.credential)}") <= 300


def test_entries_written_together_expire_apart(cache_on, enroll, settings):
    """A fleet cached all at once (after a restart) must not miss all at once a TTL later."""
    from fleet.telemetry.secrets import hash_secret

    settings.AGENT_CREDENTIAL_CACHE_S = 300
    ttls = set()
    for index in range(12):
        agent = enroll(machine_id=f"{index:016x}", hostname=f"gpu-{index}")
        assert agent.send(ReportBuilder(agent.node_id).report(with_inventory=True)).status_code == 200
        ttls.add(stream.redis_client().ttl(f"fleet:credential:{hash_secret(agent.credential)}"))
    assert len(ttls) > 3 and min(ttls) >= 150 and max(ttls) <= 300


def test_a_new_agent_action_is_seen_on_the_next_report(cache_on, enroll):
    from fleet.executors.models import AgentAction

    agent = enroll()
    builder = ReportBuilder(agent.node_id)
    assert agent.send(builder.report(with_inventory=True)).status_code == 200
    assert "actions" not in agent.send(builder.report()).json()  # cached: nothing waiting
    now = timezone.now()
    AgentAction.objects.create(node_id=agent.node_id, kind="reboot", not_after=now + timedelta(minutes=10),
                               created_at=now)
    body = agent.send(builder.report()).json()
    assert [a["kind"] for a in body.get("actions", [])] == ["reboot"]


def test_agents_authenticate_from_the_database_while_redis_is_down(cache_on, enroll):
    agent = enroll()
    builder = ReportBuilder(agent.node_id)
    assert agent.send(builder.report(with_inventory=True)).status_code == 200
    cache_on.stop()
    assert _credential_queries(agent, builder) == (200, 1)
    NodeCredential.objects.filter(node_id=agent.node_id).update(revoked_at=timezone.now())
    assert agent.send(builder.report()).status_code == 401


def test_a_cold_cache_is_warmed_with_every_live_credential(cache_on, enroll):
    """Redis lost its data: the warm-up caches every live credential (in chunks), never a revoked one."""
    from fleet.telemetry.secrets import hash_secret

    agents = [enroll(machine_id=f"{index:016x}", hostname=f"gpu-{index}") for index in range(3)]
    revoked = NodeCredential.objects.get(node_id=agents[2].node_id)
    revoked.revoked_at = timezone.now()
    revoked.save()
    stream.redis_client().flushdb()
    assert credentials.credential_cache_warm(chunk=1) == 2
    hashes = [hash_secret(agent.credential) for agent in agents]
    assert [credentials.credential_cached(h)[0] is not None for h in hashes] == [True, True, False]
    assert _credential_queries(agents[0], ReportBuilder(agents[0].node_id)) == (200, 0)


def test_the_writer_warms_the_cache_when_it_creates_the_stream(cache_on, enroll, settings):
    """A new consumer group means a new stream: the queue's first start, or a Redis that lost its data."""
    from fleet.telemetry.secrets import hash_secret
    from fleet.telemetry.services.writer import Writer

    settings.INGEST_QUEUE = True
    agent = enroll()
    stream.redis_client().flushdb()
    Writer(consumer="w1", block_ms=10).ensure_group()
    assert credentials.credential_cached(hash_secret(agent.credential))[0] is not None
    stream.redis_client().delete(f"fleet:credential:{hash_secret(agent.credential)}")
    Writer(consumer="w2", block_ms=10).ensure_group()  # the group exists: nothing to warm
    assert credentials.credential_cached(hash_secret(agent.credential))[0] is None
