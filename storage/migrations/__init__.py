"""Alembic migrations, applied by every command on start (:func:`upgrade_database`)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, text

MIGRATIONS_DIR = Path(__file__).resolve().parent
# Any constant works: it only has to be the same in every process taking the lock.
_PG_MIGRATION_LOCK = 725_310_442


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade_database(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to ``revision``; a no-op (one query) when it is there already.

    Concurrent starts are safe: SQLite serialises them with ``BEGIN IMMEDIATE``,
    PostgreSQL with a transaction-scoped advisory lock.
    """
    if revision == "head" and current_revision(engine) == head_revision():
        return
    config = alembic_config()
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK}
            )
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
