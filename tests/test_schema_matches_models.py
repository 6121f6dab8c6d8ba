"""The schema Alembic builds is the schema the SQLModel tables declare.

A table class changed without a migration (or a migration without the class) would
pass every other test on a fresh database built from one of the two; here they
must agree, column types and indexes included, on SQLite and PostgreSQL.
"""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlmodel import SQLModel

import storage.models  # noqa: F401  (registers the tables)
from tests.conftest import Database


def test_migrations_build_the_declared_schema(database: Database) -> None:
    with database.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        differences = compare_metadata(context, SQLModel.metadata)
    assert differences == []
