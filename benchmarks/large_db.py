"""A large SQLite database shaped like the demo, built in well under a minute.

    PYTHONPATH=. python benchmarks/large_db.py PATH [--cases 100000]

The demo (``review-app demo``: 17 conversations, reviewers ana, ben and chloe, the
policy owner olivia, two judge runs, 333 labels) is loaded through the services, then
every table is grown by copying the demo's rows inside SQLite (``INSERT ... SELECT``,
no per-row Python): ``--cases`` conversations in all, each a copy of a demo
conversation under a new id (``<demo id>-c000123``), with its events, evaluation and
findings; judge run v1's verdicts on every assistant turn of every copy, run v2's on
the first ``labeled`` copies only; the reviewers' labels and queue entries on the
first ``labeled`` copies (about 2,000 cases); gold labels (olivia, from ana's labels)
on the first ``gold`` copies. The statistics the query planner uses are refreshed
(``ANALYZE``) at the end.

Used by ``tests/test_browser_wide.py`` and ``benchmarks/bench_pages_large.py``.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

LOCAL_USER = "lee"
"""The admin the demo is loaded for (``load_demo(local_user=...)``)."""


@dataclass(frozen=True)
class LargeDatabase:
    path: Path
    cases: int
    events: int
    verdicts: int
    labels: int
    gold: int
    seconds: float

    def line(self) -> str:
        return (
            f"{self.cases:,} cases, {self.events:,} events, {self.verdicts:,} judge verdicts, "
            f"{self.labels:,} labels, {self.gold:,} gold labels in {self.seconds:.1f} s"
        )


def load_demo_database(path: Path, *, local_user: str = LOCAL_USER) -> None:
    """The demo in a fresh SQLite file at ``path``, with ``local_user`` an admin."""
    from review_app.services.access.actors import operator_actor
    from review_app.services.exchange.demo import load_demo
    from storage.engine import create_database_engine
    from storage.migrations.upgrade import upgrade_database

    engine = create_database_engine(f"sqlite:///{path}")
    try:
        upgrade_database(engine)
        load_demo(engine, operator_actor(), local_user=local_user)
    finally:
        engine.dispose()


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in db.execute(f"PRAGMA table_info({table})")]


def _copy(
    db: sqlite3.Connection, table: str, *, where: str = "", skip: tuple[str, ...] = ("id",)
) -> None:
    """Each row of ``table`` of a demo case once per copy of that case (``clone``)."""
    columns = [c for c in _columns(db, table) if c not in skip]
    chosen = ", ".join(columns)
    taken = ", ".join("c.case_id" if c == "case_id" else f"t.{c}" for c in columns)
    db.execute(
        f"INSERT INTO {table} ({chosen}) SELECT {taken} FROM clone c "
        f"JOIN {table} t ON t.case_id = c.src {where}"
    )


def build_large_database(
    path: Path,
    *,
    n_cases: int = 100_000,
    labeled: int = 2_000,
    gold: int = 500,
    local_user: str = LOCAL_USER,
) -> LargeDatabase:
    """The demo grown to ``n_cases`` conversations in a new SQLite file at ``path``."""
    started = time.perf_counter()
    load_demo_database(path, local_user=local_user)
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=OFF")
        db.execute("BEGIN IMMEDIATE")
        demo = [row[0] for row in db.execute("SELECT case_id FROM cases ORDER BY case_id")]
        n_copies = max(0, n_cases - len(demo))
        db.execute("CREATE TEMP TABLE clone (case_id TEXT PRIMARY KEY, src TEXT, k INTEGER)")
        db.executemany(
            "INSERT INTO clone VALUES (?, ?, ?)",
            ((f"{demo[k % len(demo)]}-c{k:06d}", demo[k % len(demo)], k) for k in range(n_copies)),
        )
        _copy(db, "cases", skip=())
        _copy(db, "events", skip=())
        _copy(db, "evaluations", skip=())
        _copy(db, "findings")
        runs = dict(db.execute("SELECT prompt_version, id FROM judge_runs"))
        first, *later = sorted(runs.values())
        _copy(db, "judge_verdicts", where=f"WHERE t.run_id = {first}")
        for run in later:
            _copy(db, "judge_verdicts", where=f"WHERE t.run_id = {run} AND c.k < {labeled}")
        _copy(db, "labels", where=f"WHERE c.k < {labeled}")
        _copy(db, "assignments", where=f"WHERE c.k < {labeled}")
        (owner,) = db.execute("SELECT id FROM reviewers WHERE role = 'policy_owner'").fetchone()
        (ana,) = db.execute("SELECT id FROM reviewers WHERE name = 'ana'").fetchone()
        db.execute(
            "INSERT INTO gold_labels (case_id, turn, rubric_id, rubric_version, code, "
            "calibration_item, adjudicator_id, current, created_at, stale) "
            "SELECT l.case_id, l.turn, l.rubric_id, l.rubric_version, l.code, 0, ?, 1, "
            "l.created_at, 0 FROM labels l JOIN clone c ON c.case_id = l.case_id "
            "WHERE c.k < ? AND l.reviewer_id = ? AND l.current",
            (owner, gold, ana),
        )
        db.execute("DROP TABLE clone")
        db.execute("COMMIT")
        db.execute("ANALYZE")
        counts = {
            table: db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("cases", "events", "judge_verdicts", "labels", "gold_labels")
        }
    finally:
        db.close()
    return LargeDatabase(
        path,
        cases=counts["cases"],
        events=counts["events"],
        verdicts=counts["judge_verdicts"],
        labels=counts["labels"],
        gold=counts["gold_labels"],
        seconds=time.perf_counter() - started,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--cases", type=int, default=100_000)
    args = parser.parse_args()
    if args.path.exists():
        parser.error(f"{args.path} exists")
    print(build_large_database(args.path, n_cases=args.cases).line())


if __name__ == "__main__":
    main()
