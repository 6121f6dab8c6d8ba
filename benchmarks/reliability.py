"""Label saves under concurrency, on SQLite and PostgreSQL: nothing lost, nothing doubled.

Run from the repository root::

    PYTHONPATH=. python benchmarks/reliability.py [--processes 16] [--labels 300]
        [--same-reviewer 4] [--races 40] [--with-import N_EVENTS] [--kill]
        [--postgres URL | --no-postgres]

Per database (a fresh SQLite file; a fresh PostgreSQL schema), with a generated
corpus of support conversations (5 assistant turns each):

1. ``--processes`` processes, each signed in as its own reviewer, save ``--labels``
   labels each through ``record_label`` (the service the review page calls), on
   the same cases (so several reviewers label each unit).
2. ``--same-reviewer`` processes signed in as ONE reviewer save ``--labels`` labels
   each on the same units (two tabs, two servers): every unit is raced.
3. Two threads of one process save the same unit at the same instant (a barrier),
   ``--races`` times, for labels and for gold labels.

``--with-import N`` runs ``review-app import`` of a generated file of about N events
in a subprocess while step 1 runs. ``--kill`` SIGKILLs one label-writing process at
a random moment during step 2 and checks integrity afterwards.

Printed per step: saves attempted and saved, errors that reached the caller (must
be 0), p50 / p99 / max save latency; then the database's integrity: units with more
than one current label or gold label (must be 0) and assignments whose progress
count differs from their current labels (must be 0).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.corpus import generate_corpus  # noqa: E402

RUBRIC = "role-adherence@1"
CODES = ("in_role", "scope_break", "persona_break", "borderline")
EVENTS_PER_CASE = 10


# --- workers (separate processes: each opens its own engine, as a server would) -----------


def _units(url: str) -> list[tuple[str, int]]:
    from sqlalchemy import text

    from storage.engine import create_database_engine

    engine = create_database_engine(url)
    with engine.connect() as connection:
        rows = connection.execute(
            text(
                "SELECT case_id, turn FROM events WHERE actor = 'assistant' ORDER BY case_id, turn"
            )
        )
        units = [(row[0], row[1]) for row in rows]
    engine.dispose()
    return units


def label_worker(
    url: str,
    reviewer: str,
    units: list[tuple[str, int]],
    n_labels: int,
    seed: int,
    barrier: Any,
    results: Any,
) -> None:
    from review_app.services.labeling import record_label
    from review_app.services.people import sign_in
    from review_app.services.rubric_catalog import sync_rubrics
    from storage.engine import create_database_engine

    engine = create_database_engine(url)
    rubric = sync_rubrics(engine).get(RUBRIC)
    actor = sign_in(engine, name=reviewer, auth_mode="local")
    rng = random.Random(seed)
    latencies: list[float] = []
    errors: list[str] = []
    saved = 0
    barrier.wait()
    for index in range(n_labels):
        case_id, turn = units[index % len(units)]
        started = time.perf_counter()
        try:
            record_label(
                engine, actor, case_id=case_id, turn=turn, rubric=rubric, code=rng.choice(CODES)
            )
            saved += 1
        except Exception as error:  # counted and printed: the point of the script
            errors.append(f"{type(error).__name__}: {str(error).splitlines()[0][:120]}")
        latencies.append(time.perf_counter() - started)
    engine.dispose()
    results.put({"attempted": n_labels, "saved": saved, "errors": errors, "latencies": latencies})


# --- steps ------------------------------------------------------------------------------


def _latency_line(latencies: list[float]) -> str:
    if not latencies:
        return "no saves"
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return (
        f"p50 {statistics.median(ordered) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, "
        f"max {ordered[-1] * 1000:.1f} ms"
    )


def run_processes(
    url: str,
    *,
    reviewers: list[str],
    units: list[tuple[str, int]],
    n_labels: int,
    kill_one: bool = False,
    label: str,
) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(len(reviewers) + 1)  # the workers and this process
    results = context.Queue()
    processes = []
    for index, reviewer in enumerate(reviewers):
        order = list(units)
        random.Random(index).shuffle(order)
        process = context.Process(
            target=label_worker,
            args=(url, reviewer, order, n_labels, index, barrier, results),
        )
        process.start()
        processes.append(process)
    barrier.wait(timeout=600)  # every worker has started and signed in
    started = time.perf_counter()
    killed = None
    if kill_one:
        time.sleep(random.uniform(0.2, 1.5))  # somewhere in the saves
        victim = processes[0]
        if victim.pid is not None and victim.is_alive():
            os.kill(victim.pid, signal.SIGKILL)
            killed = victim.pid
    collected = []
    for process in processes:
        if killed is not None and process.pid == killed:
            process.join()
            continue
        collected.append(results.get(timeout=1800))
    for process in processes:
        process.join()
    elapsed = time.perf_counter() - started
    attempted = sum(r["attempted"] for r in collected)
    saved = sum(r["saved"] for r in collected)
    errors = [e for r in collected for e in r["errors"]]
    latencies = [x for r in collected for x in r["latencies"]]
    print(
        f"  {label}: saved {saved} of {attempted} attempted in {elapsed:.1f} s "
        f"({saved / elapsed:.0f}/s); errors surfaced {len(errors)}; {_latency_line(latencies)}"
        + (f"; SIGKILLed pid {killed} (its saves not counted)" if killed else "")
    )
    for error in sorted(set(errors))[:5]:
        print(f"    {errors.count(error)} x {error}")
    return {"saved": saved, "attempted": attempted, "errors": len(errors)}


def run_races(url: str, *, rounds: int) -> None:
    from review_app.services.adjudication import record_gold
    from review_app.services.labeling import record_label
    from review_app.services.people import Actor, sign_in
    from review_app.services.rubric_catalog import sync_rubrics
    from storage.engine import create_database_engine

    engine = create_database_engine(url)
    rubric = sync_rubrics(engine).get(RUBRIC)
    tab = sign_in(engine, name="two-tabs", auth_mode="local")
    owner = Actor.operator()
    case_id, turn = _units(url)[0]

    def race(call: Callable[[str], Any]) -> tuple[int, list[float], list[str]]:
        errors: list[str] = []
        latencies: list[float] = []
        for _ in range(rounds):
            barrier = threading.Barrier(2)

            def run(code: str, barrier: threading.Barrier = barrier) -> None:
                barrier.wait()
                started = time.perf_counter()
                try:
                    call(code)
                except Exception as error:
                    errors.append(f"{type(error).__name__}: {str(error).splitlines()[0][:120]}")
                latencies.append(time.perf_counter() - started)

            threads = [threading.Thread(target=run, args=(c,)) for c in ("in_role", "scope_break")]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        return 2 * rounds - len(errors), latencies, errors

    for name, call in (
        (
            "labels",
            lambda code: record_label(
                engine, tab, case_id=case_id, turn=turn, rubric=rubric, code=code
            ),
        ),
        (
            "gold",
            lambda code: record_gold(
                engine, owner, rubric=rubric, case_id=case_id, turn=turn, code=code
            ),
        ),
    ):
        saved, latencies, errors = race(call)
        print(
            f"  2 threads racing on one unit, {name}, {rounds} rounds: saved {saved} of "
            f"{2 * rounds}; errors surfaced {len(errors)}; {_latency_line(latencies)}"
        )
        for error in sorted(set(errors))[:3]:
            print(f"    {errors.count(error)} x {error}")
    engine.dispose()


def integrity(url: str) -> dict[str, int]:
    from sqlalchemy import text

    from storage.engine import create_database_engine

    engine = create_database_engine(url)
    queries = {
        "units with >1 current label": (
            "SELECT count(*) FROM (SELECT 1 FROM labels WHERE current GROUP BY rubric_id, "
            "rubric_version, case_id, turn, reviewer_id HAVING count(*) > 1) d"
        ),
        "units with >1 current gold label": (
            "SELECT count(*) FROM (SELECT 1 FROM gold_labels WHERE current GROUP BY rubric_id, "
            "rubric_version, case_id, turn HAVING count(*) > 1) d"
        ),
        "assignments with a wrong progress count": (
            "SELECT count(*) FROM assignments a WHERE a.labeled_turns <> (SELECT count(*) "
            "FROM labels l WHERE l.current AND l.case_id = a.case_id AND l.reviewer_id = "
            "a.reviewer_id AND l.rubric_id = a.rubric_id AND l.rubric_version = a.rubric_version)"
        ),
        "current labels without an assignment": (
            "SELECT count(*) FROM labels l WHERE l.current AND NOT EXISTS (SELECT 1 FROM "
            "assignments a WHERE l.case_id = a.case_id AND l.reviewer_id = a.reviewer_id AND "
            "l.rubric_id = a.rubric_id AND l.rubric_version = a.rubric_version)"
        ),
    }
    found = {}
    with engine.connect() as connection:
        for name, sql in queries.items():
            found[name] = int(connection.execute(text(sql)).scalar_one())
        labels = int(connection.execute(text("SELECT count(*) FROM labels")).scalar_one())
        current = int(
            connection.execute(text("SELECT count(*) FROM labels WHERE current")).scalar_one()
        )
    engine.dispose()
    print(
        f"  integrity: {labels} label rows, {current} current; "
        + "; ".join(f"{name}: {count}" for name, count in found.items())
    )
    return found


def write_corpus(path: Path, n_cases: int, *, seed: int, prefix: str = "") -> None:
    with path.open("w", encoding="utf-8") as handle:
        for case in generate_corpus(n_cases, EVENTS_PER_CASE, seed=seed):
            if prefix:
                case["case_id"] = prefix + case["case_id"]
            handle.write(json.dumps(case) + "\n")


def _cli(*args: str, url: str) -> subprocess.Popen[str]:
    environment = dict(os.environ)
    environment["PYTHONPATH"] = str(REPO) + os.pathsep + environment.get("PYTHONPATH", "")
    return subprocess.Popen(
        [sys.executable, "-m", "review_app", *args, "--db", url],
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_database(name: str, url: str, args: argparse.Namespace, workdir: Path) -> None:
    from review_app.services.importing import import_paths
    from review_app.services.rubric_catalog import sync_rubrics
    from storage.engine import create_database_engine
    from storage.migrations import upgrade_database

    print(f"\n== {name} ==")
    engine = create_database_engine(url)
    upgrade_database(engine)
    n_cases = max(4, -(-args.labels // 5))  # enough units for every save to be a new one
    corpus = workdir / f"{name}-corpus.jsonl"
    write_corpus(corpus, n_cases, seed=3)
    import_paths(engine, [corpus])
    sync_rubrics(engine)
    engine.dispose()
    units = _units(url)
    print(f"  corpus: {n_cases} cases, {len(units)} assistant turns")

    importer = None
    if args.with_import:
        big = workdir / f"{name}-import.jsonl"
        write_corpus(big, max(1, args.with_import // EVENTS_PER_CASE), seed=11, prefix="imp-")
        started = time.perf_counter()
        importer = _cli("import", str(big), url=url)
        print(f"  importing {args.with_import} events in a subprocess meanwhile")
    run_processes(
        url,
        reviewers=[f"reviewer-{i:02d}" for i in range(args.processes)],
        units=units,
        n_labels=args.labels,
        label=f"{args.processes} processes x {args.labels} labels, distinct reviewers",
    )
    if importer is not None:
        _, stderr = importer.communicate()
        print(
            f"  the import finished {time.perf_counter() - started:.1f} s after it started, "
            f"exit {importer.returncode}" + (f": {stderr.strip()[:200]}" if stderr.strip() else "")
        )
    run_processes(
        url,
        reviewers=["same-reviewer"] * args.same_reviewer,
        units=units[: max(5, args.labels // 4)],
        n_labels=args.labels,
        label=f"{args.same_reviewer} processes x {args.labels} labels as ONE reviewer",
    )
    run_races(url, rounds=args.races)
    integrity(url)
    if args.kill:
        run_processes(
            url,
            reviewers=["killed-reviewer"] * 2,
            units=units[:10],
            n_labels=args.labels * 4,
            kill_one=True,
            label="2 processes as one reviewer, one SIGKILLed mid-run",
        )
        integrity(url)


def postgres_reachable(url: str) -> str | None:
    from sqlalchemy import create_engine, text

    try:
        probe = create_engine(url, connect_args={"connect_timeout": 3})
        with probe.connect() as connection:
            connection.execute(text("SELECT 1"))
        probe.dispose()
        return None
    except Exception as error:
        return str(error).splitlines()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=16)
    parser.add_argument("--labels", type=int, default=300, help="saves per process")
    parser.add_argument("--same-reviewer", type=int, default=4)
    parser.add_argument("--races", type=int, default=40)
    parser.add_argument("--with-import", type=int, default=0, metavar="N_EVENTS")
    parser.add_argument("--kill", action="store_true")
    parser.add_argument(
        "--postgres",
        default=os.environ.get(
            "REVIEW_APP_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
        ),
    )
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    print(
        f"reliability: {args.processes} x {args.labels} saves, {args.same_reviewer} processes "
        f"as one reviewer, {args.races} races; cpus {os.cpu_count()}"
    )
    with tempfile.TemporaryDirectory() as directory:
        workdir = Path(directory)
        run_database("sqlite", f"sqlite:///{workdir / 'review.db'}", args, workdir)
        if args.no_postgres:
            return
        reason = postgres_reachable(args.postgres)
        if reason is not None:
            print(f"\nPostgreSQL skipped: {reason}")
            return
        from sqlalchemy import create_engine, text

        schema = f"bench_{uuid.uuid4().hex[:8]}"
        admin = create_engine(args.postgres)
        with admin.begin() as connection:
            connection.execute(text(f"CREATE SCHEMA {schema}"))
        separator = "&" if "?" in args.postgres else "?"
        try:
            run_database(
                "postgresql",
                f"{args.postgres}{separator}options=-csearch_path%3D{schema}",
                args,
                workdir,
            )
        finally:
            with admin.begin() as connection:
                connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
            admin.dispose()


if __name__ == "__main__":
    main()
