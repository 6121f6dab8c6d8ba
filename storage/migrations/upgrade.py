"""The schema brought to the head revision, applied by every command on start
(:func:`upgrade_database`), without loading Alembic when it is there already."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).resolve().parent
# Any constant works: it only has to be the same in every process taking the lock.
_PG_MIGRATION_LOCK = 725_310_442
_REVISION = re.compile(r"^revision(?:\s*:\s*str)?\s*=\s*['\"]([^'\"]+)['\"]\s*$", re.M)
_DOWN_REVISION = re.compile(
    r"^down_revision(?:\s*:[^=]+)?\s*=\s*(?:None|['\"]([^'\"]+)['\"])\s*$", re.M
)


def alembic_config() -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


def head_revision() -> str | None:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def _head_from_version_files() -> str | None:
    """The one head revision, read from the version files' text; None when unsure.

    A quick check that spares every command loading Alembic when the schema is
    current; anything unusual (a merge, a branch, a file it cannot read) answers
    None and Alembic decides.
    """
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (MIGRATIONS_DIR / "versions").glob("*.py"):
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        revision = _REVISION.findall(source)
        down = _DOWN_REVISION.findall(source)
        if len(revision) != 1 or len(down) != 1:
            return None
        revisions.add(revision[0])
        if down[0]:
            parents.add(down[0])
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 and parents <= revisions else None


def _is_current(engine: Engine) -> bool:
    """Whether the database is at the head revision, without loading Alembic."""
    from storage.engine import read_only

    head = _head_from_version_files()
    if head is None:
        return False
    try:
        with read_only(engine).connect() as connection:
            stored = connection.execute(text("SELECT version_num FROM alembic_version")).all()
    except DBAPIError:  # no alembic_version table yet: a new database
        return False
    return [row[0] for row in stored] == [head]


def upgrade_database(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to ``revision``; a no-op (one query) when it is there already.

    Concurrent starts are safe: SQLite serialises them with ``BEGIN IMMEDIATE``,
    PostgreSQL with a transaction-scoped advisory lock.
    """
    if revision == "head" and (_is_current(engine) or current_revision(engine) == head_revision()):
        return
    from alembic import command

    config = alembic_config()
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(
                text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK}
            )
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
