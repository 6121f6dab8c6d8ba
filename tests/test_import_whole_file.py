"""One file's import is one transaction: bad input anywhere stores nothing of it.

Issue 35's probe: a JSONL file of 393 good cases and a bad line exited 2 with "before
the error: imported 393", the 393 cases, 19,650 events and their evaluations stored (a
file of 1,000 cases with a bad last line kept 50 on both databases). Here files spanning
several of the import's chunks, with the bad line, a changed case or a changed contract
at the end, leave every table as it was, on SQLite and PostgreSQL; a reader never sees
part of a file; a save waits for the file on SQLite and goes on beside it on PostgreSQL.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import text

from benchmarks.corpus import generate_corpus
from review_app.formats.options import ImportOptions
from review_app.services.access.actors import operator_actor
from review_app.services.cases.importing import CHUNK_EVENTS
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


def _bad_last(cases: list[dict[str, Any]]) -> int:
    """Break the last case's last event; its index."""
    index = len(cases) - 1
    good = cases[index]
    cases[index] = {**good, "transcript": [*good["transcript"][:-1], {"turn": "x"}]}
    return index


def test_a_good_then_bad_file_stores_nothing_and_fixed_imports_whole(
    run_cli: Any, database: Database, tmp_path: Path
) -> None:
    n_events = 50
    n_cases = 3 * CHUNK_EVENTS // n_events + 7  # three chunks and some, then the bad line
    cases = list(generate_corpus(n_cases, n_events))
    good = cases[-1]
    bad_index = _bad_last(cases)
    path = write_corpus(tmp_path / "big.jsonl", cases)
    before = row_counts(database.engine)
    with database.engine.connect() as connection:
        audit_before = connection.execute(text("SELECT count(*) FROM audit_log")).scalar_one()

    result = run_cli("import", str(path), db=database.url)

    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {path}, line {bad_index + 1}, field transcript[")
    assert "stored" not in lines[0]
    assert row_counts(database.engine) == before
    with database.engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM audit_log")).scalar_one() == (
            audit_before
        )

    cases[bad_index] = good
    write_corpus(path, cases)
    again = run_cli("import", "--json", str(path), db=database.url)

    assert again.returncode == 0, again.stderr
    totals = orjson.loads(again.stdout)["totals"]
    assert (totals["unchanged"], totals["imported"]) == (0, n_cases)
    assert whole_cases(database) == (n_cases, n_cases)
    with database.engine.connect() as connection:
        entries = connection.execute(
            text("SELECT summary_json FROM audit_log WHERE action = 'cases_import'")
        ).all()
    assert [orjson.loads(e[0])["imported"] for e in entries] == [n_cases]  # one entry a file


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
    assert row_counts(database.engine) == before


def test_a_reader_never_sees_part_of_a_file_and_a_save_is_kept(
    database: Database, tmp_path: Path
) -> None:
    """While a large file imports in a child process, another connection reads how many
    cases are stored and saves a row now and then: it sees none of the file or all of
    it, and every save is stored (on SQLite it waits for the file's transaction, within
    the busy timeout; on PostgreSQL it goes on beside it)."""
    n_cases, n_events = 4000, 50
    path = write_corpus(tmp_path / "large.jsonl", list(generate_corpus(n_cases, n_events)))
    importer = subprocess.Popen(
        [*review_app_command(), "import", str(path), "--db", database.url],
        env=cli_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: set[int] = set()
    saves = 0
    try:
        while importer.poll() is None:
            with database.engine.begin() as connection:
                seen.add(int(connection.execute(text("SELECT count(*) FROM cases")).scalar_one()))
                connection.execute(
                    text(
                        "INSERT INTO reviewers (name, role, active, created_at) "
                        "VALUES (:name, 'reviewer', TRUE, CURRENT_TIMESTAMP)"
                    ),
                    {"name": f"saver-{saves}"},
                )
            saves += 1
            time.sleep(0.05)
    finally:
        out, err = importer.communicate(timeout=300)
    assert importer.returncode == 0, err
    assert f"imported {n_cases}," in out
    assert seen <= {0, n_cases}, sorted(seen)
    assert saves > 0
    with database.engine.connect() as connection:
        stored = connection.execute(
            text("SELECT count(*) FROM reviewers WHERE name LIKE 'saver-%'")
        ).scalar_one()
    assert stored == saves


def test_a_changed_case_at_the_end_stores_nothing_and_replace_stores_the_file(
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
    before = row_counts(database.engine)

    try:
        import_paths(database.engine, operator_actor(), [path], on_file_done=heard.append)
    except InputError as error:
        message = str(error)
    else:
        raise AssertionError("the changed case was not refused")

    assert message.startswith(f"{path}, line {changed_index + 1}, field case_id: case ")
    assert heard == []
    assert row_counts(database.engine) == before
    assert whole_cases(database) == (1, 1)

    summary = import_paths(database.engine, operator_actor(), [path], ImportOptions(replace=True))

    totals = summary.totals
    assert (totals.unchanged, totals.replaced, totals.imported) == (0, 1, n_cases)
    assert whole_cases(database) == (n_cases, n_cases)


def test_a_changed_contract_at_the_end_stores_nothing(database: Database, tmp_path: Path) -> None:
    from review_app.errors import InputError
    from review_app.services.cases.importing import import_paths

    n_events = 40
    cases = list(generate_corpus(2 * CHUNK_EVENTS // n_events + 3, n_events, seed=5))
    last = cases[-1]
    contract = {
        **last["contract"],
        "roles": {**last["contract"]["roles"], "extra": {"allowed_actions": []}},
    }
    cases[-1] = {**last, "case_id": "changed-contract", "contract": contract}
    path = write_corpus(tmp_path / "contract.jsonl", cases)
    before = row_counts(database.engine)
    try:
        import_paths(database.engine, operator_actor(), [path])
    except InputError as error:
        assert "field contract" in str(error)
    else:
        raise AssertionError("the changed contract was not refused")
    assert row_counts(database.engine) == before
