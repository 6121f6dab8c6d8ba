"""``review-app backup`` / ``restore``: a round trip through the command line, as an
operator runs it, with a server's engine open on the database the whole time."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy import text

from review_app.services.access.actors import Actor, sign_in
from review_app.services.exchange.demo import load_demo
from review_app.services.labels.labeling import record_label
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from tests.actors import assign
from tests.conftest import Database

CASE = "support-clean-late-parcel"


def _labels(database: Database) -> list[tuple[object, ...]]:
    with database.engine.connect() as connection:
        rows = connection.execute(
            text("SELECT case_id, turn, reviewer_id, code, current FROM labels ORDER BY id")
        )
        return [tuple(row) for row in rows]


def test_backup_and_restore_round_trip(sqlite_database: Database, run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    engine = sqlite_database.engine
    load_demo(engine, Actor.operator())
    rubric = sync_rubrics(engine, Actor.operator()).get("role-adherence@1")
    rita = sign_in(engine, name="rita", auth_mode="local")
    assign(engine, rubric, "rita", CASE)
    record_label(engine, rita, case_id=CASE, turn=2, rubric=rubric, code="in_role")
    before = _labels(sqlite_database)
    target = tmp_path / "backups" / "review.backup"
    target.parent.mkdir()

    backed = run_cli("backup", str(target), db=sqlite_database.url)
    assert backed.returncode == 0, backed.stderr
    assert f"to {target}" in backed.stdout
    with sqlite3.connect(target) as copy:
        assert copy.execute("SELECT count(*) FROM labels").fetchone()[0] == len(before)

    # work continues after the backup: a new label, then a disaster (labels deleted)
    record_label(engine, rita, case_id=CASE, turn=4, rubric=rubric, code="scope_break")
    with engine.begin() as connection:
        connection.execute(text("DELETE FROM labels"))
    assert _labels(sqlite_database) == []

    restored = run_cli("restore", str(target), db=sqlite_database.url)
    assert restored.returncode == 0, restored.stderr
    saved = Path(sqlite_database.url.removeprefix("sqlite:///") + ".before-restore")
    assert f"previous content is in {saved}" in restored.stdout
    # the open engine (a running server) sees the backup's content on its next read
    assert _labels(sqlite_database) == before
    with sqlite3.connect(saved) as previous:
        assert previous.execute("SELECT count(*) FROM labels").fetchone()[0] == 0
    # and keeps working on it
    record_label(engine, rita, case_id=CASE, turn=4, rubric=rubric, code="scope_break")
    assert len(_labels(sqlite_database)) == len(before) + 1


def test_restore_refuses_a_file_that_is_not_a_backup(
    sqlite_database: Database,
    run_cli,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    bogus = tmp_path / "notes.txt"
    bogus.write_text("not a database")
    result = run_cli("restore", str(bogus), db=sqlite_database.url)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"error: {bogus}: not a SQLite database"]
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    result = run_cli("restore", str(other), db=sqlite_database.url)
    assert result.returncode == 2
    assert "not a Role Review database" in result.stderr


def test_postgres_backup_prints_the_pg_dump_command(postgres_database: Database, run_cli) -> None:  # type: ignore[no-untyped-def]
    result = run_cli("backup", "/tmp/review.dump", db=postgres_database.url)
    assert result.returncode == 0, result.stderr
    assert "pg_dump --format=custom --schema=t_" in result.stdout
    assert "--file=/tmp/review.dump postgresql://postgres@127.0.0.1:5432/test" in result.stdout
    assert "pg_restore --clean --if-exists" in result.stdout
