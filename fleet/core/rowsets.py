"""Set-based writes for hot paths: the rows of one table in one statement, passed as a single JSON parameter.

`bulk_create` builds a model instance per row, compiles its SQL on every call and adapts each value in Python
(31 columns x 8 GPUs is 248 adaptations for one GPU status upsert). On the ingest hot path that was most of
the web process's CPU. Here the rows are plain dicts keyed by column, serialised once with orjson, and the
database unpacks them in C: `jsonb_to_recordset` on PostgreSQL, `json_each` on SQLite. The SQL text is built
once per process from the model's metadata, so it follows schema changes.

On PostgreSQL `execute()` sends all statements of a batch in one round trip (the Django backend binds
parameters client-side, which allows several statements per call); elsewhere they run one after another.
`fetch_one`, `fetch_all` and `execute_guarded` run one statement with its parameters bound server-side.
"""

from dataclasses import dataclass
from functools import cache

import orjson
from django.db import connection, models


@dataclass(frozen=True)
class Statement:
    sql: str
    params: tuple


def insert_rows(model: type[models.Model], rows: list[dict], *, conflict: str | tuple[str, ...] | None = None,
                update: tuple[str, ...] = (), merge: tuple[tuple[str, str], ...] = (),
                guarded: bool = False) -> Statement:
    """INSERT the rows (dicts keyed by column name, all with the same keys) into the model's table.

    With `conflict` (a unique column, or the columns of a composite key) and `update`, a row whose key exists
    updates those columns instead; with `merge`, (column, SQL expression) pairs, it sets each column to the
    expression, in which `t` is the stored row and `EXCLUDED` the new one. No two rows may share a key.
    `guarded` statements are for `execute_guarded` (PostgreSQL only).
    """
    columns = tuple(rows[0])
    if isinstance(conflict, str):
        conflict = (conflict,)
    sql = _insert_sql(connection.vendor, model, columns, conflict, tuple(update), tuple(merge), guarded)
    if connection.vendor != "postgresql":
        rows = _adapt_datetimes(model, rows)
    return Statement(sql, (orjson.dumps(rows).decode(),))


def statement(sql: str, *params) -> Statement:
    return Statement(sql, params)


def merge(statements: list[Statement]) -> list[Statement]:
    """Statements with the same SQL and one JSON-array parameter (what `insert_rows` builds) become one with all
    their rows, in the order of first appearance; anything else is kept as it is. For writers that gather the
    rows of many requests: the rows must not collide on a conflict key (one statement cannot update a row twice).
    """
    merged: dict[str, list[Statement]] = {}
    for s in statements:
        merged.setdefault(s.sql, []).append(s)
    out = []
    for sql, group in merged.items():
        if len(group) > 1 and all(len(s.params) == 1 and isinstance(s.params[0], str)
                                  and s.params[0].startswith("[") for s in group):
            rows = ",".join(s.params[0][1:-1] for s in group if s.params[0] != "[]")
            out.append(Statement(sql, (f"[{rows}]",)))
        else:
            out.extend(group)
    return out


def execute(statements: list[Statement]) -> None:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(";\n".join(s.sql for s in statements), [p for s in statements for p in s.params])
        else:
            for s in statements:
                cursor.execute(s.sql, s.params)


def execute_guarded(guard: Statement, writes: list[Statement]) -> bool:
    """PostgreSQL only: run `guard` (an UPDATE) and, only if it changed a row, the guarded `writes`.

    One statement (the writes are data-modifying CTEs that read the guard's RETURNING rows), so it is atomic
    without an explicit transaction: one round trip instead of BEGIN, the work and COMMIT. Returns whether the
    guard matched, i.e. whether the writes happened.
    """
    if connection.vendor != "postgresql":
        raise NotImplementedError("execute_guarded needs PostgreSQL's data-modifying WITH")
    ctes = "".join(f", w{i} AS ({w.sql})" for i, w in enumerate(writes))
    sql = f"WITH guard AS ({guard.sql} RETURNING 1){ctes} SELECT count(*) FROM guard"
    row = fetch_one(sql, *guard.params, *(p for w in writes for p in w.params))
    return bool(row and row[0])


def fetch_one(sql: str, *params) -> tuple | None:
    """One statement, parameters bound on the server (PostgreSQL): see `_bound_cursor`."""
    with _bound_cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


def fetch_all(sql: str, *params) -> list[tuple]:
    with _bound_cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _bound_cursor():
    """On PostgreSQL a cursor that sends parameters separately from the SQL text.

    Django's default psycopg cursor splices every parameter into the SQL text, which for a batch means escaping
    tens of kilobytes of JSON in the web process and lexing them again in the server. This cursor passes them
    as they are. It is still wrapped by Django (error translation, query logging, thread checks); it cannot run
    several statements at once, which is why `execute()` keeps Django's cursor.
    """
    if connection.vendor != "postgresql":
        return connection.cursor()
    import psycopg

    connection.ensure_connection()
    return connection._prepare_cursor(psycopg.Cursor(connection.connection))


@cache
def _fields(model: type[models.Model]) -> dict[str, models.Field]:
    return {f.column: f for f in model._meta.concrete_fields}


@cache
def _insert_sql(vendor: str, model: type[models.Model], columns: tuple[str, ...], conflict: tuple[str, ...] | None,
                update: tuple[str, ...], merge: tuple[tuple[str, str], ...], guarded: bool) -> str:
    fields = _fields(model)
    unknown = [c for c in (*columns, *update, *(c for c, _ in merge), *(conflict or ())) if c not in fields]
    if unknown:
        raise ValueError(f"{model._meta.label} has no column(s) {', '.join(unknown)}")
    qn = connection.ops.quote_name
    names = ", ".join(qn(c) for c in columns)
    if vendor == "postgresql":
        # Integer columns are read as numeric and cast, so a JSON 8.0 stores as 8 instead of failing the batch.
        integral = {c for c in columns if isinstance(fields[c], models.IntegerField)}
        types = ", ".join(f"{qn(c)} {'numeric' if c in integral else fields[c].db_type(connection)}"
                          for c in columns)
        picks = ", ".join(f"{qn(c)}::{fields[c].db_type(connection)}" if c in integral else qn(c) for c in columns)
        source = f"SELECT {picks} FROM jsonb_to_recordset(%s::jsonb) AS r({types})"
        if guarded:
            source += " WHERE EXISTS (SELECT 1 FROM guard)"
    elif guarded:
        raise NotImplementedError("guarded writes need PostgreSQL")
    else:
        # SQLite's JSON1: ->> gives the SQL value, -> keeps JSON columns as JSON text. WHERE true lets the
        # parser tell the upsert clause from a join condition.
        picks = ", ".join(f"value {'->' if isinstance(fields[c], models.JSONField) else '->>'} '$.{c}'"
                          for c in columns)
        source = f"SELECT {picks} FROM json_each(%s) WHERE true"
    alias = " AS t" if merge else ""
    sql = f"INSERT INTO {qn(model._meta.db_table)}{alias} ({names}) {source}"
    if conflict:
        sets = ", ".join([*(f"{qn(c)} = EXCLUDED.{qn(c)}" for c in update), *(f"{qn(c)} = {e}" for c, e in merge)])
        target = ", ".join(qn(c) for c in conflict)
        sql += f" ON CONFLICT ({target}) " + (f"DO UPDATE SET {sets}" if sets else "DO NOTHING")
    return sql


def _adapt_datetimes(model: type[models.Model], rows: list[dict]) -> list[dict]:
    """SQLite keeps datetimes as text in Django's format; PostgreSQL parses orjson's RFC 3339 itself."""
    fields = _fields(model)
    stamps = [c for c in rows[0] if isinstance(fields[c], models.DateTimeField)]
    if not stamps:
        return rows
    adapt = connection.ops.adapt_datetimefield_value
    return [{**row, **{c: adapt(row[c]) for c in stamps}} for row in rows]
