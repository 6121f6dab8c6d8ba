"""The audit log is append-only in the database itself, and the changes it missed are in it.

Issue 18: ``delete from audit_log`` and ``update audit_log ...`` succeeded on both
databases; a first sign-in that creates a person (an admin named in
``REVIEW_APP_ADMINS`` too), ``backup`` and ``restore`` left no entry.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from review_app.services.access.actors import sign_in
from review_app.services.operations import audit
from review_app.services.operations.backup import backup_database, restore_database
from tests.actors import operator
from tests.conftest import Database


def _count(database: Database) -> int:
    with database.engine.connect() as connection:
        return int(connection.execute(text("SELECT count(*) FROM audit_log")).scalar_one())


def test_raw_sql_cannot_change_or_delete_audit_rows(database: Database) -> None:
    sign_in(database.engine, name="newcomer", auth_mode="oidc")  # one entry
    before = _count(database)
    assert before >= 1
    for statement in (
        "UPDATE audit_log SET actor = 'someone-else'",
        "DELETE FROM audit_log",
        "DELETE FROM audit_log WHERE id = (SELECT min(id) FROM audit_log)",
    ):
        with pytest.raises(DBAPIError, match="append-only"), database.engine.begin() as c:
            c.execute(text(statement))
    if database.kind == "postgres":
        with pytest.raises(DBAPIError, match="append-only"), database.engine.begin() as c:
            c.execute(text("TRUNCATE audit_log"))
    assert _count(database) == before
    with database.engine.connect() as connection:
        actors = connection.execute(text("SELECT actor FROM audit_log")).scalars().all()
    assert "someone-else" not in actors
    # appending still works
    with database.engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO audit_log (at, actor, action, object_type, summary_json) "
                "VALUES (CURRENT_TIMESTAMP, 'x', 'note', 'none', '{}')"
            )
        )
    assert _count(database) == before + 1


COLUMNS = "(id, at, actor, action, object_type, summary_json)"
FORGED = "CURRENT_TIMESTAMP, 'forger', 'forged', 'none', '{}'"

# Every raw form that would put another row where an existing one is (issue 35: on
# SQLite, REPLACE deletes the old row without firing the DELETE trigger).
REWRITES = {
    "sqlite": (
        f"INSERT OR REPLACE INTO audit_log {COLUMNS} VALUES (:id, {FORGED})",
        f"REPLACE INTO audit_log {COLUMNS} VALUES (:id, {FORGED})",
        f"INSERT OR REPLACE INTO audit_log {COLUMNS} SELECT id, {FORGED} FROM audit_log "
        "WHERE id = :id",
        f"REPLACE INTO audit_log {COLUMNS} SELECT id, {FORGED} FROM audit_log",
        f"INSERT INTO audit_log {COLUMNS} VALUES (:id, {FORGED}) "
        "ON CONFLICT (id) DO UPDATE SET actor = excluded.actor",
        f"INSERT OR IGNORE INTO audit_log {COLUMNS} VALUES (:id, {FORGED})",
        f"INSERT OR ROLLBACK INTO audit_log {COLUMNS} VALUES (:id, {FORGED})",
        "UPDATE OR REPLACE audit_log SET actor = 'forger' WHERE id = :id",
        "UPDATE OR REPLACE audit_log SET id = :id + 1000 WHERE id = :id",
    ),
    "postgres": (
        f"INSERT INTO audit_log {COLUMNS} VALUES (:id, {FORGED}) "
        "ON CONFLICT (id) DO UPDATE SET actor = excluded.actor",
        f"INSERT INTO audit_log {COLUMNS} SELECT id, {FORGED} FROM audit_log "
        "ON CONFLICT (id) DO UPDATE SET actor = excluded.actor",
        "MERGE INTO audit_log a USING (SELECT :id AS id) s ON a.id = s.id "
        "WHEN MATCHED THEN UPDATE SET actor = 'forger'",
        "MERGE INTO audit_log a USING (SELECT :id AS id) s ON a.id = s.id WHEN MATCHED THEN DELETE",
        "UPDATE audit_log SET id = id + 1000 WHERE id = :id",
    ),
}


def test_no_raw_form_rewrites_an_audit_row(database: Database) -> None:
    sign_in(database.engine, name="newcomer", auth_mode="oidc")
    with database.engine.connect() as connection:
        before = connection.execute(text("SELECT * FROM audit_log ORDER BY id")).all()
    first = before[0].id
    for statement in REWRITES[database.kind]:
        refused = False
        try:
            with database.engine.begin() as connection:
                connection.execute(text(statement), {"id": first})
        except DBAPIError as error:
            refused = "append-only" in str(error)
            assert refused, (statement, str(error))
        assert refused, f"not refused: {statement}"
    with database.engine.connect() as connection:
        after = connection.execute(text("SELECT * FROM audit_log ORDER BY id")).all()
    assert after == before
    # a new row, whose id the database picks (or one given that is free), still goes in
    with database.engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO audit_log (at, actor, action, object_type, summary_json) "
                f"VALUES ({FORGED.split(', ', 1)[0]}, 'x', 'note', 'none', '{{}}')"
            )
        )
        connection.execute(
            text(f"INSERT INTO audit_log {COLUMNS} VALUES (:id, {FORGED})"), {"id": first + 10**6}
        )
    assert _count(database) == len(before) + 2


def test_a_first_sign_in_that_creates_a_person_is_logged(
    database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REVIEW_APP_ADMINS", "boss")
    sign_in(database.engine, name="boss", auth_mode="proxy")
    sign_in(database.engine, name="rita", auth_mode="oidc")
    sign_in(database.engine, name="rita", auth_mode="oidc")  # not a new person: no entry
    entries = audit.audit_entries(database.engine, operator(), action="person_signin_create")
    assert sorted((e.actor, e.summary["role"]) for e in entries) == [
        ("boss", "admin"),
        ("rita", "reviewer"),
    ]


def test_backup_and_restore_leave_an_entry(sqlite_database: Database, tmp_path: Path) -> None:
    target = tmp_path / "review.backup"
    backup_database(operator(), db=sqlite_database.url, path=target)
    backups = audit.audit_entries(sqlite_database.engine, operator(), action="backup")
    assert [(e.object, e.summary["done"]) for e in backups] == [(str(target), True)]
    restore_database(operator(), db=sqlite_database.url, path=target)
    restores = audit.audit_entries(sqlite_database.engine, operator(), action="restore")
    assert [(e.object, e.summary["done"]) for e in restores] == [(str(target), True)]


def test_a_postgres_backup_or_restore_request_leaves_an_entry(
    postgres_database: Database, tmp_path: Path
) -> None:
    backup_database(operator(), db=postgres_database.url, path=tmp_path / "x.dump")
    restore_database(operator(), db=postgres_database.url, path=tmp_path / "x.dump")
    actions = [e.action for e in audit.audit_entries(postgres_database.engine, operator())]
    assert sorted(actions) == ["backup", "restore"]
