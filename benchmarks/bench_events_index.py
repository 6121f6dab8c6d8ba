"""The covering index ``events(actor, case_id, turn)``: what it costs an import, what it
saves the drift report, both measured in one run.

    PYTHONPATH=. python benchmarks/bench_events_index.py [--cases 20000] [--events 50]
        [--large-cases 100000] [--rounds 3]

Prints figures; asserts nothing.

1. Import: ``import_paths`` of the foundation corpus (``--cases`` x ``--events``, the
   corpus of ``bench_foundation.py``) into a fresh SQLite file, in a child process per
   run, with the index and without it (dropped before the import), rounds alternating.
2. Drift: on a database built by ``benchmarks/large_db.py`` (``--large-cases``
   conversations), the query the drift report starts from (every assistant unit,
   ``storage.cases.assistant_units``; and as it was before, with ``DISTINCT``
   and ``ORDER BY`` in SQL) and the whole ``drift_report`` (300 resamples, as the pages
   ask for it), with the index and without, rounds alternating (the index is dropped
   and created again between them; the database is left without it).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.corpus import write_corpus  # noqa: E402

INDEX = "ix_events_actor_case_turn"
CREATE = f"CREATE INDEX IF NOT EXISTS {INDEX} ON events (actor, case_id, turn)"
DROP = f"DROP INDEX IF EXISTS {INDEX}"

_CHILD = """
import sys, time
from sqlalchemy import text
from storage.engine import shared_engine
from review_app.services.cases.importing import import_paths
from review_app.services.access.actors import operator_actor
engine = shared_engine(sys.argv[1])
with engine.begin() as connection:
    connection.execute(text(sys.argv[3]))
start = time.perf_counter()
summary = import_paths(engine, operator_actor(), [sys.argv[2]])
print(time.perf_counter() - start, summary.totals.imported)
"""


def _import_seconds(corpus: Path, db: Path, *, indexed: bool) -> float:
    output = subprocess.run(
        [sys.executable, "-c", _CHILD, f"sqlite:///{db}", str(corpus), CREATE if indexed else DROP],
        check=True,
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    ).stdout.split()
    return float(output[0])


def _summary(name: str, values: list[float]) -> str:
    runs = ", ".join(f"{v:.2f}" for v in values)
    return f"  {name:<34} median {statistics.median(values):7.2f} s   (runs: {runs})"


def bench_import(corpus: Path, workdir: Path, rounds: int) -> None:
    times: dict[bool, list[float]] = {False: [], True: []}
    for round_number in range(rounds):
        order = (False, True) if round_number % 2 == 0 else (True, False)
        for indexed in order:
            db = workdir / f"import-{round_number}-{int(indexed)}.db"
            times[indexed].append(_import_seconds(corpus, db, indexed=indexed))
            for leftover in workdir.glob(f"{db.name}*"):
                leftover.unlink()
    without, with_ = statistics.median(times[False]), statistics.median(times[True])
    print(f"\n[import] {corpus.stat().st_size / 1e6:,.0f} MB of JSONL, {rounds} alternating rounds")
    print(_summary("import without the index", times[False]))
    print(_summary("import with the index", times[True]))
    print(f"  the index costs the import {with_ / without:.3f}x (ratio of medians)")


def _previous_assistant_units(session: Any) -> list[tuple[str, int]]:
    """The drift report's first query as it was: ``DISTINCT`` and ``ORDER BY`` in SQL."""
    from sqlalchemy import select
    from sqlmodel import col

    from storage.models import Event

    query = (
        select(col(Event.case_id), col(Event.turn))
        .where(col(Event.actor) == "assistant")
        .distinct()
        .order_by(col(Event.case_id), col(Event.turn))
    )
    return [(case_id, int(turn)) for case_id, turn in session.execute(query)]


def bench_drift(db_path: Path, rounds: int) -> None:
    from sqlmodel import Session

    from review_app.rubrics.catalog import default_rubrics_dir, get_rubric, load_rubrics
    from review_app.services.access.actors import operator_actor
    from review_app.services.exchange.demo import DEMO_RUBRIC
    from review_app.services.judging.drift import drift_report
    from storage.cases import assistant_units
    from storage.engine import create_database_engine, read_only

    raw = sqlite3.connect(db_path, isolation_level=None)
    engine = create_database_engine(f"sqlite:///{db_path}")
    rubric = get_rubric(load_rubrics(default_rubrics_dir()), DEMO_RUBRIC)
    queries = {"previous query": _previous_assistant_units, "query now": assistant_units}
    seconds: dict[tuple[str, bool], list[tuple[float, float]]] = {}
    plans: dict[bool, str] = {}
    units = 0
    for round_number in range(rounds):
        order = (True, False) if round_number % 2 == 0 else (False, True)
        for indexed in order:
            raw.execute(CREATE if indexed else DROP)
            if indexed:
                raw.execute(f"ANALYZE {INDEX}")
            with closing(sqlite3.connect(db_path)) as fresh:  # no statement cached before
                plans[indexed] = "; ".join(
                    row[-1]
                    for row in fresh.execute(
                        "EXPLAIN QUERY PLAN SELECT DISTINCT case_id, turn FROM events "
                        "WHERE actor = 'assistant' ORDER BY case_id, turn"
                    )
                )
            engine.dispose()  # no statement cached with the old schema
            for name, function in queries.items():
                with Session(read_only(engine)) as session:
                    function(session)  # warm: the pages run warm
                    wall, cpu = time.perf_counter(), time.process_time()
                    units = len(function(session))
                    seconds.setdefault((name, indexed), []).append(
                        (time.perf_counter() - wall, time.process_time() - cpu)
                    )
            wall, cpu = time.perf_counter(), time.process_time()
            drift_report(engine, operator_actor(), rubric=rubric, n_resamples=300)
            seconds.setdefault(("drift report", indexed), []).append(
                (time.perf_counter() - wall, time.process_time() - cpu)
            )
    raw.execute(DROP)
    raw.close()
    engine.dispose()
    print(f"\n[drift] {units:,} assistant units, {rounds} alternating rounds (wall; CPU)")
    print(f"  plan of the previous query without the index: {plans[False]}")
    print(f"  plan of the previous query with the index:    {plans[True]}")
    for (name, indexed), values in seconds.items():
        walls = [w for w, _ in values]
        print(
            _summary(f"{name}, {'with' if indexed else 'without'} the index", walls)
            + f"   CPU median {statistics.median(c for _, c in values):6.2f} s"
        )
    base = statistics.median(w for w, _ in seconds[("previous query", False)])
    for name, indexed in (("query now", False), ("previous query", True), ("query now", True)):
        ratio = base / statistics.median(w for w, _ in seconds[(name, indexed)])
        print(
            f"  {name} {'with' if indexed else 'without'} the index: {ratio:.1f}x as fast as "
            "the previous query without it"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=20_000)
    parser.add_argument("--events", type=int, default=50)
    parser.add_argument("--large-cases", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--large-db", type=Path, help="reuse this database (built if missing)")
    parser.add_argument("--skip-import", action="store_true")
    parser.add_argument("--skip-drift", action="store_true")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="role-review-index-") as tmp:
        workdir = Path(tmp)
        if not args.skip_import:
            corpus = workdir / "corpus.jsonl"
            write_corpus(corpus, args.cases, args.events)
            bench_import(corpus, workdir, args.rounds)
        if not args.skip_drift:
            from benchmarks.large_db import build_large_database

            db_path = args.large_db or workdir / "large.db"
            if not db_path.exists():
                built = build_large_database(db_path, n_cases=args.large_cases)
                print(f"\nlarge database: {built.line()}")
            bench_drift(db_path, args.rounds)


if __name__ == "__main__":
    main()
