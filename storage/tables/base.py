"""What every table family's module shares: the timestamp default, partial unique
indexes declared per dialect when the tables are created, and SQLModel's deferred
validator builds (a command that reads one table pays for one)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Connection, Index, event, text
from sqlmodel import SQLModel

# Pydantic builds a model's validator and serializer when it is first used, not when its
# class is defined: a command that reads one table pays for one, not for every table's
# (issue 38: a command's start-up).
SQLModel.model_config["defer_build"] = True


def utcnow() -> datetime:
    return datetime.now(UTC)


PARTIAL_INDEX_DIALECTS = ("sqlite", "postgresql")
"""The dialects whose partial indexes the tables declare (``<dialect>_where``)."""


def one_current_row(name: str, *columns: str) -> Index:
    """A partial unique index: at most one row with ``current`` set per ``columns``.

    Its predicate is kept in ``info["where"]`` and given to a dialect as
    ``<dialect>_where`` by :func:`declare_partial_indexes`, not here: a dialect option
    given at definition loads that dialect's module, and the PostgreSQL dialect cost a
    SQLite command about a tenth of its start-up (issue 38). The migrations create these
    indexes with their own ``sqlite_where``/``postgresql_where``.
    """
    index = Index(name, *columns, unique=True, info={"where": "current"})
    event.listen(index, "after_parent_attach", _declare_when_created)
    return index


def declare_partial_indexes(dialect_name: str) -> None:
    """Give the defined tables' partial indexes their predicate as ``dialect_name``'s
    option (``postgresql_where``, ``sqlite_where``), so that the tables create, compare
    and autogenerate as declared on that dialect; idempotent. Called when a table is
    created from these definitions (``create_all``) and by the migrations' environment."""
    if dialect_name not in PARTIAL_INDEX_DIALECTS:
        return
    for table in SQLModel.metadata.tables.values():
        for index in table.indexes:
            where = index.info.get("where")
            if where is not None and index.dialect_options[dialect_name]["where"] is None:
                index.dialect_options[dialect_name]["where"] = text(where)


def _declare_when_created(_index: Index, table: object) -> None:
    event.listen(table, "before_create", _before_create)


def _before_create(_target: object, connection: Connection, **_kw: object) -> None:
    declare_partial_indexes(connection.dialect.name)
