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
turns x latency / concurrency. While the job runs, the judge page's prompt workbench
(AppTest from the entry script, signed in as an admin) is rerun once a second, as its
progress fragment does, and its rerun times are printed beside the same page's reruns
before the job. Asserts nothing.

Measured on the project's 2-core machine shared with other work (load average 7-14,
so the ratios are noisy): 10,000 turns on SQLite, bound 62.5 s: the job 87.5 s
(1.40x the bound), run_judge directly 106.1 s (1.70x); status reads median 1.7 ms,
max 428 ms. 4,000 turns on PostgreSQL, bound 25.0 s: the job 54.1 s (2.16x), directly
35.3 s (1.41x); status reads median 25 ms, max 407 ms. With the page rerun instead
(1,000 turns on SQLite, load average 10-14): idle median 178 ms, while the job ran
median 206 ms (1.16x), max 1.09 s. The client is CPU-bound on the
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
    from storage.migrations.upgrade import upgrade_database

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
    from review_app.services.access.actors import operator_actor
    from review_app.services.cases.importing import import_paths
    from review_app.services.rubrics.rubric_catalog import sync_rubrics

    import_paths(engine, operator_actor(), [corpus])
    return sync_rubrics(engine, operator_actor()).get("role-adherence@1")


def page_rerun(url: str):  # type: ignore[no-untyped-def]
    """A function that reruns the judge page's workbench view (AppTest, signed in through
    local mode as an admin) and returns its seconds: what a policy owner's browser waits
    for at each rerun while the job runs (the page reads the job's progress)."""
    from streamlit.testing.v1 import AppTest

    os.environ["REVIEW_APP_DATABASE_URL"] = url
    os.environ["REVIEW_APP_AUTH"] = "local"
    os.environ["REVIEW_APP_LOCAL_USER"] = "bench-admin"
    at = AppTest.from_file(str(REPO / "review_app" / "ui" / "app.py"), default_timeout=600)
    at.run()
    at.switch_page("views/judge.py")
    at.run()
    at.segmented_control(key="judge_view").set_value("Prompt workbench").run()
    assert not at.exception, [e.value for e in at.exception]

    def rerun() -> float:
        start = time.perf_counter()
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        return time.perf_counter() - start

    return rerun


def as_job(engine, corpus: Path, url: str) -> tuple[int, float, list[float], list[float]]:  # type: ignore[no-untyped-def]
    from review_app.services.access.actors import operator_actor
    from review_app.services.jobs.runner import job_status, run_worker
    from review_app.services.judging.judge_run_kind import start_judge_job
    from review_app.services.team.people import add_person

    load(engine, corpus)
    actor = operator_actor()
    add_person(engine, actor, name="bench-admin", role="admin")
    rerun = page_rerun(url)
    idle = [rerun() for _ in range(5)]
    began = time.perf_counter()
    job = start_judge_job(
        engine, actor, rubric="role-adherence@1", prompt="role-judge@v2", endpoint="bench"
    )
    worker = threading.Thread(
        target=run_worker, args=(engine,), kwargs={"until_idle": True, "poll_seconds": 0.05}
    )
    worker.start()
    busy: list[float] = []
    while worker.is_alive():  # the page rerun once a second, as its progress fragment does
        busy.append(rerun())
        worker.join(timeout=max(0.0, 1.0 - busy[-1]))
    elapsed = time.perf_counter() - began
    done = job_status(engine, actor, job_id=job.id)
    assert done.status == "done", done.error
    return done.done, elapsed, idle, busy


def direct(engine, corpus: Path) -> tuple[int, float]:  # type: ignore[no-untyped-def]
    from review_app.judging import find_judge_prompt
    from review_app.services.access.actors import operator_actor
    from review_app.services.judging.endpoints import endpoint_settings
    from review_app.services.judging.judge_runner import run_judge, select_case_ids

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
                units, job_seconds, idle, busy = as_job(
                    engine, corpus, engine.url.render_as_string(hide_password=False)
                )
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
            if busy:
                print(
                    f"  judge page (prompt workbench) rerun: idle median "
                    f"{1000 * statistics.median(idle):.0f} ms; while the job ran "
                    f"{len(busy)} reruns, median {1000 * statistics.median(busy):.0f} ms, "
                    f"max {1000 * max(busy):.0f} ms "
                    f"({statistics.median(busy) / statistics.median(idle):.2f}x idle)"
                )
    finally:
        server.kill()
        server.wait()
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
