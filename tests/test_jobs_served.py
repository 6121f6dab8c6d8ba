"""Two ``review-app serve`` processes on one PostgreSQL run background jobs: exactly one
executes each job, and when the one running a job is killed (SIGKILL) the other resumes
it once the lease runs out, asking no stored unit again. No browser: each server's
worker starts with the process (review_app/ui/launch.py)."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from sqlmodel import Session, select

from review_app.services.jobs.runner import job_status
from review_app.services.judging.endpoints import ENDPOINTS_ENV
from review_app.services.judging.judge_run_kind import start_judge_job
from storage.engine import create_database_engine
from storage.migrations.upgrade import upgrade_database
from storage.models import BackgroundJob
from tests.conftest import Database, postgres_schema
from tests.judge_support import FakeChatServer
from tests.served import free_port, serving, wait_healthy
from tests.test_jobs import (
    OPERATOR,
    PROMPT,
    RUBRIC,
    SECRET,
    endpoints_file,
    load_cases,
    stored_units,
)

pytestmark = pytest.mark.postgres


def until(condition, seconds: float = 90) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_two_servers_share_the_jobs_and_one_resumes_the_others_after_a_kill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = FakeChatServer(delay=0.15).start()
    with postgres_schema() as url:
        engine = create_database_engine(url)
        try:
            upgrade_database(engine)
            database = Database("postgres", url, engine)
            cases = load_cases(database, tmp_path, 24)  # 72 units
            monkeypatch.setenv(ENDPOINTS_ENV, str(endpoints_file(tmp_path, server)))
            monkeypatch.setenv("REVIEW_APP_JOB_LEASE_SECONDS", "3")
            roots = [tmp_path / "a", tmp_path / "b"]
            ports = [free_port(), free_port()]
            for root in roots:
                (root / "home").mkdir(parents=True)
            with (
                serving(url, roots[0], port=ports[0], user="admin") as (first, log_a),
                serving(url, roots[1], port=ports[1], user="admin") as (second, log_b),
            ):
                wait_healthy(f"http://127.0.0.1:{ports[0]}", first, log_a)
                wait_healthy(f"http://127.0.0.1:{ports[1]}", second, log_b)
                # four short jobs, each on its own cases: each run once, by one server
                short = [
                    start_judge_job(
                        engine,
                        OPERATOR,
                        rubric=RUBRIC,
                        prompt=PROMPT,
                        endpoint="fake",
                        case_ids=cases[i * 2 : i * 2 + 2],
                    ).id
                    for i in range(4)
                ]
                until(
                    lambda: all(
                        job_status(engine, OPERATOR, job_id=j).status == "done" for j in short
                    )
                )
                with Session(engine) as session:
                    rows = session.exec(
                        select(BackgroundJob).where(BackgroundJob.id.in_(short))  # type: ignore[union-attr]
                    ).all()
                assert {row.claims for row in rows} == {1}
                asked = Counter(server.units_requested())
                assert len(asked) == 24 and set(asked.values()) == {1}
                # a long job; its server is killed mid-run
                server.reset_log()
                long = start_judge_job(
                    engine,
                    OPERATOR,
                    rubric=RUBRIC,
                    prompt=PROMPT,
                    endpoint="fake",
                    case_ids=cases[8:],
                ).id
                until(lambda: len(stored_units(engine)) >= 24 + 12)
                owner = job_status(engine, OPERATOR, job_id=long).lease_owner or ""
                pid = int(owner.split(":")[1])
                victim, survivor = (first, second) if pid == first.pid else (second, first)
                assert pid == victim.pid
                os.kill(victim.pid, signal.SIGKILL)
                victim.wait(timeout=30)
                stored_at_kill = stored_units(engine)
                until(lambda: server.in_flight == 0)
                time.sleep(0.2)
                asked_before = server.units_requested()
                server.reset_log()
                until(lambda: job_status(engine, OPERATOR, job_id=long).status == "done")
                resumed = job_status(engine, OPERATOR, job_id=long)
                assert resumed.claims == 2
                assert int((resumed.lease_owner or "::").split(":")[1]) == survivor.pid
                assert len(stored_units(engine)) == 72
                asked_after = server.units_requested()
                assert not set(asked_after) & stored_at_kill
                assert len(asked_after) == len(set(asked_after))
                assert len(set(asked_before) & set(asked_after)) <= 2 * 2 + 20
                assert survivor.poll() is None
            for log in (roots[0] / "server.log", roots[1] / "server.log"):
                assert SECRET not in log.read_text(errors="replace")
        finally:
            engine.dispose()
            server.stop()
