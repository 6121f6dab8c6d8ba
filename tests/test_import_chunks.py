"""Imports in chunks of whole cases: a stopped file keeps whole cases, a re-run completes
it, and a save goes through while a large import runs (SQLite's lock is held briefly)."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import text

from benchmarks.corpus import generate_corpus
from review_app.formats import ImportOptions
from review_app.services.cases.importing import CHUNK_EVENTS
from review_app.services.team.people import operator_actor
from tests.conftest import Database, cli_environment, review_app_command, row_counts


def write_corpus(path: Path, cases: list[dict[str, Any]]) -> Path:
    with path.open("wb") as out:
        for case in cases:
            out.write(orjson.dumps(case) + b"\n")
    return path


def whole_cases(database: Database) -> tuple[int, int]:
    """(stored cases, cases whose events, evaluation and counts all agree)."""
    with database.engine.connect() as connection:
        total = connection.execute(text("SELECT count(*) FROM cases")).scalar_one()
        whole = connection.execute(
            text(
                "SELECT count(*) FROM cases c WHERE c.n_events = "
                "(SELECT count(*) FROM events e WHERE e.case_id = c.case_id) "
                "AND EXISTS (SELECT 1 FROM evaluations v WHERE v.case_id = c.case_id)"
            )
        ).scalar_one()
    return int(total), int(whole)


def test_a_bad_case_mid_file_keeps_whole_cases_before_it_and_a_rerun_completes(
    run_cli: Any, database: Database, tmp_path: Path
) -> None:
    n_events = 40
    n_cases = 3 * CHUNK_EVENTS // n_events  # three first-size chunks' worth
    cases = list(generate_corpus(n_cases, n_events))
    bad_index = n_cases - 10
    good = cases[bad_index]
    cases[bad_index] = {**good, "transcript": [*good["transcript"][:-1], {"turn": "x"}]}
    path = write_corpus(tmp_path / "big.jsonl", cases)

    result = run_cli("import", str(path), db=database.url)

    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith(f"error: {path}, line {bad_index + 1}, field transcript[")
    stored_said = re.search(
        r"\((\d+) earlier cases of this file are stored, each whole; ", lines[0]
    )
    assert stored_said, lines[0]
    stored = int(stored_said.group(1))
    assert 0 < stored < bad_index
    assert lines[1].startswith(f"before the error: imported {stored}, ")
    assert whole_cases(database) == (stored, stored)

    cases[bad_index] = good
    write_corpus(path, cases)
    again = run_cli("import", "--json", str(path), db=database.url)

    assert again.returncode == 0, again.stderr
    totals = orjson.loads(again.stdout)["totals"]
    assert (totals["unchanged"], totals["imported"]) == (stored, n_cases - stored)
    assert whole_cases(database) == (n_cases, n_cases)


def test_a_small_file_with_a_bad_case_stores_nothing(
    run_cli: Any, database: Database, tmp_path: Path
) -> None:
    cases = list(generate_corpus(20, 10))
    cases[15]["transcript"][2]["turn"] = 2**40
    path = write_corpus(tmp_path / "small.jsonl", cases)
    before = row_counts(database.engine)
    result = run_cli("import", str(path), db=database.url)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert "earlier case" not in result.stderr
    assert row_counts(database.engine) == before


def test_a_label_save_goes_through_while_a_large_import_runs(
    sqlite_database: Database, tmp_path: Path
) -> None:
    """Saves with a 3 s busy timeout never fail with "database is locked", and some land
    between the import's chunks (one transaction per file held the lock throughout)."""
    n_cases, n_events = 6000, 50
    path = write_corpus(tmp_path / "large.jsonl", list(generate_corpus(n_cases, n_events)))
    database_file = sqlite_database.url.removeprefix("sqlite:///")
    importer = subprocess.Popen(
        [*review_app_command(), "import", str(path), "--db", sqlite_database.url],
        env=cli_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    saver = sqlite3.connect(database_file, timeout=3, isolation_level=None)
    seen_mid_import: list[int] = []
    saves = 0
    try:
        while importer.poll() is None:
            saver.execute("BEGIN IMMEDIATE")
            stored = saver.execute("SELECT count(*) FROM cases").fetchone()[0]
            saver.execute(
                "INSERT INTO reviewers (name, role, active, created_at) "
                "VALUES (?, 'reviewer', 1, '2026-01-01 00:00:00')",
                (f"saver-{saves}",),
            )
            saver.execute("COMMIT")
            saves += 1
            if 0 < stored < n_cases:
                seen_mid_import.append(stored)
            time.sleep(0.05)
    finally:
        saver.close()
        out, err = importer.communicate(timeout=300)
    assert importer.returncode == 0, err
    assert f"imported {n_cases}," in out
    assert seen_mid_import, "no save happened between two chunks of the import"
    with sqlite3.connect(database_file) as check:
        assert check.execute("SELECT count(*) FROM reviewers").fetchone()[0] == saves


def test_a_changed_case_mid_file_stops_there_and_replace_completes(
    database: Database, tmp_path: Path
) -> None:
    from review_app.errors import InputError
    from review_app.services.cases.importing import FileImport, import_paths

    n_events = 40
    n_cases = 3 * CHUNK_EVENTS // n_events
    cases = list(generate_corpus(n_cases, n_events, seed=3))
    changed_index = n_cases - 5
    import_paths(
        database.engine,
        operator_actor(),
        [write_corpus(tmp_path / "one.jsonl", [cases[changed_index]])],
    )
    cases[changed_index]["chatbot_role"] = "A different role text."
    path = write_corpus(tmp_path / "all.jsonl", cases)
    heard: list[FileImport] = []

    try:
        import_paths(database.engine, operator_actor(), [path], on_file_done=heard.append)
    except InputError as error:
        message = str(error)
    else:
        raise AssertionError("the changed case was not refused")

    assert message.startswith(f"{path}, line {changed_index + 1}, field case_id: case ")
    (partial,) = heard
    assert not partial.complete
    assert 0 < partial.imported < changed_index
    assert f"({partial.imported} earlier cases of this file are stored" in message
    assert whole_cases(database) == (partial.imported + 1, partial.imported + 1)

    summary = import_paths(database.engine, operator_actor(), [path], ImportOptions(replace=True))

    totals = summary.totals
    assert (totals.unchanged, totals.replaced) == (partial.imported, 1)
    assert totals.imported == n_cases - partial.imported
    assert whole_cases(database) == (n_cases, n_cases)
