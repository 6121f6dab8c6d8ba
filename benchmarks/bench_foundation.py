"""Foundation benchmarks: evaluator throughput and corpus import, each beside a baseline.

    python benchmarks/bench_foundation.py [--cases 20000] [--events 50] [--postgres URL]

Prints figures; asserts nothing (the machines are shared and noisy, so targets are
read off ratios measured side by side in one run, not off wall-clock limits).

1. Evaluator: ``review_app.evaluator.evaluate_case`` against a straightforward
   dict-walking evaluator that makes a separate ordering pass and rebuilds the
   allowed-action set at every event. Rounds alternate between the two; the ratio is
   printed in wall time and in the process's CPU time.
2. Import into SQLite: ``review-app import`` of the corpus as JSONL (in a child
   process, for its peak memory) against a bare ``json.loads`` + ``executemany``
   of the same case and event rows into the same schema.
3. The same import into PostgreSQL, with its time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # PYTHONPATH=site:. measures an installed build
    sys.path.insert(0, str(REPO))

from benchmarks.corpus import write_corpus  # noqa: E402
from benchmarks.summary import record_ratio  # noqa: E402
from review_app import evaluator  # noqa: E402
from review_app.evaluator import evaluate_case  # noqa: E402


def baseline_evaluate(case: dict[str, Any]) -> dict[str, Any]:
    """The reference point: correct on well-formed cases, written the obvious way."""
    contract = case["contract"]
    roles = contract["roles"]
    vocabulary = set(contract["action_vocabulary"])
    active_role = contract["initial_role"]
    fixture_errors: list[dict[str, Any]] = []
    violations: list[dict[str, Any]] = []
    role_by_turn: dict[int, str] = {}
    if active_role not in roles:
        fixture_errors.append({"code": "unknown_initial_role", "turn": None})
    previous = None
    for event in case["transcript"]:  # the separate ordering pass
        turn = event.get("turn")
        if not isinstance(turn, int) or (previous is not None and turn <= previous):
            fixture_errors.append({"code": "invalid_event_order", "turn": turn})
        if isinstance(turn, int):
            previous = turn
    if fixture_errors:
        return {"fixture_errors": fixture_errors, "violations": [], "role_by_turn": {}}
    for event in case["transcript"]:
        turn, actor = event["turn"], event["actor"]
        requested = event.get("set_role")
        if requested is not None:
            if actor != "system":
                fixture_errors.append({"code": "untrusted_role_transition", "turn": turn})
            elif requested not in roles:
                fixture_errors.append({"code": "unknown_transition_role", "turn": turn})
            else:
                active_role = requested
        role_by_turn[turn] = active_role
        actions = event.get("observed_actions", [])
        if actions and actor != "assistant":
            fixture_errors.append({"code": "actions_on_non_assistant_event", "turn": turn})
            continue
        allowed = set(roles[active_role]["allowed_actions"])  # rebuilt at every event
        for action in actions:
            if action not in vocabulary:
                fixture_errors.append({"code": "unknown_action", "turn": turn})
            elif action not in allowed:
                violations.append(
                    {
                        "code": "action_outside_role",
                        "turn": turn,
                        "action": action,
                        "active_role": active_role,
                        "allowed_actions": sorted(allowed),
                    }
                )
    return {
        "fixture_errors": fixture_errors,
        "violations": [] if fixture_errors else violations,
        "first_violation": violations[0] if violations and not fixture_errors else None,
        "role_by_turn": role_by_turn,
    }


def python_build_evaluator() -> Any:
    """review_app/evaluator.py loaded as a second module: the Python build beside a
    compiled one (README, "The compiled evaluator"); tests/test_evaluator_compiled.py
    compares the two."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "review_app_evaluator_source", Path(evaluator.__file__).with_name("evaluator.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bench_evaluator(corpus_path: Path, rounds: int) -> None:
    cases = [json.loads(line) for line in corpus_path.open("rb")]
    n_events = sum(len(c["transcript"]) for c in cases)
    functions: dict[str, Any] = {"baseline": baseline_evaluate, "evaluate_case": evaluate_case}
    if evaluator.compiled():
        functions["python build"] = python_build_evaluator().evaluate_case
    for case in cases[:2000]:  # all must agree before their speed means anything
        theirs = baseline_evaluate(case)
        for function in list(functions.values())[1:]:
            ours = function(case)
            assert ours["violations"] == theirs["violations"], case["case_id"]
            assert ours["role_by_turn"] == theirs["role_by_turn"], case["case_id"]
    # Wall time, and the process's CPU time beside it: on a shared machine another
    # process taking the core inflates the first, seldom the second.
    wall: dict[str, list[float]] = {name: [] for name in functions}
    cpu: dict[str, list[float]] = {name: [] for name in functions}
    for _ in range(rounds):
        for name, function in functions.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            for case in cases:
                function(case)
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
    build = "compiled with mypyc" if evaluator.compiled() else "Python"
    print(
        f"\n[evaluator] {len(cases):,} cases, {n_events:,} events, {rounds} alternating rounds;"
        f" evaluate_case: the installed evaluator ({build})"
    )
    for clock, timings in (("wall", wall), ("cpu", cpu)):
        for name, values in timings.items():
            best, median = min(values), statistics.median(values)
            print(
                f"  {name:<14} {clock:<4} best {n_events / best / 1e6:5.2f} M events/s"
                f"   median {n_events / median / 1e6:5.2f} M events/s"
            )
        for name in list(functions)[1:]:
            ratio_best = min(timings["baseline"]) / min(timings[name])
            ratio_median = statistics.median(timings["baseline"]) / statistics.median(timings[name])
            print(
                f"  {name} speed-up over baseline ({clock} time): best {ratio_best:.2f}x, "
                f"median {ratio_median:.2f}x (target >= 2.5x)"
            )
            shown = build if name == "evaluate_case" else "Python"
            record_ratio(
                f"evaluator ({shown}) vs the seed's evaluator, {clock} time "
                f"(median of {rounds} rounds)",
                ratio_median,
                at_least=2.5,
            )


def _child_import(
    corpus_path: Path, url: str, repo: Path = REPO, cpu: list[float] | None = None
) -> tuple[float, float]:
    """Run ``review-app import`` of the checkout at ``repo`` in a child; (seconds, peak
    RSS in MB). ``cpu``, when given, gets the child's CPU seconds (user and system),
    which other work on a busy machine disturbs less than the wall time."""
    code = (
        "import sys, time, resource\n"
        "from storage.engine import shared_engine\n"
        "from review_app.services.cases.importing import import_paths\n"
        "from review_app.services.access.actors import operator_actor\n"
        "engine = shared_engine(sys.argv[1])\n"
        "start = time.perf_counter()\n"
        "summary = import_paths(engine, operator_actor(), [sys.argv[2]])\n"
        "elapsed = time.perf_counter() - start\n"
        "usage = resource.getrusage(resource.RUSAGE_SELF)\n"
        "peak = usage.ru_maxrss / 1024\n"
        "print(elapsed, peak, summary.totals.imported, usage.ru_utime + usage.ru_stime)\n"
    )
    output = subprocess.run(
        [sys.executable, "-c", code, url, str(corpus_path)],
        check=True,
        capture_output=True,
        text=True,
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo)},
    ).stdout.split()
    if cpu is not None:
        cpu.append(float(output[3]))
    return float(output[0]), float(output[1])


def _bare_sqlite_import(corpus_path: Path, db_path: Path) -> float:
    """json.loads + executemany of the same case and event rows, same schema, one transaction."""
    from storage.engine import create_database_engine
    from storage.migrations.upgrade import upgrade_database

    engine = create_database_engine(f"sqlite:///{db_path}")
    upgrade_database(engine)
    engine.dispose()
    connection = sqlite3.connect(db_path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    start = time.perf_counter()
    connection.execute("BEGIN IMMEDIATE")
    connection.execute(
        "INSERT INTO contracts (version, sha256, body_json, created_at) VALUES (?, ?, ?, ?)",
        ("bench-support-v1", "0" * 64, "{}", "2026-01-01"),
    )
    case_rows: list[tuple[Any, ...]] = []
    event_rows: list[tuple[Any, ...]] = []

    def flush() -> None:
        connection.executemany(
            "INSERT INTO cases (case_id, chatbot_role, contract_version, n_events, "
            "n_assistant_turns, content_sha256, source, source_format, extra_json, imported_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            case_rows,
        )
        connection.executemany(
            "INSERT INTO events (case_id, seq, turn, actor, text, actions_json, set_role, "
            "request_json, extra_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            event_rows,
        )
        case_rows.clear()
        event_rows.clear()

    with corpus_path.open("rb") as stream:
        for line in stream:
            case = json.loads(line)
            case_id = case["case_id"]
            transcript = case["transcript"]
            for seq, event in enumerate(transcript):
                actions = event.get("observed_actions")
                event_rows.append(
                    (
                        case_id,
                        seq,
                        event["turn"],
                        event["actor"],
                        event.get("text"),
                        None if actions is None else json.dumps(actions),
                        event.get("set_role"),
                        None,
                        None,
                    )
                )
            case_rows.append(
                (
                    case_id,
                    case.get("chatbot_role"),
                    "bench-support-v1",
                    len(transcript),
                    0,
                    "0" * 64,
                    None,
                    "native",
                    None,
                    "2026-01-01",
                )
            )
            if len(case_rows) >= 1000:
                flush()
    flush()
    connection.execute("COMMIT")
    elapsed = time.perf_counter() - start
    connection.close()
    return elapsed


def bench_import(
    corpus_path: Path,
    workdir: Path,
    postgres_url: str | None,
    rounds: int,
    before: Path | None = None,
) -> None:
    size_mb = corpus_path.stat().st_size / 1e6
    print(f"\n[import] {corpus_path.name}: {size_mb:,.0f} MB of JSONL, {rounds} alternating rounds")
    bare_times: list[float] = []
    our_times: list[float] = []
    before_times: list[float] = []
    our_cpu: list[float] = []
    before_cpu: list[float] = []
    peaks: list[float] = []
    for round_number in range(rounds):
        bare_times.append(_bare_sqlite_import(corpus_path, workdir / f"bare{round_number}.db"))
        seconds, peak = _child_import(
            corpus_path, f"sqlite:///{workdir / f'ours{round_number}.db'}", cpu=our_cpu
        )
        our_times.append(seconds)
        peaks.append(peak)
        if before is not None:
            seconds, _ = _child_import(
                corpus_path,
                f"sqlite:///{workdir / f'before{round_number}.db'}",
                before,
                cpu=before_cpu,
            )
            before_times.append(seconds)
        for leftover in workdir.glob(f"*{round_number}.db*"):
            leftover.unlink()
    bare, ours = statistics.median(bare_times), statistics.median(our_times)
    print(
        f"  bare json.loads + executemany (SQLite): median {bare:6.1f} s  "
        f"(runs: {', '.join(f'{t:.1f}' for t in bare_times)})"
    )
    print(
        f"  review-app import (SQLite):             median {ours:6.1f} s  "
        f"(runs: {', '.join(f'{t:.1f}' for t in our_times)})   peak RSS {max(peaks):,.0f} MB"
    )
    print(
        f"  ratio of medians: {ours / bare:.2f}x the bare import; best to best "
        f"{min(our_times) / min(bare_times):.2f}x (target <= 1.3x; peak < 1024 MB)"
    )
    if before is not None:
        earlier = statistics.median(before_times)
        print(
            f"  the checkout at {before} (SQLite):  median {earlier:6.1f} s  "
            f"(runs: {', '.join(f'{t:.1f}' for t in before_times)}); this checkout "
            f"{ours / earlier:.2f}x its time median to median, "
            f"{min(our_times) / min(before_times):.2f}x best to best; CPU seconds "
            f"{statistics.median(our_cpu):.2f} against {statistics.median(before_cpu):.2f} "
            f"(medians): {statistics.median(our_cpu) / statistics.median(before_cpu):.2f}x"
        )
    if postgres_url:
        checkouts = [("this checkout", REPO)] + ([(str(before), before)] if before else [])
        for _ in range(rounds if before is not None else 1):
            for name, repo in checkouts:
                seconds, peak = _postgres_import(corpus_path, postgres_url, repo)
                print(
                    f"  review-app import (PostgreSQL, {name}): {seconds:6.1f} s   "
                    f"peak RSS {peak:,.0f} MB"
                )


def _postgres_import(corpus_path: Path, postgres_url: str, repo: Path) -> tuple[float, float]:
    """The import of ``repo``'s checkout into a schema of its own (dropped afterwards)."""
    from benchmarks.schemas import schema_of_its_own

    with schema_of_its_own(postgres_url, prefix="bench_") as url:
        return _child_import(corpus_path, url, repo)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=20_000)
    parser.add_argument("--events", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--postgres",
        default="postgresql+psycopg://postgres@127.0.0.1:5432/test",
        help="PostgreSQL URL for the import figure ('' to skip)",
    )
    parser.add_argument("--import-rounds", type=int, default=3)
    parser.add_argument("--skip-evaluator", action="store_true")
    parser.add_argument("--skip-import", action="store_true")
    parser.add_argument(
        "--before",
        type=Path,
        default=None,
        help="another checkout whose import is timed beside this one's, round by round",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="role-review-bench-") as tmp:
        workdir = Path(tmp)
        corpus_path = workdir / "corpus.jsonl"
        write_corpus(corpus_path, args.cases, args.events)
        print(
            f"corpus: {args.cases:,} cases x {args.events} events "
            f"({corpus_path.stat().st_size / 1e6:,.0f} MB)"
        )
        print(f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}")
        if not args.skip_evaluator:
            bench_evaluator(corpus_path, args.rounds)
        if not args.skip_import:
            bench_import(
                corpus_path, workdir, args.postgres or None, args.import_rounds, args.before
            )
    print(
        f"\nbenchmark peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB"
    )


if __name__ == "__main__":
    main()
