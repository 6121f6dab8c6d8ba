"""What ``PRAGMA synchronous=FULL`` costs a SQLite label save, beside ``NORMAL``.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_durability.py [--saves 300] [--rounds 3]

One SQLite file (WAL), one reviewer saving labels one after the other through
``record_label``, in alternating rounds with the engine's ``synchronous=FULL`` and
with ``NORMAL`` set on each new connection, so both see the same machine load.
Prints p50 / p99 / mean save latency per setting and the ratio FULL / NORMAL.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sqlalchemy import event, text  # noqa: E402

from benchmarks.corpus import write_corpus  # noqa: E402
from benchmarks.reliability import EVENTS_PER_CASE  # noqa: E402
from review_app.services.access.actors import operator_actor, sign_in  # noqa: E402
from review_app.services.cases.importing import import_paths  # noqa: E402
from review_app.services.labels.labeling import record_label  # noqa: E402
from review_app.services.rubrics.rubric_catalog import sync_rubrics  # noqa: E402
from storage.engine import create_database_engine  # noqa: E402
from storage.migrations.upgrade import upgrade_database  # noqa: E402


def _engine(url: str, synchronous: str) -> Any:
    engine = create_database_engine(url)
    if synchronous != "FULL":

        @event.listens_for(engine, "connect")
        def _relax(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute(f"PRAGMA synchronous={synchronous}")
            cursor.close()

    return engine


def _saves(url: str, synchronous: str, n: int, offset: int) -> list[float]:
    engine = _engine(url, synchronous)
    with engine.connect() as connection:
        setting = connection.execute(text("PRAGMA synchronous")).scalar_one()
        assert setting == {"FULL": 2, "NORMAL": 1}[synchronous], setting
    rubric = sync_rubrics(engine, operator_actor()).get("role-adherence@1")
    actor = sign_in(engine, name="bench", auth_mode="local")
    with engine.connect() as connection:
        units = list(
            connection.execute(
                text("SELECT case_id, turn FROM events WHERE actor = 'assistant' ORDER BY 1, 2")
            )
        )
    latencies = []
    for index in range(n):
        case_id, turn = units[(offset + index) % len(units)]
        code = ("in_role", "scope_break")[index % 2]
        started = time.perf_counter()
        record_label(engine, actor, case_id=case_id, turn=turn, rubric=rubric, code=code)
        latencies.append(time.perf_counter() - started)
    engine.dispose()
    return latencies


def _line(name: str, latencies: list[float]) -> str:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return (
        f"  synchronous={name:<6} {len(ordered)} saves: p50 {statistics.median(ordered) * 1e3:.2f} "
        f"ms, p99 {p99 * 1e3:.2f} ms, mean {statistics.fmean(ordered) * 1e3:.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--saves", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{Path(directory) / 'review.db'}"
        engine = create_database_engine(url)
        upgrade_database(engine)
        corpus = Path(directory) / "corpus.jsonl"
        write_corpus(corpus, 200, EVENTS_PER_CASE, seed=5)
        import_paths(engine, operator_actor(), [corpus])
        engine.dispose()
        results: dict[str, list[float]] = {"FULL": [], "NORMAL": []}
        for round_ in range(args.rounds):
            for name in ("NORMAL", "FULL") if round_ % 2 else ("FULL", "NORMAL"):
                results[name] += _saves(url, name, args.saves, offset=round_ * args.saves)
    print(f"label saves on one SQLite file (WAL), {args.rounds} alternating rounds")
    for name, latencies in results.items():
        print(_line(name, latencies))
    ratio = statistics.median(results["FULL"]) / statistics.median(results["NORMAL"])
    print(f"  FULL / NORMAL (p50): {ratio:.2f}x")


if __name__ == "__main__":
    main()
