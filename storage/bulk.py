"""Fast multi-row inserts: ``executemany`` on SQLite, ``COPY`` on PostgreSQL.

Importing a corpus writes about a million event rows; going through the ORM, or
even SQLAlchemy Core's per-row parameter processing, would cost several times the
database's own work. Rows here are plain tuples in column order.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Engine


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
