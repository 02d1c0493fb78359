"""Small database helpers shared by the apps."""

from collections.abc import Sequence
from contextlib import contextmanager

from django.db import connection, transaction
from django.db.models import Func, Model


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


# Rows per statement: PostgreSQL takes at most 65,535 parameters in one statement.
_ROWS_UPDATE_MAX_PARAMS = 60000


def rows_update(model: type[Model], objs: Sequence[Model], fields: Sequence[str]) -> int:
    """Write `fields` of each of `objs` (rows that exist) in one statement per few thousand rows; the row count.

    What `QuerySet.bulk_update` does, without its cost on PostgreSQL: it builds a `CASE WHEN pk = … THEN …` per
    field and row, which takes Django tens of milliseconds to compile for a dozen rows of a wide model and
    PostgreSQL time quadratic in the rows. Here each row is one tuple of an `UPDATE … FROM (VALUES …)`, every
    value cast to its column's type. Like `bulk_update`, it neither calls `save()` nor applies `auto_now`. Other
    databases (the SQLite default) get `bulk_update` itself.
    """
    if not objs:
        return 0
    if connection.vendor != "postgresql":
        return model.objects.bulk_update(objs, fields)
    meta = model._meta
    columns = [meta.pk, *(meta.get_field(name) for name in fields)]
    quote = connection.ops.quote_name
    row_sql = "(" + ", ".join(f"%s::{column.db_type(connection)}" for column in columns) + ")"
    assignments = ", ".join(f"{quote(column.column)} = v.{quote(column.column)}" for column in columns[1:])
    names = ", ".join(quote(column.column) for column in columns)
    per_statement = max(1, _ROWS_UPDATE_MAX_PARAMS // len(columns))
    updated = 0
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        for start in range(0, len(objs), per_statement):
            batch = objs[start:start + per_statement]
            params = [column.get_db_prep_save(getattr(obj, column.attname), connection)
                      for obj in batch for column in columns]
            # Only quoted identifiers and column types of the model go into the text; every value is a parameter.
            cursor.execute(
                f"UPDATE {quote(meta.db_table)} AS t SET {assignments} "  # noqa: S608
                f"FROM (VALUES {', '.join([row_sql] * len(batch))}) AS v({names}) "
                f"WHERE t.{quote(meta.pk.column)} = v.{quote(meta.pk.column)}", params)
            updated += cursor.rowcount
    return updated
