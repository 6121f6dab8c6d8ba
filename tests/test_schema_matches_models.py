"""The schema Alembic builds is the schema the SQLModel tables declare.

A table class changed without a migration (or a migration without the class) would
pass every other test on a fresh database built from one of the two; here they
must agree, column types and indexes included, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import subprocess
import sys

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine
from sqlalchemy.dialects import postgresql
from sqlalchemy.schema import CreateIndex
from sqlmodel import SQLModel

import storage.models
from tests.conftest import Database


def test_migrations_build_the_declared_schema(database: Database) -> None:
    with database.engine.connect() as connection:
        storage.models.declare_partial_indexes(connection.dialect.name)
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        differences = compare_metadata(context, storage.models.define_all())
    assert differences == []


def test_the_tables_load_no_dialect_they_are_not_used_on() -> None:
    """Defining the tables and the storage modules loads no database dialect (their
    partial indexes take their predicate when created, issue 38): a SQLite command does not
    pay for the PostgreSQL dialect's import."""
    code = (
        "import sys, storage.models, storage.bulk, storage.reports; "
        "print([m for m in sys.modules if m.startswith('sqlalchemy.dialects.')])"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "postgresql" not in loaded and "sqlite" not in loaded, loaded


def test_tables_created_from_the_models_keep_their_partial_indexes() -> None:
    engine = create_engine("sqlite://")
    storage.models.define_all().create_all(engine)
    with engine.connect() as connection:
        created = dict(
            connection.exec_driver_sql(
                "SELECT name, sql FROM sqlite_master WHERE name LIKE 'ux_%_current_unit'"
            ).all()
        )
    assert set(created) == {"ux_labels_current_unit", "ux_gold_current_unit"}
    assert all(sql.endswith("WHERE current") for sql in created.values()), created
    storage.models.declare_partial_indexes("postgresql")
    labels = SQLModel.metadata.tables["labels"]
    (current,) = [index for index in labels.indexes if index.name == "ux_labels_current_unit"]
    compiled = str(CreateIndex(current).compile(dialect=postgresql.dialect()))
    assert compiled.endswith("WHERE current"), compiled


def test_each_table_family_defines_the_tables_its_keys_name() -> None:
    """``from storage.models import X`` defines X's family alone (issue 38); each family's
    module imports the families its foreign keys name, so every key of a table defined
    alone resolves (a flush sorts the tables by their keys). Each family in a fresh
    process."""
    code = (
        "import sys; from importlib import import_module; from sqlmodel import SQLModel\n"
        "import storage.models\n"
        "for home in sys.argv[1:]:\n"
        "    import_module(f'storage.tables.{home}')\n"
        "for table in SQLModel.metadata.tables.values():\n"
        "    for key in table.foreign_keys:\n"
        "        key.column  # raises when the table it names is not defined\n"
        "print(len(SQLModel.metadata.tables))\n"
    )
    for home in sorted(set(storage.models.HOMES.values())):
        completed = subprocess.run(
            [sys.executable, "-c", code, home], capture_output=True, text=True
        )
        assert completed.returncode == 0, (home, completed.stderr[-800:])
    tables = {
        getattr(storage.models, name).__table__
        for name in storage.models.HOMES
        if hasattr(getattr(storage.models, name), "__table__")
    }
    assert tables == set(storage.models.define_all().tables.values())
