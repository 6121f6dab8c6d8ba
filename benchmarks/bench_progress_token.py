"""The queue's progress token against the count it saves, on a large database.

    PYTHONPATH=. python benchmarks/bench_progress_token.py [--cases 100000] [--history 1000000]
        [--rounds 7] [--db PATH]

Prints figures; asserts nothing.

The database is ``benchmarks/bench_ui.py``'s (``--cases`` generated conversations, all
in one reviewer's queue; ``--db`` keeps the file and reuses it), grown by ``--history``
rows in the labels table (copies of the reviewer's labels, not current: history, as
relabeling leaves) and as many in the audit log, so the tables the token reads are the
size a team reaches. In one process, rounds alternating, each timed with ``timeit``
(best of the round's repeats, per call):

* ``assignments.progress_token``: what every queue read now costs (three index lookups);
* ``assignments.queue_progress``: the count a kept entry saves (every assignment row of
  the reviewer);
* ``ProgressCounts.counts`` with the entry kept (token, compare, return) and with the
  token moved (token and count).

Also the query plan of the token (SQLite), which should name an index for each part.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import timeit
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.bench_ui import RUBRIC, build_database  # noqa: E402


def grow_history(path: Path, rows: int) -> None:
    """``rows`` more label rows (history) and audit entries, copied inside SQLite."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        have = db.execute("SELECT count(*) FROM audit_log").fetchone()[0]
        if have >= rows:
            return
        labels = [c[1] for c in db.execute("PRAGMA table_info(labels)") if c[1] != "id"]
        audit = [c[1] for c in db.execute("PRAGMA table_info(audit_log)") if c[1] != "id"]
        db.execute("BEGIN IMMEDIATE")
        db.execute(
            "CREATE TEMP TABLE n AS WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL "
            "SELECT i + 1 FROM k WHERE i < ?) SELECT i FROM k",
            (rows,),
        )
        n_labels = db.execute("SELECT count(*) FROM labels").fetchone()[0]
        copied = ", ".join("0" if c == "current" else f"l.{c}" for c in labels)
        db.execute(
            f"INSERT INTO labels ({', '.join(labels)}) SELECT {copied} FROM n "
            f"JOIN labels l ON l.id = 1 + (n.i % {n_labels})"
        )
        entry = ", ".join(
            "datetime('2024-01-01', '+' || n.i || ' seconds')" if c == "at" else f"a.{c}"
            for c in audit
        )
        db.execute(
            f"INSERT INTO audit_log ({', '.join(audit)}) SELECT {entry} FROM n "
            "JOIN audit_log a ON a.id = 1"
        )
        db.execute("DROP TABLE n")
        db.execute("COMMIT")
        db.execute("ANALYZE")
    finally:
        db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--history", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--db", type=Path, help="keep the database here (reused if present)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        path = args.db or Path(scratch) / "bench.db"
        if path.exists():
            print(f"reusing {path}")
        else:
            build_database(path, n_cases=args.cases, n_events=8)
        grow_history(path, args.history)
        measure(path, args.rounds)


def measure(path: Path, rounds: int) -> None:
    from sqlalchemy import event
    from sqlmodel import Session

    from benchmarks.bench_ui import REVIEWER
    from review_app.rubrics.catalog import default_rubrics_dir, get_rubric, load_rubrics
    from review_app.services.access.actors import sign_in
    from review_app.services.team.queue import ProgressCounts
    from storage import assignments
    from storage.engine import create_database_engine, read_only

    engine = create_database_engine(f"sqlite:///{path}")
    rubric = get_rubric(load_rubrics(default_rubrics_dir()), RUBRIC)
    reviewer = sign_in(engine, name=REVIEWER, auth_mode="local")
    reviewer_id = reviewer.reviewer_id
    assert reviewer_id is not None
    with engine.connect() as connection:
        sizes = {
            table: connection.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar_one()
            for table in ("cases", "assignments", "labels", "audit_log")
        }
    print(", ".join(f"{table}: {n:,}" for table, n in sizes.items()))

    session = Session(read_only(engine))
    counts = assignments.queue_progress(
        session, reviewer_id=reviewer_id, rubric_id=rubric.id, version=rubric.version
    )
    print(f"the reviewer's queue: {counts[1]:,} assigned, {counts[0]:,} completed")
    kept = ProgressCounts(ttl=3600)
    moved = ProgressCounts(ttl=0)  # every read counts: what a moved token costs

    calls = {
        "progress_token": lambda: assignments.progress_token(session),
        "queue_progress (the count)": lambda: assignments.queue_progress(
            session, reviewer_id=reviewer_id, rubric_id=rubric.id, version=rubric.version
        ),
        "counts, entry kept": lambda: kept.counts(
            session, engine, reviewer_id=reviewer_id, rubric=rubric
        ),
        "counts, token moved": lambda: moved.counts(
            session, engine, reviewer_id=reviewer_id, rubric=rubric
        ),
    }
    best: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            timer = timeit.Timer(call)
            number, _ = timer.autorange()
            best[name].append(min(timer.repeat(repeat=3, number=number)) / number)
    print(f"\n[per call, ms: median over {rounds} rounds of the best of 3 timeit repeats]")
    for name, values in best.items():
        print(f"  {name:<28} {statistics.median(values) * 1000:9.3f}")
    token = statistics.median(best["progress_token"])
    count = statistics.median(best["queue_progress (the count)"])
    print(f"  the count costs {count / token:,.0f}x the token")

    statements: list[str] = []

    def capture(*args: Any) -> None:
        statements.append(args[2])  # (connection, cursor, statement, parameters, ...)

    event.listen(engine, "before_cursor_execute", capture)
    with Session(read_only(engine)) as fresh:
        assignments.progress_token(fresh)
    event.remove(engine, "before_cursor_execute", capture)
    with engine.connect() as connection:
        plan = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statements[-1]}").all()
    print("\nquery plan of the token:")
    for row in plan:
        print(f"  {row[-1]}")
    session.close()
    engine.dispose()


if __name__ == "__main__":
    main()
