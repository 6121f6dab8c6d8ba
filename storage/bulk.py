"""Fast multi-row inserts: ``executemany`` on SQLite, ``COPY`` on PostgreSQL.

Importing a corpus writes about a million event rows; going through the ORM, or
even SQLAlchemy Core's per-row parameter processing, would cost several times the
database's own work. Rows here are plain tuples in column order.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Engine, insert
from sqlalchemy.dialects import postgresql, sqlite


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
    placeholders = ", ".join("?" for _ in columns)
    connection.exec_driver_sql(
        f"INSERT INTO {table} ({column_list}) VALUES ({placeholders})", list(rows)
    )


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
    if name == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing(index_elements=list(keys))
    if name == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing(index_elements=list(keys))
    return insert(table)  # pragma: no cover - other databases: plain insert


CHUNK = 500
"""Values per ``IN (...)`` list: well under every backend's parameter limit."""


def in_chunks(values: Sequence[Any]) -> list[Sequence[Any]]:
    """``values`` in slices of :data:`CHUNK`, for ``IN (...)`` queries."""
    return [values[i : i + CHUNK] for i in range(0, len(values), CHUNK)]
