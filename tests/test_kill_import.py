"""``kill -9`` of an import or of a label save leaves a consistent database.

An import stores one file in one transaction with its audit entry; a label save is one
transaction. So a process killed at any point leaves the file's cases all stored or none
(each whole: events as many as the transcript, the evaluation, every finding), no row
without its case, an audit log that accounts for exactly the cases stored, one current
label per reviewer and unit, and exact progress counts; running the same import again
stores every case of the file exactly once.

The kills are real SIGKILLs of ``review-app`` subprocesses, on both backends: two at
fixed points (inside the file's transaction, after seven chunks' rows are written; right
after its commit), made deterministic by a harness that lowers the chunk size to a few
cases and kills its own process there; and a few after a random delay from a seeded
generator, from outside. The full random-kill run, at size, is
``benchmarks/reliability.py --kill``.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from benchmarks.corpus import generate_corpus
from benchmarks.reliability import case_integrity
from review_app.services.access.actors import Actor, sign_in
from review_app.services.cases.importing import import_paths
from review_app.services.labels.labeling import record_label
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from tests.actors import assign
from tests.conftest import Database, cli_environment

N_CASES = 300
EVENTS = 10
CHUNK_EVENTS = 5 * (EVENTS + 1)  # five cases per chunk: 60 chunks
PREFIX = "killed-"

# Runs ``review-app import`` (or a label save) in this process with a small fixed chunk
# size, and SIGKILLs itself at the point named on the command line.
HARNESS = """
import os, signal, sys

import review_app.services.cases.importing as importing

mode, count = sys.argv[1], int(sys.argv[2])
chunk = int(sys.argv[3])
importing.import_records.__kwdefaults__["chunk_events"] = chunk
calls = 0


def die_after(original):
    def wrapped(*args, **kwargs):
        global calls
        result = original(*args, **kwargs)
        calls += 1
        if calls == count:
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    return wrapped


if mode == "in-transaction":  # chunks' rows are written, the file's commit not yet made
    importing.insert_case_rows = die_after(importing.insert_case_rows)
elif mode == "after-commit":  # the file's transaction has committed
    importing.import_records = die_after(importing.import_records)
elif mode == "label-before-commit":  # a label save's statements ran; its commit not yet
    import sqlmodel

    from review_app.services.labels.labeling import record_label
    from review_app.services.access.actors import sign_in
    from review_app.services.rubrics.rubric_catalog import sync_rubrics
    from storage.engine import create_database_engine

    engine = create_database_engine(sys.argv[4])
    ana = sign_in(engine, name="ana", auth_mode="local")
    rubric = sync_rubrics(engine, ana).get("role-adherence@1")
    original = sqlmodel.Session.commit

    def commit(self):
        os.kill(os.getpid(), signal.SIGKILL)

    sqlmodel.Session.commit = commit
    record_label(engine, ana, case_id=sys.argv[5], turn=int(sys.argv[6]), rubric=rubric,
                 code="scope_break")
    sys.exit(3)  # not reached
from review_app.cli.application import main

sys.argv = ["review-app", "import", *sys.argv[4:]]
main()
"""


def _corpus(path: Path) -> Path:
    with path.open("w", encoding="utf-8") as out:
        for case in generate_corpus(N_CASES, EVENTS, seed=5):
            case["case_id"] = PREFIX + case["case_id"]
            out.write(json.dumps(case) + "\n")
    return path


def _harness(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    script = tmp_path / "harness.py"
    script.write_text(HARNESS, encoding="utf-8")
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        env=cli_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _assert_consistent(database: Database, corpus: Path, *, complete: bool = False) -> int:
    found = case_integrity(database.url, prefix=PREFIX, source=corpus.name)
    assert found["not whole"] == 0, found
    assert (found["orphan events"], found["orphan findings"], found["orphan evaluations"]) == (
        0,
        0,
        0,
    ), found
    assert found["imported by the audit log"] == found["stored"], found
    assert found["stored"] in ((N_CASES,) if complete else (0, N_CASES)), found
    return found["stored"]


def _rerun_completes(database: Database, corpus: Path, tmp_path: Path, stored: int) -> None:
    process = _harness(
        tmp_path, "none", "0", str(CHUNK_EVENTS), str(corpus), "--json", "--db", database.url
    )
    stdout, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr
    totals = json.loads(stdout)["totals"]
    assert (totals["unchanged"], totals["imported"]) == (stored, N_CASES - stored)
    _assert_consistent(database, corpus, complete=True)
    with database.engine.connect() as connection:
        rows = connection.execute(
            text("SELECT count(*), count(DISTINCT case_id) FROM cases WHERE case_id LIKE :p"),
            {"p": PREFIX + "%"},
        ).one()
    assert tuple(rows) == (N_CASES, N_CASES)


@pytest.mark.parametrize(("mode", "chunk"), [("in-transaction", 7), ("after-commit", 1)])
def test_an_import_killed_at_a_fixed_point_stores_all_or_nothing_and_a_rerun_completes(
    database: Database, tmp_path: Path, mode: str, chunk: int
) -> None:
    corpus = _corpus(tmp_path / "cases.jsonl")
    process = _harness(
        tmp_path, mode, str(chunk), str(CHUNK_EVENTS), str(corpus), "--db", database.url
    )
    process.communicate(timeout=600)

    assert process.returncode == -signal.SIGKILL
    stored = _assert_consistent(database, corpus)
    # killed inside the file's transaction (seven chunks written): nothing of it;
    # killed right after its commit: all of it
    assert stored == (0 if mode == "in-transaction" else N_CASES)
    _rerun_completes(database, corpus, tmp_path, stored)


def test_an_import_killed_after_random_delays_stores_all_or_nothing(
    database: Database, tmp_path: Path
) -> None:
    corpus = _corpus(tmp_path / "cases.jsonl")
    rng = random.Random(9)
    for _ in range(3):
        process = _harness(
            tmp_path, "none", "0", str(CHUNK_EVENTS), str(corpus), "--db", database.url
        )
        time.sleep(rng.uniform(0.5, 4.0))
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=600)
        _assert_consistent(database, corpus)
    _rerun_completes(database, corpus, tmp_path, _assert_consistent(database, corpus))


def test_a_label_save_killed_before_its_commit_leaves_one_current_label_and_exact_counts(
    database: Database, tmp_path: Path
) -> None:
    corpus = _corpus(tmp_path / "cases.jsonl")
    operator = Actor.operator()
    import_paths(database.engine, operator, [corpus])
    ana = sign_in(database.engine, name="ana", auth_mode="local")
    rubric = sync_rubrics(database.engine, operator).get("role-adherence@1")
    with database.engine.connect() as connection:
        case_id, first, second = connection.execute(
            text(
                "SELECT case_id, min(turn), max(turn) FROM events WHERE actor = 'assistant' "
                "AND case_id LIKE :p GROUP BY case_id ORDER BY case_id LIMIT 1"
            ),
            {"p": PREFIX + "%"},
        ).one()
    assign(database.engine, rubric, "ana", case_id)
    record_label(database.engine, ana, case_id=case_id, turn=first, rubric=rubric, code="in_role")

    for turn in (first, second):  # a relabel, then a first label on another turn
        process = _harness(
            tmp_path, "label-before-commit", "0", "0", database.url, case_id, str(turn)
        )
        _, stderr = process.communicate(timeout=600)
        assert process.returncode == -signal.SIGKILL, stderr

    def state() -> tuple[list[tuple[int, str]], int, int]:
        with database.engine.connect() as connection:
            labels = connection.execute(
                text("SELECT turn, code FROM labels WHERE current ORDER BY turn")
            ).all()
            rows = connection.execute(text("SELECT count(*) FROM labels")).scalar_one()
            progress = connection.execute(
                text("SELECT labeled_turns FROM assignments WHERE case_id = :c"), {"c": case_id}
            ).scalar_one()
        return [tuple(row) for row in labels], int(rows), int(progress)

    # neither killed save left a trace: one label row, still current, counted once
    assert state() == ([(first, "in_role")], 1, 1)
    # and the database takes the next save at once (no lock left behind)
    record_label(
        database.engine, ana, case_id=case_id, turn=second, rubric=rubric, code="scope_break"
    )
    assert state() == ([(first, "in_role"), (second, "scope_break")], 2, 2)
