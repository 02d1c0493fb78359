"""Small database helpers shared by the apps."""

from contextlib import contextmanager

from django.db import connection, transaction


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
