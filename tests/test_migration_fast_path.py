"""Commands skip loading Alembic when the schema is current; the quick check agrees with it."""

from __future__ import annotations

from sqlalchemy import text

from storage.migrations.upgrade import (
    _head_from_version_files,
    _is_current,
    current_revision,
    head_revision,
)
from tests.conftest import Database


def test_the_head_read_from_the_files_is_alembics_head() -> None:
    assert _head_from_version_files() == head_revision()


def test_a_current_database_is_seen_as_current_and_another_is_not(
    database: Database,
) -> None:
    assert _is_current(database.engine)
    with database.engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = 'not-a-revision'"))
    assert not _is_current(database.engine)
    with database.engine.begin() as connection:
        connection.execute(text("DELETE FROM alembic_version"))
    assert not _is_current(database.engine)
    with database.engine.begin() as connection:
        connection.execute(text("DROP TABLE alembic_version"))
    assert not _is_current(database.engine)
    assert current_revision(database.engine) is None
