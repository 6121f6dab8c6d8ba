"""Label saves under concurrency, on SQLite and PostgreSQL: nothing lost, nothing doubled.

Run from the repository root::

    PYTHONPATH=. python benchmarks/reliability.py [--processes 16] [--labels 300]
        [--same-reviewer 4] [--races 40] [--with-import N_EVENTS] [--kill]
        [--kill-rounds 3] [--kill-import-events 200000] [--seed 1]
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
in a subprocess while step 1 runs, and one more reviewer process saves a label every
50 ms for as long as that import runs: the longest any save started during the import
waited is printed (target: about a second on SQLite, whatever the import's size).

``--kill`` then SIGKILLs (``kill -9``):

* label writers: two processes as one reviewer saving on the same units, one killed
  at a random moment (``--kill-rounds`` times);
* an import: ``review-app import`` of a generated file of ``--kill-import-events``
  events, killed after a random delay (seeded by ``--seed``), ``--kill-rounds`` times,
  then run again to completion. After each kill every stored case must be whole (its
  events match its transcript length, it has its evaluation and all its findings),
  no event, finding or evaluation may be left without its case, and the audit log's
  import entries must account for exactly the cases stored; after the re-run every
  case of the file is stored once.

Printed per step: saves attempted and saved, errors that reached the caller (must
be 0), p50 / p99 / max save latency; then the database's integrity: units with more
than one current label or gold label (must be 0) and assignments whose progress
count differs from their current labels (must be 0).

    PYTHONPATH=. python benchmarks/reliability.py --with-import 1500000 --kill
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

from benchmarks.corpus import write_corpus  # noqa: E402

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
    stop: Any = None,
    pause: float = 0.0,
) -> None:
    """Save ``n_labels`` labels as ``reviewer`` (or until ``stop`` is set), ``pause`` s apart."""
    from review_app.services.access.actors import sign_in
    from review_app.services.labels.labeling import record_label
    from review_app.services.rubrics.rubric_catalog import sync_rubrics
    from storage.engine import create_database_engine

    engine = create_database_engine(url)
    actor = sign_in(engine, name=reviewer, auth_mode="local")
    rubric = sync_rubrics(engine, actor).get(RUBRIC)
    rng = random.Random(seed)
    latencies: list[float] = []
    starts: list[float] = []
    errors: list[str] = []
    saved = 0
    barrier.wait()
    for index in range(n_labels):
        if stop is not None and stop.is_set():
            break
        case_id, turn = units[index % len(units)]
        starts.append(time.time())
        started = time.perf_counter()
        try:
            record_label(
                engine, actor, case_id=case_id, turn=turn, rubric=rubric, code=rng.choice(CODES)
            )
            saved += 1
        except Exception as error:  # counted and printed: the point of the script
            errors.append(f"{type(error).__name__}: {str(error).splitlines()[0][:120]}")
        latencies.append(time.perf_counter() - started)
        if pause:
            time.sleep(pause)
    engine.dispose()
    results.put(
        {
            "attempted": len(latencies),
            "saved": saved,
            "errors": errors,
            "latencies": latencies,
            "starts": starts,
        }
    )


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
    kill_delay: float | None = None,
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
    if kill_delay is not None:
        time.sleep(kill_delay)  # somewhere in the saves
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
    samples = [pair for r in collected for pair in zip(r["starts"], r["latencies"], strict=True)]
    print(
        f"  {label}: saved {saved} of {attempted} attempted in {elapsed:.1f} s "
        f"({saved / elapsed:.0f}/s); errors surfaced {len(errors)}; {_latency_line(latencies)}"
        + (f"; SIGKILLed pid {killed} (its saves not counted)" if killed else "")
    )
    for error in sorted(set(errors))[:5]:
        print(f"    {errors.count(error)} x {error}")
    return {"saved": saved, "attempted": attempted, "errors": len(errors), "samples": samples}


def run_races(url: str, *, rounds: int) -> bool:
    from review_app.services.access.actors import Actor, sign_in
    from review_app.services.labels.adjudication import record_gold
    from review_app.services.labels.labeling import record_label
    from review_app.services.rubrics.rubric_catalog import sync_rubrics
    from storage.engine import create_database_engine

    engine = create_database_engine(url)
    owner = Actor.operator()
    rubric = sync_rubrics(engine, owner).get(RUBRIC)
    tab = sign_in(engine, name="two-tabs", auth_mode="local")
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

    clean = True
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
        clean = clean and not errors
    engine.dispose()
    return clean


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


def case_integrity(url: str, *, prefix: str, source: str) -> dict[str, int]:
    """Whole cases, orphan rows, and the audit log's account of the cases of ``prefix``
    (the sum of what the import entries of the file named ``source`` say they stored)."""
    from sqlalchemy import text

    from storage.engine import create_database_engine

    like = prefix + "%"  # prefixes here have no LIKE wildcards
    engine = create_database_engine(url)
    queries = {
        "stored": "SELECT count(*) FROM cases WHERE case_id LIKE :p",
        "not whole": (
            "SELECT count(*) FROM cases c WHERE c.case_id LIKE :p AND ("
            "c.n_events <> (SELECT count(*) FROM events e WHERE e.case_id = c.case_id) "
            "OR NOT EXISTS (SELECT 1 FROM evaluations v WHERE v.case_id = c.case_id) "
            "OR (SELECT count(*) FROM findings f WHERE f.case_id = c.case_id) <> "
            "(SELECT sum(v.n_fixture_errors + v.n_violations + v.n_harness_findings) "
            "FROM evaluations v WHERE v.case_id = c.case_id))"
        ),
        "orphan events": (
            "SELECT count(*) FROM events e WHERE NOT EXISTS "
            "(SELECT 1 FROM cases c WHERE c.case_id = e.case_id)"
        ),
        "orphan findings": (
            "SELECT count(*) FROM findings f WHERE NOT EXISTS "
            "(SELECT 1 FROM cases c WHERE c.case_id = f.case_id)"
        ),
        "orphan evaluations": (
            "SELECT count(*) FROM evaluations v WHERE NOT EXISTS "
            "(SELECT 1 FROM cases c WHERE c.case_id = v.case_id)"
        ),
    }
    found: dict[str, int] = {}
    with engine.connect() as connection:
        for name, sql in queries.items():
            found[name] = int(connection.execute(text(sql), {"p": like}).scalar_one())
        audited = 0
        for (summary,) in connection.execute(
            text(
                "SELECT summary_json FROM audit_log WHERE action = 'cases_import' "
                "AND object_key = :source"
            ),
            {"source": source},
        ):
            audited += int(json.loads(summary).get("imported", 0))
        found["imported by the audit log"] = audited
    engine.dispose()
    return found


def _integrity_line(found: dict[str, int], *, expected: int | None = None) -> str:
    problems = sum(
        found[name]
        for name in ("not whole", "orphan events", "orphan findings", "orphan evaluations")
    )
    audit_ok = found["imported by the audit log"] == found["stored"]
    verdict = "OK" if problems == 0 and audit_ok else "BROKEN"
    if expected is not None and found["stored"] != expected:
        verdict = "BROKEN"
    return (
        f"{found['stored']} cases stored, not whole {found['not whole']}, orphan events/"
        f"findings/evaluations {found['orphan events']}/{found['orphan findings']}/"
        f"{found['orphan evaluations']}, audit log says {found['imported by the audit log']} "
        f"imported: {verdict}"
    )


def kill_import_rounds(url: str, workdir: Path, *, n_events: int, rounds: int, seed: int) -> bool:
    """SIGKILL ``review-app import`` at random points, then complete it with a re-run.

    Each round starts the import of the same file and kills it after a random delay (up
    to the time a whole import took, measured by a first round left to finish), so the
    kill lands anywhere: while reading, mid-transaction, at commit. The file is one
    transaction: each check wants none of its cases stored, or all. Returns whether
    every check held.
    """
    prefix = f"kill{seed}-"
    n_cases = max(1, n_events // EVENTS_PER_CASE)
    path = workdir / f"killed-import-{seed}.jsonl"
    write_corpus(path, n_cases, EVENTS_PER_CASE, seed=seed + 100, prefix=prefix)
    rng = random.Random(seed)
    ok = True
    # How long a whole import takes here: the kills are drawn within it (a copy of the
    # file under other case ids, so the measured import leaves the file's own untouched).
    timing = workdir / f"timing-import-{seed}.jsonl"
    write_corpus(timing, n_cases, EVENTS_PER_CASE, seed=seed + 100, prefix=f"time{seed}-")
    started = time.perf_counter()
    _cli("import", str(timing), url=url).communicate()
    whole = time.perf_counter() - started
    for round_ in range(rounds):
        delay = rng.uniform(0.1, whole)
        process = _cli("import", str(path), url=url)
        started = time.perf_counter()
        while process.poll() is None and time.perf_counter() - started < delay:
            time.sleep(0.01)
        killed = process.poll() is None
        if killed:
            os.kill(process.pid, signal.SIGKILL)
        process.communicate()
        found = case_integrity(url, prefix=prefix, source=path.name)
        line = _integrity_line(found)
        if found["stored"] not in (0, n_cases):
            line = line.replace(": OK", ": BROKEN (part of the file stored)")
        ok = ok and line.endswith("OK")
        print(
            f"  import kill {round_ + 1}: "
            + (
                f"SIGKILL {time.perf_counter() - started:.2f} s in (of {whole:.2f} s)"
                if killed
                else f"finished before the kill (exit {process.returncode})"
            )
            + f"; {line}"
        )
    rerun = _cli("import", "--json", str(path), url=url)
    stdout, stderr = rerun.communicate()
    found = case_integrity(url, prefix=prefix, source=path.name)
    line = _integrity_line(found, expected=n_cases)
    ok = ok and rerun.returncode == 0 and line.endswith("OK")
    totals = json.loads(stdout)["totals"] if rerun.returncode == 0 else {}
    print(
        f"  re-run: exit {rerun.returncode}, imported {totals.get('imported')}, unchanged "
        f"{totals.get('unchanged')} of {n_cases}; {line}"
        + (f"; {stderr.strip()[:200]}" if rerun.returncode else "")
    )
    return ok


def start_trickle(url: str, units: list[tuple[str, int]]) -> tuple[Any, Any, Any]:
    """One reviewer process saving a label every 50 ms until told to stop."""
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)
    results = context.Queue()
    stop = context.Event()
    process = context.Process(
        target=label_worker,
        args=(url, "trickle", units, 10**9, 99, barrier, results, stop, 0.05),
    )
    process.start()
    barrier.wait(timeout=600)
    return process, stop, results


def run_database(name: str, url: str, args: argparse.Namespace, workdir: Path) -> bool:
    from review_app.services.access.actors import operator_actor
    from review_app.services.cases.importing import import_paths
    from review_app.services.rubrics.rubric_catalog import sync_rubrics
    from storage.engine import create_database_engine
    from storage.migrations.upgrade import upgrade_database

    print(f"\n== {name} ==")
    ok = True
    engine = create_database_engine(url)
    upgrade_database(engine)
    n_cases = max(4, -(-args.labels // 5))  # enough units for every save to be a new one
    corpus = workdir / f"{name}-corpus.jsonl"
    write_corpus(corpus, n_cases, EVENTS_PER_CASE, seed=3)
    import_paths(engine, operator_actor(), [corpus])
    sync_rubrics(engine, operator_actor())
    engine.dispose()
    units = _units(url)
    print(f"  corpus: {n_cases} cases, {len(units)} assistant turns")

    importer = None
    trickle = None
    window = (0.0, 0.0)
    if args.with_import:
        big = workdir / f"{name}-import.jsonl"
        write_corpus(
            big,
            max(1, args.with_import // EVENTS_PER_CASE),
            EVENTS_PER_CASE,
            seed=11,
            prefix="imp-",
        )
        trickle = start_trickle(url, units)
        window = (time.time(), 0.0)
        started = time.perf_counter()
        importer = _cli("import", str(big), url=url)
        print(f"  importing {args.with_import} events in a subprocess meanwhile")
    distinct = run_processes(
        url,
        reviewers=[f"reviewer-{i:02d}" for i in range(args.processes)],
        units=units,
        n_labels=args.labels,
        label=f"{args.processes} processes x {args.labels} labels, distinct reviewers",
    )
    ok = ok and distinct["errors"] == 0
    if importer is not None and trickle is not None:
        _, stderr = importer.communicate()
        window = (window[0], time.time())
        print(
            f"  the import finished {time.perf_counter() - started:.1f} s after it started, "
            f"exit {importer.returncode}" + (f": {stderr.strip()[:200]}" if stderr.strip() else "")
        )
        ok = ok and importer.returncode == 0
        process, stop, results = trickle
        stop.set()
        steady = results.get(timeout=600)
        process.join()
        print(
            f"  a reviewer saving every 50 ms during the import: saved {steady['saved']} of "
            f"{steady['attempted']}; errors surfaced {len(steady['errors'])}; "
            f"{_latency_line(steady['latencies'])}"
        )
        ok = ok and not steady["errors"]
        during = [
            latency
            for start, latency in [
                *distinct["samples"],
                *zip(steady["starts"], steady["latencies"], strict=True),
            ]
            if window[0] <= start <= window[1]
        ]
        print(
            "  max save wait during the import: "
            + (f"{max(during) * 1000:.0f} ms over {len(during)} saves" if during else "no saves")
        )
    same = run_processes(
        url,
        reviewers=["same-reviewer"] * args.same_reviewer,
        units=units[: max(5, args.labels // 4)],
        n_labels=args.labels,
        label=f"{args.same_reviewer} processes x {args.labels} labels as ONE reviewer",
    )
    ok = ok and same["errors"] == 0
    ok = run_races(url, rounds=args.races) and ok
    ok = not any(integrity(url).values()) and ok
    if args.kill:
        rng = random.Random(args.seed)
        for round_ in range(args.kill_rounds):
            run_processes(
                url,
                reviewers=["killed-reviewer"] * 2,
                units=units[:10],
                n_labels=args.labels * 4,
                kill_delay=rng.uniform(0.2, 1.5),
                label=f"label writers, kill {round_ + 1}: 2 processes as one reviewer, "
                "one SIGKILLed mid-run",
            )
            ok = not any(integrity(url).values()) and ok
        ok = (
            kill_import_rounds(
                url,
                workdir,
                n_events=args.kill_import_events,
                rounds=args.kill_rounds,
                seed=args.seed,
            )
            and ok
        )
    return ok


def postgres_reachable(url: str) -> str | None:
    """None when ``url`` answers a query, else the first line of why not."""
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
    parser.add_argument("--kill-rounds", type=int, default=3)
    parser.add_argument("--kill-import-events", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=1)
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
        results = {
            "sqlite": run_database("sqlite", f"sqlite:///{workdir / 'review.db'}", args, workdir)
        }
        reason = None if args.no_postgres else postgres_reachable(args.postgres)
        if reason is not None:
            print(f"\nPostgreSQL skipped: {reason}")
        if args.no_postgres or reason is not None:
            _verdict(results)
            return
        from sqlalchemy import create_engine, text

        schema = f"bench_{uuid.uuid4().hex[:8]}"
        admin = create_engine(args.postgres)
        with admin.begin() as connection:
            connection.execute(text(f"CREATE SCHEMA {schema}"))
        separator = "&" if "?" in args.postgres else "?"
        try:
            results["postgresql"] = run_database(
                "postgresql",
                f"{args.postgres}{separator}options=-csearch_path%3D{schema}",
                args,
                workdir,
            )
        finally:
            with admin.begin() as connection:
                connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
            admin.dispose()
        _verdict(results)


def _verdict(results: dict[str, bool]) -> None:
    print(
        "\nverdict: "
        + ", ".join(
            f"{name} {'OK' if ok else 'PROBLEMS (see above)'}" for name, ok in results.items()
        )
    )
    if not all(results.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
