"""One judge run over several endpoints serving the same model (replicas).

Real HTTP servers on 127.0.0.1 (tests/judge_support.py); units go to whichever
endpoint has a slot free, each endpoint with its own concurrency and backoff, and a
slow or failing endpoint never stalls the others.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import Session

from review_app.judging import JudgePrompt, find_judge_prompt
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import operator_actor
from review_app.services.cases.importing import import_paths
from review_app.services.judging import judge_runner, unit_prompts
from review_app.services.judging.judge_runner import (
    JudgeRunSummary,
    run_judge,
    select_case_ids,
)
from review_app.services.judging.transport import EndpointSettings
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from storage import judging
from tests.conftest import Database, cli_test_environment
from tests.judge_support import (
    REPO,
    FakeChatServer,
    closed_port,
    run_review_app,
    serve,
    support_case,
    write_jsonl,
)

RUBRICS = Path(__file__).resolve().parents[1] / "rubrics"
CASES = [f"m{i:02d}" for i in range(20)]
TURNS = (2, 4, 6)
UNITS = sorted((case_id, turn) for case_id in CASES for turn in TURNS)


@pytest.fixture
def fast() -> Iterator[FakeChatServer]:
    yield from serve()


@pytest.fixture
def other() -> Iterator[FakeChatServer]:
    yield from serve()


@dataclass
class World:
    engine: Engine
    rubric: Rubric
    prompt: JudgePrompt

    def run(self, *urls: str, concurrency: int = 3, retries: int = 3) -> JudgeRunSummary:
        endpoints = [
            EndpointSettings(
                base_url=url, model="fake", concurrency=concurrency, retries=retries, timeout=10.0
            )
            for url in urls
        ]
        return run_judge(
            self.engine,
            operator_actor(),
            rubric=self.rubric,
            prompt=self.prompt,
            settings=endpoints,
            case_ids=select_case_ids(self.engine, case_ids=CASES),
        )

    def params(self, run_id: int) -> dict[str, Any]:
        with Session(self.engine) as session:
            run = judging.get_run(session, run_id=run_id)
            assert run is not None and run.params_json
            return dict(json.loads(run.params_json))


@pytest.fixture
def world(sqlite_database: Database, tmp_path: Path) -> World:
    cases = [support_case(c, assistant_turns=3, refund_at=None) for c in CASES]
    import_paths(
        sqlite_database.engine, operator_actor(), [write_jsonl(tmp_path / "c.jsonl", cases)]
    )
    rubric = sync_rubrics(sqlite_database.engine, operator_actor()).get("role-adherence@1")
    return World(
        sqlite_database.engine, rubric, find_judge_prompt(RUBRICS, rubric.id, "role-judge@v1")
    )


def test_units_are_spread_over_the_endpoints_each_within_its_concurrency(
    world: World, fast: FakeChatServer, other: FakeChatServer
) -> None:
    fast.delay = other.delay = 0.03
    summary = world.run(fast.base_url, other.base_url, concurrency=3)
    assert (summary.units, summary.answered, summary.endpoint_errors) == (60, 60, 0)
    seen = fast.units_requested() + other.units_requested()
    assert sorted(seen) == UNITS  # each unit asked once, on one endpoint
    assert min(len(fast.requests), len(other.requests)) >= 15
    assert fast.max_in_flight <= 3 and other.max_in_flight <= 3
    assert world.params(summary.run_id)["base_urls"] == [fast.base_url, other.base_url]


def test_a_slow_endpoint_never_stalls_the_others(
    world: World, fast: FakeChatServer, other: FakeChatServer
) -> None:
    fast.delay, other.delay = 0.01, 1.5
    began = time.monotonic()
    summary = world.run(fast.base_url, other.base_url, concurrency=2)
    elapsed = time.monotonic() - began
    assert summary.answered == 60
    # The slow one answers a couple of units per slot; the fast one does the rest.
    assert len(other.requests) <= 6 and len(fast.requests) >= 54
    assert elapsed < 60 * 1.5 / 2 / 2  # far below the slow endpoint's share of the work


def test_a_failing_endpoint_rests_while_the_others_take_its_units(
    world: World, fast: FakeChatServer, other: FakeChatServer
) -> None:
    fast.delay = other.delay = 0.01
    other.down_status = 503
    summary = world.run(fast.base_url, other.base_url, concurrency=3, retries=3)
    assert (summary.answered, summary.endpoint_errors) == (60, 0)
    assert sorted(set(fast.units_requested())) == UNITS
    # after a few failures in a row the down endpoint stops taking units for a while
    assert len(other.requests) < 20


def test_an_unreachable_endpoint_beside_a_working_one_loses_nothing(
    world: World, fast: FakeChatServer
) -> None:
    dead = f"http://127.0.0.1:{closed_port()}/v1"
    summary = world.run(fast.base_url, dead, concurrency=2, retries=3)
    assert (summary.answered, summary.endpoint_errors) == (60, 0)
    assert sorted(fast.units_requested()) == UNITS


def test_prompts_are_rendered_as_the_endpoints_take_units_not_all_ahead(
    world: World, fast: FakeChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A run over 250,000 turns must not hold 250,000 rendered prompts (3.5 GB at 14 KB
    # each): a case's prompts are rendered when few enough units wait.
    monkeypatch.setattr(unit_prompts, "_CASES_IN_FIRST_BATCH", 1)
    monkeypatch.setattr(unit_prompts, "_CASES_PER_BATCH", 2)
    monkeypatch.setattr(judge_runner, "_READY_AT_LEAST", 4)
    ready_at_most = max(4, 8 * 1)  # as _run_jobs sets it for one endpoint of concurrency 1
    ahead: list[int] = []
    rendered = 0
    render_case = judge_runner.case_prompts

    def counted_render(*args: Any, **options: Any) -> list[Any]:
        nonlocal rendered
        jobs = render_case(*args, **options)
        rendered += len(jobs)
        ahead.append(rendered - len(fast.requests))
        return jobs

    monkeypatch.setattr(judge_runner, "case_prompts", counted_render)
    fast.delay = 0.005
    summary = world.run(fast.base_url, concurrency=1)
    assert (summary.answered, summary.endpoint_errors) == (60, 0)
    assert len(ahead) == len(CASES)
    # Those waiting, the case just rendered and the unit in flight: never the whole run.
    assert max(ahead) <= ready_at_most + len(TURNS) + 1, ahead


JUDGE_RUN = (
    "judge",
    "run",
    "--rubric",
    "role-adherence@1",
    "--prompt",
    "role-judge@v2",
    "--model",
    "fake",
)
"""The command and options the command tests share; each adds its endpoints."""


def test_the_command_takes_base_url_more_than_once(
    world: World,
    fast: FakeChatServer,
    other: FakeChatServer,
    sqlite_database: Database,
    tmp_path: Path,
) -> None:
    fast.delay = other.delay = 0.05
    result = run_review_app(
        *JUDGE_RUN,
        "--base-url",
        fast.base_url,
        "--base-url",
        other.base_url,
        "--concurrency",
        "2",
        "--limit",
        "5",
        db=sqlite_database.url,
        home=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert len(fast.requests) + len(other.requests) == 15
    assert fast.requests and other.requests
    assert "answered 15" in result.stdout


def test_ctrl_c_keeps_the_answers_leaves_the_run_partial_and_the_same_command_resumes(
    world: World, fast: FakeChatServer, sqlite_database: Database, tmp_path: Path
) -> None:
    fast.delay = 0.05
    command = [
        sys.executable,
        "-m",
        "review_app",
        *JUDGE_RUN,
        "--base-url",
        fast.base_url,
        "--concurrency",
        "2",
    ]
    environment = cli_test_environment(tmp_path, sqlite_database.url)
    process = subprocess.Popen(
        command,
        env=environment,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while len(fast.requests) < 12 and time.monotonic() < deadline:
            time.sleep(0.01)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 130, stderr
    assert "stopped on request" in stdout
    assert "run the same command again" in stderr
    with Session(world.engine) as session:
        [run] = judging.list_runs(session)
        stored = len(judging.verdicts(session, run_id=run.id))
    assert run.status == "partial"
    asked_before = len(fast.requests)
    # Every answer that came before the interrupt was stored: at most the requests in
    # flight (two) were asked and not kept. The server counts a request as it answers,
    # so when it had counted 12, the client had received at least 10 of them.
    assert 10 <= stored <= asked_before
    assert asked_before - stored <= 2

    rest = subprocess.run(command, env=environment, cwd=REPO, capture_output=True, text=True)
    assert rest.returncode == 0, rest.stderr
    assert f"60 units, {stored} already done; answered {60 - stored}" in rest.stdout
    assert len(fast.requests) <= 60 + 2
