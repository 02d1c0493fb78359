"""Small database helpers shared by the apps."""

from contextlib import contextmanager

from django.db import connection, transaction
from django.db.models import Func


class ContentKey(Func):
    """A column's content key for a generated column: the SHA-256 (hex) of its text on PostgreSQL, NULL on SQLite
    (which has no hash function; readers then treat every row as distinct).

    A cryptographic hash, because the content comes from agents: a key another node's content could be made to
    collide with would let one node's report stand in for another's. The SQL function is created by migration
    telemetry.0012."""

    function = "fleet_content_key"

    def as_postgresql(self, compiler, connection, **extra_context):
        return super().as_sql(compiler, connection, template="fleet_content_key((%(expressions)s)::text)",
                              **extra_context)

    def as_sql(self, compiler, connection, **extra_context):
        return "NULL", []


@contextmanager
def without_jit():
    """Run the queries inside without PostgreSQL's JIT compiler (other databases: unchanged).

    A list whose ORDER BY holds correlated subqueries (the nodes list's worst severity per node) has a high
    planner cost across 10,000 rows, which turns JIT on; compiling then takes ~300 ms for a query that runs in
    ~60 ms without it (bench/node_list.py). `SET LOCAL` ends with the transaction, so nothing else is affected.
    """
    if connection.vendor != "postgresql":
        yield
        return
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL jit = off")
        yield
