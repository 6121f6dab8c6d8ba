"""Rows in bulk, for every table family: fast multi-row inserts (``INSERT ... VALUES``
of up to 1,024 rows a statement on SQLite, ``COPY`` on PostgreSQL), ``IN`` lists in
chunks, results as plain tuples, and the SQL text of bulk ``INSERT ... SELECT`` statements.

Importing a corpus writes about a million event rows; going through the ORM, or
even SQLAlchemy Core's per-row parameter processing, would cost several times the
database's own work. Rows here are plain tuples in column order.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from itertools import chain
from typing import Any

from sqlalchemy import Connection, Engine, bindparam, insert, text
from sqlmodel import Session


def insert_rows(
    connection: Connection, *, table: str, columns: Sequence[str], rows: Sequence[tuple[Any, ...]]
) -> None:
    if not rows:
        return
    column_list = ", ".join(columns)
    if connection.dialect.name == "postgresql":
        raw = connection.connection.driver_connection
        statement = f"COPY {table} ({column_list}) FROM STDIN"
        with raw.cursor() as cursor, cursor.copy(statement) as copy:  # type: ignore[union-attr]
            for row in rows:
                copy.write_row(row)
        return
    # Many rows per statement: ``executemany`` binds, steps and resets once per row,
    # which cost about as much as SQLite's own work (and, with another thread busy,
    # took the GIL back once per row). Statements of a power-of-two number of rows,
    # so the few distinct ones stay in the driver's statement cache.
    one_row = "(" + ", ".join("?" for _ in columns) + ")"
    per_statement = _rows_per_statement(connection, len(columns))
    start, total = 0, len(rows)
    while start < total:
        size = per_statement
        while size > total - start:
            size //= 2
        values = ", ".join([one_row] * size)
        connection.exec_driver_sql(
            f"INSERT INTO {table} ({column_list}) VALUES {values}",
            tuple(chain.from_iterable(rows[start : start + size])),
        )
        start += size


MAX_ROWS_PER_STATEMENT = 1024
"""Rows of one multi-row ``INSERT`` on SQLite (fewer when its parameter limit is lower)."""


def _rows_per_statement(connection: Connection, n_columns: int) -> int:
    """The largest power of two of rows, up to :data:`MAX_ROWS_PER_STATEMENT`, whose
    parameters fit in one SQLite statement."""
    raw = connection.connection.driver_connection
    limit = raw.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)  # type: ignore[union-attr]
    size = MAX_ROWS_PER_STATEMENT
    while size > 1 and size * n_columns > limit:
        size //= 2
    return size


def timestamp_param(connection: Connection | Engine, moment: datetime) -> Any:
    """``moment`` as a bulk-insert parameter: SQLite gets the text SQLAlchemy itself writes
    (naive UTC, so the ORM reads it back the same way), PostgreSQL the datetime."""
    if connection.dialect.name == "sqlite":
        return moment.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ")
    return moment


def insert_ignoring_conflicts(connection: Connection, table: Any, *, keys: Sequence[str]) -> Any:
    """``INSERT ... ON CONFLICT (keys) DO NOTHING`` for this connection's dialect.

    Get-or-create that two sessions may run at once (a first sign-in from two tabs,
    a first save on an unassigned case): the loser's insert does nothing instead of
    failing, and both then read the one row.
    """
    name = connection.dialect.name
    if name in ("postgresql", "sqlite"):
        statement = dialect_insert(name)(table)
        return statement.on_conflict_do_nothing(index_elements=list(keys))
    return insert(table)  # pragma: no cover - other databases: plain insert


def dialect_insert(dialect_name: str) -> Any:
    """The ``insert`` of ``dialect_name`` (``postgresql`` or ``sqlite``), the one with
    ``ON CONFLICT``. Its module is loaded here, on first use: importing the PostgreSQL
    dialect cost a SQLite command about a tenth of its start-up (issue 38)."""
    if dialect_name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as postgresql_insert

        return postgresql_insert
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert


CHUNK = 500
"""Values per ``IN (...)`` list: well under every backend's parameter limit."""


def in_chunks(values: Sequence[Any]) -> list[Sequence[Any]]:
    """``values`` in slices of :data:`CHUNK`, for ``IN (...)`` queries."""
    return [values[i : i + CHUNK] for i in range(0, len(values), CHUNK)]


def plain_rows(session: Session, query: Any) -> Sequence[Any]:
    """The rows of ``query`` as plain tuples, read through the session's connection a
    batch at a time: tens of thousands of result rows alive at once would each be
    tracked by the garbage collector and set off full collections; plain tuples of
    strings and numbers are not tracked."""
    result = session.connection().execute(query)
    return [tuple(row) for batch in result.partitions(2000) for row in batch]


def code_mapping_case(column: str, mapping: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """``CASE column WHEN :o0 THEN :n0 ... END`` and its parameters: a code mapping (old
    code -> new code) in an ``INSERT ... SELECT`` that carries rows to a rubric version."""
    params: dict[str, str] = {}
    whens = []
    for index, (old, new) in enumerate(sorted(mapping.items())):
        params[f"o{index}"], params[f"n{index}"] = old, new
        whens.append(f"WHEN :o{index} THEN :n{index}")
    return f"CASE {column} {' '.join(whens)} END", params


def code_counts(session: Session, query: str, **params: Any) -> dict[str, int]:
    """``{code: count}`` from the ``(code, count)`` rows of SQL text ``query`` (a ``codes``
    parameter expands to a list)."""
    statement = text(query)
    if "codes" in params:
        statement = statement.bindparams(bindparam("codes", expanding=True))
    return {str(code): int(n) for code, n in session.execute(statement, params)}
