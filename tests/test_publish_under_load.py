"""``rubrics publish`` beside reviewers saving, on SQLite and PostgreSQL (issue 35).

The probe: with four reviewers saving in a loop, PostgreSQL's publication deadlocked with
the saves (its table locks were taken in another order than theirs) and the command
printed the driver's text, SQL and a URL; run again, it did not finish in 16 minutes
(a nested loop over rows the same transaction had just written). Here the real command
publishes while four reviewers save through the service in threads: it exits 0, every
save acknowledged is stored, the publication is one audit entry, and a database that
stays busy is one sentence without SQL.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from benchmarks.bench_carry_over import build, run_writers
from review_app.errors import DatabaseBusy
from review_app.services.access.actors import operator_actor, sign_in
from review_app.services.rubrics.rubric_carry import publish_rubric
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from tests.conftest import Database

WRITERS = 4


def _audit_rows(database: Database) -> list[tuple[str, str, dict[str, Any]]]:
    with database.engine.connect() as connection:
        return [
            (action, key, json.loads(summary))
            for action, key, summary in connection.execute(
                text(
                    "SELECT action, object_key, summary_json FROM audit_log "
                    "WHERE action <> 'label' ORDER BY id"
                )
            )
        ]


def _stored_saves(database: Database) -> int:
    with database.engine.connect() as connection:
        return int(
            connection.execute(
                text(
                    "SELECT count(*) FROM labels l JOIN reviewers r ON r.id = l.reviewer_id "
                    "WHERE r.name LIKE 'live%' AND l.carried_from_id IS NULL"
                )
            ).scalar_one()
        )


def test_publish_with_four_reviewers_saving_loses_nothing_and_is_one_audit_entry(
    database: Database, tmp_path: Path, run_cli: Any
) -> None:
    root = tmp_path / "rubrics"
    engine, _ = build(database.url, root, n_labels=20_000, n_gold=2_000)
    try:
        # The reviewers' catalog: version 1; version 2 is left to the publication to store.
        catalog = sync_rubrics(engine, operator_actor(), directory=root)
        audit_before = _audit_rows(database)
        stop = threading.Event()
        threads, saves = run_writers(
            engine, catalog, writers=WRITERS, stop=stop, origin=time.perf_counter()
        )
        try:
            time.sleep(0.5)
            result = run_cli(
                "rubrics",
                "publish",
                "bench@2",
                "--json",
                db=database.url,
                env={"REVIEW_APP_RUBRICS_DIR": str(root)},
                subprocess=True,
            )
            time.sleep(0.5)
        finally:
            stop.set()
            for thread in threads:
                thread.join()
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""
        report = json.loads(result.stdout)
        assert sum(report["carried"].values()) > 15_000
        assert not saves.failed, saves.failed[:3]
        # a save waits for the publication (well within the busy timeout), never gives way
        # to it in a deadlock
        assert saves.busy == 0
        acknowledged = sum(saves.acknowledged.values())
        assert acknowledged > 0
        assert _stored_saves(database) == acknowledged  # nothing acknowledged is lost
        new = _audit_rows(database)[len(audit_before) :]
        assert [(action, key) for action, key, _ in new] == [("rubric_publish", "bench@2")]
        assert new[0][2]["carried"] == report["carried"]
        assert new[0][2]["before"] is None and new[0][2]["source"] == "bench/v2.yaml"
    finally:
        engine.dispose()


def test_a_publication_that_cannot_take_its_locks_says_so_in_one_sentence(
    postgres_database: Database, tmp_path: Path
) -> None:
    """A writer holding judge_verdicts (a judge run storing answers, say) for longer than
    the publication is willing to wait: it gives up, stores nothing, and says why in one
    sentence, no SQL, no process ids, no URL. Meanwhile it never held a lock the writer
    waited for."""
    root = tmp_path / "rubrics"
    engine, _ = build(postgres_database.url, root, n_labels=2_000, n_gold=200)
    catalog = sync_rubrics(engine, operator_actor(), directory=root)
    holder = engine.connect()
    try:
        holder.execute(text("LOCK TABLE judge_verdicts IN ROW EXCLUSIVE MODE"))
        started = time.monotonic()
        with pytest.raises(DatabaseBusy) as refused:
            publish_rubric(
                engine, operator_actor(), catalog=catalog, ref="bench@2", wait_seconds=1.5
            )
        assert time.monotonic() - started < 10
        message = str(refused.value)
        assert "nothing was published" in message
        for leak in ("SQL", "LOCK", "sqlalche.me", "process", "\n"):
            assert leak not in message
        # the holder was never blocked: it can still write
        holder.execute(text("SELECT 1"))
    finally:
        holder.rollback()
        holder.close()
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM rubric_carries")).scalar_one() == 0
        assert (
            connection.execute(
                text("SELECT count(*) FROM labels WHERE rubric_version = 2")
            ).scalar_one()
            == 0
        )
    engine.dispose()


def test_a_database_error_on_the_command_line_is_one_sentence(
    database: Database, tmp_path: Path, run_cli: Any
) -> None:
    """Whatever else the database refuses reaches the user as its own first line, exit 5,
    without the statement, its parameters or SQLAlchemy's link."""
    with database.engine.begin() as connection:
        if database.kind == "sqlite":
            connection.execute(
                text(
                    "CREATE TRIGGER refuse_reviewers BEFORE INSERT ON reviewers "
                    "BEGIN SELECT RAISE(ABORT, 'reviewers are frozen'); END"
                )
            )
        else:
            connection.execute(
                text(
                    "CREATE FUNCTION refuse_reviewers() RETURNS trigger LANGUAGE plpgsql AS "
                    "$$ BEGIN RAISE EXCEPTION 'reviewers are frozen'; END $$"
                )
            )
            connection.execute(
                text(
                    "CREATE TRIGGER refuse_reviewers BEFORE INSERT ON reviewers "
                    "FOR EACH ROW EXECUTE FUNCTION refuse_reviewers()"
                )
            )
    result = run_cli("reviewers", "add", "dora", "--role", "reviewer", db=database.url)
    assert result.returncode == 5, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "reviewers are frozen" in lines[0]
    for leak in ("[SQL", "INSERT", "sqlalche.me", "Traceback", "parameters"):
        assert leak not in lines[0]


def test_a_publication_waits_for_a_save_holding_nothing_the_save_needs(
    postgres_database: Database, tmp_path: Path
) -> None:
    """The deadlock of the probe, set up on purpose: a save has taken its assignment
    (as every save does first) and has not yet written its label when the publication
    starts. The publication waits for ``assignments`` while holding no lock on the
    tables the save writes next, so the save goes on, commits, and the publication
    then carries its label."""
    from sqlmodel import Session

    from storage import assignments, labels

    root = tmp_path / "rubrics"
    engine, _ = build(postgres_database.url, root, n_labels=2_000, n_gold=200)
    catalog = sync_rubrics(engine, operator_actor(), directory=root)
    live = sign_in(engine, name="live0", auth_mode="local")
    assert live.reviewer_id is not None
    save = Session(engine)
    assignments.lock_assignment(
        save, case_id="c0000000", reviewer_id=live.reviewer_id, rubric_id="bench", version=1
    )
    published: list[Any] = []
    publisher = threading.Thread(
        target=lambda: published.append(
            publish_rubric(engine, operator_actor(), catalog=catalog, ref="bench@2")
        )
    )
    publisher.start()
    try:
        with engine.connect() as watcher:
            waiting = None
            deadline = time.monotonic() + 20
            while waiting is None and time.monotonic() < deadline:
                waiting = watcher.execute(
                    text(
                        "SELECT l.pid FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                        "WHERE c.relname = 'assignments' AND NOT l.granted "
                        "AND l.mode = 'ShareRowExclusiveLock' "
                        "AND c.relnamespace = to_regnamespace(current_schema())"
                    )
                ).scalar()
                watcher.rollback()
                time.sleep(0.02)
            assert waiting is not None, "the publication never waited for the save"
            held = (
                watcher.execute(
                    text(
                        "SELECT c.relname FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                        "WHERE l.pid = :pid AND l.granted AND l.mode = 'ShareRowExclusiveLock'"
                    ),
                    {"pid": waiting},
                )
                .scalars()
                .all()
            )
            assert held == [], f"the publication waits while holding {held}"
        label_id = labels.add_label(
            save,
            case_id="c0000000",
            turn=2,
            reviewer_id=live.reviewer_id,
            rubric_id="bench",
            version=1,
            code="tone_break",
            rationale=None,
        )
        save.commit()
    finally:
        save.close()
        publisher.join(timeout=60)
    assert published, "the publication did not finish"
    with engine.connect() as connection:
        carried = connection.execute(
            text("SELECT code FROM labels WHERE carried_from_id = :id"), {"id": label_id}
        ).scalar_one()
    assert carried == "tone_break"
    engine.dispose()
