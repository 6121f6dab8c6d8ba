"""Multi-row inserts on SQLite (storage.bulk.insert_rows): every row lands once, in
order, whatever the count, and statements stay within SQLite's parameter limit."""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy import text

from storage.bulk import MAX_ROWS_PER_STATEMENT, insert_rows
from storage.engine import create_database_engine


@pytest.mark.parametrize("n_rows", [1, 2, 3, 1023, MAX_ROWS_PER_STATEMENT, 2 * 1024 + 7, 5000])
@pytest.mark.parametrize("variable_limit", [None, 999, 40])
def test_every_row_lands_once_in_order(n_rows: int, variable_limit: int | None) -> None:
    engine = create_database_engine("sqlite://")
    rows = [(i, f"text {i}", None if i % 3 else f"\u00e9\u2028{i}", i * 0.5) for i in range(n_rows)]
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE t (id INTEGER, body TEXT, other TEXT, x REAL)")
        raw = connection.connection.driver_connection
        assert isinstance(raw, sqlite3.Connection)
        if variable_limit is not None:
            raw.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, variable_limit)
        insert_rows(connection, table="t", columns=("id", "body", "other", "x"), rows=rows)
        stored = connection.execute(text("SELECT id, body, other, x FROM t ORDER BY rowid")).all()
    assert [tuple(row) for row in stored] == rows


def test_no_rows_is_no_statement() -> None:
    engine = create_database_engine("sqlite://")
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE t (id INTEGER)")
        insert_rows(connection, table="t", columns=("id",), rows=[])
        assert connection.execute(text("SELECT count(*) FROM t")).scalar_one() == 0
