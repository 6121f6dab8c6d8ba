"""A judge run as a background job: wall time against the latency bound, and progress reads.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_judge_job.py [--turns 10000] [--concurrency 16]
        [--latency 0.1] [--db postgresql+psycopg://...]

A loopback OpenAI-compatible server (its own process, asyncio, keep-alive) answers
every chat completion after ``--latency`` seconds. ``--turns`` assistant turns (5 per
conversation) are imported into a fresh database (SQLite file by default, or a new
schema of ``--db``), an endpoint named in a TOML file (``REVIEW_APP_JUDGE_ENDPOINTS``)
serves them at ``--concurrency``, and the run is queued with
``jobs.start_judge_job`` and executed by ``jobs.run_worker`` (claim, lease,
heartbeats, progress: the whole job). Side by side, in the same run, the same units
judged by ``run_judge`` directly, the floor a job adds its overhead to. The bound is
turns x latency / concurrency. While the job runs another thread reads its status
(what the judge page does at each rerun) and the read times are printed. Asserts
nothing.

Measured on the project's 2-core machine shared with other work (load average 7-14,
so the ratios are noisy): 10,000 turns on SQLite, bound 62.5 s: the job 87.5 s
(1.40x the bound), run_judge directly 106.1 s (1.70x); status reads median 1.7 ms,
max 428 ms. 4,000 turns on PostgreSQL, bound 25.0 s: the job 54.1 s (2.16x), directly
35.3 s (1.41x); status reads median 25 ms, max 407 ms. The client is CPU-bound on the
loaded machine (see bench_judge_endpoints.py for the CPU time per unit).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.bench_agreement_db import generate_cases  # noqa: E402
from benchmarks.bench_judge_endpoints import start_server  # noqa: E402

TURNS_PER_CASE = 5


def fresh_database(workdir: Path, base: str | None, name: str):  # type: ignore[no-untyped-def]
    from sqlalchemy import create_engine, text

    from storage.engine import create_database_engine
    from storage.migrations import upgrade_database

    if base is None:
        url = f"sqlite:///{workdir / f'{name}.db'}"
        cleanup = None
    else:
        schema = f"bench_{name}_{os.getpid()}"
        admin = create_engine(base)
        with admin.begin() as connection:
            connection.execute(text(f"CREATE SCHEMA {schema}"))
        separator = "&" if "?" in base else "?"
        url = f"{base}{separator}options=-csearch_path%3D{schema}"

        def cleanup() -> None:
            with admin.begin() as connection:
                connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
            admin.dispose()

    engine = create_database_engine(url)
    upgrade_database(engine)
    return engine, cleanup


def load(engine, corpus: Path):  # type: ignore[no-untyped-def]
    from review_app.services.importing import import_paths
    from review_app.services.people import operator_actor
    from review_app.services.rubric_catalog import sync_rubrics

    import_paths(engine, operator_actor(), [corpus])
    return sync_rubrics(engine, operator_actor()).get("role-adherence@1")


def as_job(engine, corpus: Path) -> tuple[int, float, list[float]]:  # type: ignore[no-untyped-def]
    from review_app.services.jobs import job_status, run_worker, start_judge_job
    from review_app.services.people import operator_actor

    load(engine, corpus)
    actor = operator_actor()
    began = time.perf_counter()
    job = start_judge_job(
        engine, actor, rubric="role-adherence@1", prompt="role-judge@v2", endpoint="bench"
    )
    reads: list[float] = []
    finished = threading.Event()

    def poll() -> None:  # the judge page reading the job's progress at each rerun
        while not finished.wait(0.5):
            start = time.perf_counter()
            job_status(engine, actor, job_id=job.id)
            reads.append(time.perf_counter() - start)

    reader = threading.Thread(target=poll)
    reader.start()
    run_worker(engine, until_idle=True, poll_seconds=0.05)
    elapsed = time.perf_counter() - began
    finished.set()
    reader.join()
    done = job_status(engine, actor, job_id=job.id)
    assert done.status == "done", done.error
    return done.done, elapsed, reads


def direct(engine, corpus: Path) -> tuple[int, float]:  # type: ignore[no-untyped-def]
    from review_app.judging import find_judge_prompt
    from review_app.services.endpoints import endpoint_settings
    from review_app.services.judge_runner import run_judge, select_case_ids
    from review_app.services.people import operator_actor

    rubric = load(engine, corpus)
    prompt = find_judge_prompt(REPO / "rubrics", rubric.id, "role-judge@v2")
    began = time.perf_counter()
    summary = run_judge(
        engine,
        operator_actor(),
        rubric=rubric,
        prompt=prompt,
        settings=endpoint_settings("bench"),
        case_ids=select_case_ids(engine),
    )
    return summary.answered, time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--db", default=None, help="a PostgreSQL URL (default: SQLite files)")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}")
    server, url = start_server(args.latency)
    try:
        with tempfile.TemporaryDirectory(prefix="role-review-job-") as tmp:
            workdir = Path(tmp)
            endpoints = workdir / "endpoints.toml"
            endpoints.write_text(
                f'[endpoints.bench]\nbase_url = "{url}"\nmodel = "bench"\n'
                f'api_key = "bench-key"\nconcurrency = {args.concurrency}\n',
                encoding="utf-8",
            )
            os.environ["REVIEW_APP_JUDGE_ENDPOINTS"] = str(endpoints)
            corpus = workdir / "cases.jsonl"
            with corpus.open("w", encoding="utf-8") as out:
                for case in generate_cases(args.turns // TURNS_PER_CASE, seed=3):
                    out.write(json.dumps(case) + "\n")
            bound = args.turns * args.latency / args.concurrency
            kind = "PostgreSQL" if args.db else "SQLite"
            print(
                f"{args.turns:,} turns, {args.latency * 1000:.0f} ms latency, concurrency "
                f"{args.concurrency}, {kind}: bound {args.turns:,} x {args.latency:g} s / "
                f"{args.concurrency} = {bound:.1f} s"
            )
            engine, cleanup = fresh_database(workdir, args.db, "job")
            try:
                units, job_seconds, reads = as_job(engine, corpus)
            finally:
                engine.dispose()
                if cleanup:
                    cleanup()
            engine, cleanup = fresh_database(workdir, args.db, "direct")
            try:
                answered, direct_seconds = direct(engine, corpus)
            finally:
                engine.dispose()
                if cleanup:
                    cleanup()
            print(
                f"  background job (queue, claim, run, heartbeats): {units:,} units in "
                f"{job_seconds:7.1f} s = {job_seconds / bound:.2f}x the bound"
            )
            print(
                f"  run_judge directly, same endpoint:              {answered:,} units in "
                f"{direct_seconds:7.1f} s = {direct_seconds / bound:.2f}x the bound "
                f"(job / direct {job_seconds / direct_seconds:.2f}x)"
            )
            if reads:
                reads.sort()
                print(
                    f"  job status reads while it ran: {len(reads)}, median "
                    f"{1000 * statistics.median(reads):.1f} ms, max {1000 * reads[-1]:.1f} ms"
                )
    finally:
        server.kill()
        server.wait()
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
