"""Sixteen reviewers saving at once into one SQLite file: how long a save waits.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_writers.py [--writers 16] [--seconds 20]
        [--pause-ms 50] [--modes fifo,sqlite]

Each writer is its own process with its own engine, signed in as its own reviewer,
and saves labels through ``labeling.record_label`` (the review page's save) one
after another with ``--pause-ms`` between saves (a reviewer's key presses, sped up).
Modes alternate in one run so both see the same machine load:

* ``fifo``: the engine's write queue (``storage/engine.py``): writers wait their
  turn in arrival order for a lock file beside the database, then ``BEGIN IMMEDIATE``.
* ``sqlite``: SQLite's own busy handler alone (sleeps of 1 ms up to 100 ms between
  retries, so a writer that has waited long can lose the lock again and again to
  newcomers).

Prints p50 / p99 / max save latency, saves per second, and the saves acknowledged
but missing afterwards (always 0 unless something is broken). Asserts nothing.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sqlalchemy import text  # noqa: E402

from benchmarks.summary import record  # noqa: E402
from review_app.services.access.actors import operator_actor, sign_in  # noqa: E402
from review_app.services.exchange.demo import load_demo  # noqa: E402
from review_app.services.labels.labeling import record_label  # noqa: E402
from review_app.services.rubrics.rubric_catalog import sync_rubrics  # noqa: E402
from review_app.services.team.people import add_person  # noqa: E402
from review_app.services.team.queue import assign_cases  # noqa: E402
from storage.engine import create_database_engine  # noqa: E402
from storage.migrations.upgrade import upgrade_database  # noqa: E402

RUBRIC = "role-adherence@1"


def prepare(url: str, writers: int) -> dict[str, list[tuple[str, int]]]:
    """The demo database with ``writers`` reviewers given every valid case (less the
    cases the demo's own reviewers already fill up); each writer's assistant turns."""
    engine = create_database_engine(url)
    upgrade_database(engine)
    load_demo(engine, operator_actor())
    names = [f"writer{i:02d}" for i in range(writers)]
    for name in names:
        add_person(engine, operator_actor(), name=name, role="reviewer")
    rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
    assign_cases(engine, operator_actor(), rubric=rubric, reviewers=names, overlap=writers)
    # Each writer saves only on the cases in its own queue: a save on any other case is
    # refused, and the benchmark would time refusals.
    with engine.connect() as connection:
        rows = connection.execute(
            text(
                "select r.name, e.case_id, e.turn from events e "
                "join assignments a on a.case_id = e.case_id "
                "join reviewers r on r.id = a.reviewer_id "
                "where e.actor = 'assistant' and r.name like 'writer%' order by 1, 2, 3"
            )
        ).all()
    engine.dispose()
    units: dict[str, list[tuple[str, int]]] = {name: [] for name in names}
    for name, case_id, turn in rows:
        units[str(name)].append((str(case_id), int(turn)))
    empty = [name for name, own in units.items() if not own]
    if empty:
        raise SystemExit(f"no case in the queue of {', '.join(empty)}")
    return units


def writer(
    url: str,
    name: str,
    units: list[tuple[str, int]],
    start: float,
    seconds: float,
    pause: float,
    fifo: bool,
    out: mp.Queue,
) -> None:
    os.environ["REVIEW_APP_SQLITE_WRITE_QUEUE"] = "1" if fifo else "0"
    engine = create_database_engine(url)
    actor = sign_in(engine, name=name, auth_mode="oidc")
    rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
    codes = list(rubric.codes)
    latencies: list[float] = []
    saved: list[tuple[str, int, str]] = []
    errors = 0
    while time.time() < start:
        time.sleep(0.001)
    i = 0
    while time.time() < start + seconds:
        case_id, turn = units[i % len(units)]
        code = codes[i % len(codes)]
        began = time.perf_counter()
        try:
            record_label(engine, actor, case_id=case_id, turn=turn, rubric=rubric, code=code)
        except Exception as error:
            errors += 1
            if errors == 1:
                print(f"{name}: {type(error).__name__}: {error}", flush=True)
        else:
            latencies.append(time.perf_counter() - began)
            saved.append((case_id, turn, code))
        i += 1
        time.sleep(pause)
    engine.dispose()
    out.put((name, latencies, saved, errors))


def run_mode(
    url: str, units: dict[str, list[tuple[str, int]]], args: argparse.Namespace, fifo: bool
):
    out: mp.Queue = mp.Queue()
    start = time.time() + 2.0
    processes = [
        mp.Process(
            target=writer,
            args=(
                url,
                f"writer{i:02d}",
                units[f"writer{i:02d}"][i:] + units[f"writer{i:02d}"][:i],
                start,
                args.seconds,
                args.pause_ms / 1000,
                fifo,
                out,
            ),
        )
        for i in range(args.writers)
    ]
    for process in processes:
        process.start()
    results = [out.get() for _ in processes]
    for process in processes:
        process.join()
    latencies = sorted(x for _, lat, _, _ in results for x in lat)
    errors = sum(e for *_, e in results)
    engine = create_database_engine(url)
    with engine.connect() as connection:
        current = dict(
            ((row[0], row[1], row[2]), row[3])
            for row in connection.execute(
                text(
                    "select r.name, l.case_id, l.turn, l.code from labels l "
                    "join reviewers r on r.id = l.reviewer_id where l.current"
                )
            )
        )
    engine.dispose()
    lost = sum(
        1
        for name, _, saved, _ in results
        if saved and current.get((name, saved[-1][0], saved[-1][1])) is None
    )
    return latencies, errors, lost


def quantile(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--pause-ms", type=float, default=50.0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--modes", default="fifo,sqlite")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}")
    print(
        f"{args.writers} writer processes, {args.seconds:g} s each mode, "
        f"{args.pause_ms:g} ms between a writer's saves"
    )
    modes = [m for m in args.modes.split(",") if m]
    with tempfile.TemporaryDirectory(prefix="role-review-writers-") as tmp:
        for round_ in range(args.rounds):
            for mode in modes:
                url = f"sqlite:///{Path(tmp) / f'{mode}-{round_}.db'}"
                units = prepare(url, args.writers)
                latencies, errors, lost = run_mode(url, units, args, fifo=(mode == "fifo"))
                n = len(latencies)
                print(
                    f"  {mode:<7} saves {n:6,d} ({n / args.seconds:6.1f}/s)  "
                    f"p50 {1000 * statistics.median(latencies):7.1f} ms  "
                    f"p99 {1000 * quantile(latencies, 0.99):7.1f} ms  "
                    f"max {1000 * latencies[-1]:7.1f} ms  errors {errors}  lost {lost}"
                )
                p99 = quantile(latencies, 0.99)
                record(
                    f"{args.writers} SQLite writers, {mode} queue: p99 save latency, lost and "
                    "failed saves",
                    f"{1000 * p99:.0f} ms, {lost} lost, {errors} failed",
                    target="< 2 s, none lost or failed" if mode == "fifo" else "",
                    met=(p99 < 2.0 and lost == 0 and errors == 0) if mode == "fifo" else None,
                )
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
