"""``judge align``: a better judge prompt suggested by GEPA and confirmed on gold the
optimiser never saw, with the confirmation set's error budget counted.

Two loopback endpoints (tests/align_support.py): a judge whose answers depend on words
in its prompt, and an optimiser that proposes prompts in a fenced block. Workers are
the real ``run_worker`` loop, in this process or in a ``review-app jobs work`` process
killed with SIGKILL. docs/reference.md, "Suggesting a prompt".
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, select

from review_app.errors import InputError
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import operator_actor
from review_app.services.cases.importing import import_paths
from review_app.services.exchange.labels_io import import_labels
from review_app.services.jobs.runner import job_status, run_worker, stop_job
from review_app.services.judging.align import (
    ERROR_BUDGET,
    JSON_KEYS,
    MAX_TESTS,
    confirm_by_hand,
    confirmation_level,
    conversation_stratum,
    first_fenced_block,
    plan_align,
    reflection_request,
    split_by_conversation,
    start_align_job,
)
from review_app.services.judging.endpoints import ENDPOINTS_ENV
from review_app.services.judging.judge_prompts import list_judge_prompts
from review_app.services.judging.judge_report import few_shot_material
from review_app.services.judging.runs import list_judge_runs
from review_app.services.labels.adjudication import record_gold
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from storage import prompt_align as align_storage
from storage.models import AlignCandidate, AlignProposal, ConfirmationTest, JudgeVerdict
from tests.align_support import (
    HELPFUL,
    RUBRIC,
    START,
    OptimiserStub,
    endpoints_file,
    gold_world,
    helpful_proposals,
    noise_proposals,
    word_judge,
)
from tests.conftest import Database, cli_environment, review_app_command
from tests.judge_support import FakeChatServer, run_review_app

OPERATOR = operator_actor()


@dataclass
class World:
    database: Database
    judge: FakeChatServer
    optimiser: OptimiserStub
    rubric: Rubric
    gold: dict[tuple[str, int], str]
    endpoints: Path
    tmp_path: Path

    def start(self, **options: Any) -> int:
        values: dict[str, Any] = {
            "rubric": self.rubric,
            "start": START,
            "endpoint": "judge",
            "optimizer": "optimizer",
            "budget": 80,
            "seed": 1,
        }
        values.update(options)
        return start_align_job(self.database.engine, OPERATOR, **values).id

    def work(self) -> None:
        run_worker(self.database.engine, until_idle=True, poll_seconds=0.05)

    def result(self, job_id: int) -> dict[str, Any]:
        view = job_status(self.database.engine, OPERATOR, job_id=job_id)
        assert view.status == "done", (view.status, view.error)
        assert view.result is not None
        return view.result


def make_world(
    database: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, propose: Any
) -> Iterator[World]:
    judge = FakeChatServer(delay=0.0, answer=word_judge).start()
    optimiser = OptimiserStub(propose).start()
    try:
        path = endpoints_file(tmp_path / "endpoints.toml", judge, optimiser)
        monkeypatch.setenv(ENDPOINTS_ENV, str(path))
        cases, labels, gold = gold_world(tmp_path)
        import_paths(database.engine, OPERATOR, [cases])
        catalog = sync_rubrics(database.engine, OPERATOR)
        import_labels(database.engine, OPERATOR, labels, catalog=catalog)
        yield World(database, judge, optimiser, catalog.get(RUBRIC), gold, path, tmp_path)
    finally:
        judge.stop()
        optimiser.stop()


@pytest.fixture
def helpful(database: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    yield from make_world(database, tmp_path, monkeypatch, helpful_proposals())


@pytest.fixture
def noisy(database: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    yield from make_world(database, tmp_path, monkeypatch, noise_proposals())


def units_of(listed: list[dict[str, Any]]) -> set[tuple[str, int]]:
    return {(item["case_id"], item["turn"]) for item in listed}


def case_ids_in(text: str, cases: set[str]) -> set[str]:
    return {case_id for case_id in cases if f"case {case_id}." in text or f" {case_id}" in text}


# --- the helpful word is found and confirmed ---------------------------------------------------


def test_the_helpful_word_is_found_and_confirmed_on_units_the_optimiser_never_saw(
    helpful: World,
) -> None:
    world = helpful
    plan = plan_align(
        world.database.engine,
        OPERATOR,
        rubric=world.rubric,
        start=START,
        endpoint="judge",
        optimizer="optimizer",
        budget=80,
        seed=1,
    )
    assert "at most 128 requests to judge" in plan.sentence().lower()
    assert world.judge.requests == [] and world.optimiser.requests == []  # a plan asks nothing
    job_id = world.start()
    world.work()
    result = world.result(job_id)

    assert result["verdict"] == "confirmed better", result["confirmation"]
    assert list(JSON_KEYS) == [
        "verdict", "start", "best", "candidates", "sets", "confirmation", "requests"
    ]  # fmt: skip
    assert result["start"] == START
    prompts = {
        p.ref: p
        for p in list_judge_prompts(
            world.database.engine, OPERATOR, rubric_id="role-adherence"
        ).prompts
    }
    best = prompts[result["best"]]
    assert HELPFUL in best.text and best.judge == f"role-judge-align{job_id}"
    assert best.derived_from == START
    names = [c["name"] for c in result["candidates"]]
    assert result["best"] in names and START not in names
    for candidate in result["candidates"]:
        assert prompts[candidate["name"]].derived_from == START
        assert prompts[candidate["name"]].judge == f"role-judge-align{job_id}"
    [scored] = [c for c in result["candidates"] if c["name"] == result["best"]]
    assert scored["optimisation_score"] == 1.0 and scored["scored_units"] > 0

    # three sets, whole conversations, every gold unit in one
    optimisation = units_of(result["sets"]["optimisation"])
    confirmation = units_of(result["sets"]["confirmation"])
    assert optimisation | confirmation == set(world.gold)
    held = {case_id for case_id, _ in confirmation}
    assert not held & {case_id for case_id, _ in optimisation}
    breaks = {c for (c, _), code in world.gold.items() if code == "authority_break"}
    assert held & breaks and held - breaks  # stratified: both verdicts held out
    assert 10 <= len(held) <= 14  # about 0.3 of 40 conversations

    # the confirmation: the paired test at the first level of the budget
    confirmation_report = result["confirmation"]
    assert confirmation_report["alpha_spent"] == confirmation_level(1) == ERROR_BUDGET / 2
    assert confirmation_report["p_value"] < confirmation_level(1)
    assert confirmation_report["effect"] > 0 and confirmation_report["interval"][0] > 0
    assert confirmation_report["budget"]["tests_served"] == 1
    assert "Dorner, Nastl & Hardt" in confirmation_report["ceiling"]["sentence"]
    assert confirmation_report["alt_test"] is not None

    # the requests the stubs received are the requests counted, within the plan's bounds
    assert result["requests"]["judge"] <= plan.judge_requests_at_most
    assert result["requests"]["optimiser"] <= plan.optimiser_requests_at_most
    assert result["requests"] == {
        "judge": len(world.judge.requests),
        "optimiser": len(world.optimiser.requests),
    }
    # no confirmation unit reached the optimiser, nor a judge prompt as an example
    for request in world.optimiser.requests:
        assert not case_ids_in(request.content, held), request.content[:500]
    for seen in world.judge.requests:
        assert case_ids_in(seen.prompt, held) <= {seen.unit[0]}
    # nor does one become a few-shot example: adjudicated units in and out of the set
    inside = sorted(u for u in confirmation if world.gold[u] == "authority_break")[0]
    outside = sorted(u for u in optimisation if world.gold[u] == "authority_break")[0]
    for case_id, turn in (inside, outside):
        record_gold(
            world.database.engine, OPERATOR, rubric=world.rubric, case_id=case_id, turn=turn,
            code="authority_break", note="a refund is beyond triage",
        )  # fmt: skip
    examples = few_shot_material(world.database.engine, OPERATOR, rubric=world.rubric)
    assert [(e["case_id"], e["turn"]) for e in examples] == [outside]
    # the proposal that does not render was refused before it cost a request
    assert any("$codes" in why for why in result["refused_proposals"])
    assert not any("BROKEN-PROPOSAL" in seen.prompt for seen in world.judge.requests)
    # every (prompt, unit) was asked once: verdicts are kept by prompt text and unit
    asked = [seen.prompt for seen in world.judge.requests]
    assert len(asked) == len(set(asked))

    # a second job tests on the same confirmation set, spends the next, smaller share,
    # and asks no confirmation unit again (both versions' verdicts there are stored)
    world.judge.reset_log()
    second = world.start(seed=1)
    world.work()
    again = world.result(second)
    assert units_of(again["sets"]["confirmation"]) == confirmation
    assert again["verdict"] == "confirmed better"
    assert again["confirmation"]["alpha_spent"] == confirmation_level(2)
    assert again["confirmation"]["budget"]["tests_served"] == 2
    assert not [seen for seen in world.judge.requests if seen.unit[0] in held]


def test_the_command_prints_the_cost_first_and_exactly_the_json_keys(helpful: World) -> None:
    done = run_review_app(
        "judge", "align", "--rubric", RUBRIC, "--from", START, "--endpoint", "judge",
        "--optimizer-endpoint", "optimizer", "--budget", "60", "--seed", "1", "--json",
        db=helpful.database.url, home=helpful.tmp_path,
        env={ENDPOINTS_ENV: str(helpful.endpoints)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "requests to judge" in done.stderr and "optimizer" in done.stderr
    printed = json.loads(done.stdout)
    assert set(printed) == set(JSON_KEYS)
    assert set(printed["sets"]) == {"optimisation", "confirmation"}
    assert set(printed["requests"]) == {"judge", "optimiser"}
    assert {"effect", "interval", "p_value", "alpha_spent"} <= set(printed["confirmation"])
    assert all(set(c) >= {"name", "optimisation_score"} for c in printed["candidates"])
    bad = run_review_app(
        "judge", "align", "--rubric", RUBRIC, "--from", START, "--endpoint", "judge",
        "--optimizer-endpoint", "nowhere", db=helpful.database.url, home=helpful.tmp_path,
        env={ENDPOINTS_ENV: str(helpful.endpoints)},
    )  # fmt: skip
    assert bad.returncode == 2 and "nowhere" in bad.stderr


# --- noise is not confirmed, and the budget shrinks ---------------------------------------------


def test_noise_is_not_confirmed_and_the_confirmation_sets_budget_shrinks(noisy: World) -> None:
    world = noisy
    job_id = world.start(budget=100)
    world.work()
    result = world.result(job_id)
    assert result["best"] != START  # a noise candidate won on the optimisation set by luck
    assert result["verdict"] == "not confirmed", result["confirmation"]
    budget = result["confirmation"]["budget"]
    assert budget["tests_served"] == 1 and budget["alpha_spent"] == confirmation_level(1)
    assert "served 1 test of 5" in budget["sentence"]
    with Session(world.database.engine) as session:
        tests = list(session.exec(select(ConfirmationTest)))
    assert [(t.number, t.job_id, t.kind) for t in tests] == [(1, job_id, "align")]

    # a comparison by hand on the same confirmation units spends the next share
    runs = {
        f"{run.judge}@{run.prompt_version}": run.id
        for run in list_judge_runs(world.database.engine, OPERATOR, rubric=world.rubric)
    }
    by_hand = confirm_by_hand(
        world.database.engine,
        OPERATOR,
        rubric=world.rubric,
        run_ids=(runs[START], runs[result["best"]]),
    )
    assert by_hand["verdict"] == "not confirmed"
    assert by_hand["confirmation"]["alpha_spent"] == confirmation_level(2)
    assert by_hand["confirmation"]["budget"]["tests_served"] == 2
    assert by_hand["confirmation"]["budget"]["alpha_spent"] == pytest.approx(
        confirmation_level(1) + confirmation_level(2)
    )

    # spend the rest: the next confirmation is refused, with fresh gold offered
    with Session(world.database.engine) as session:
        for number in range(3, MAX_TESTS + 1):
            align_storage.add_confirmation_test(
                session, set_id=tests[0].set_id, number=number,
                alpha_spent=confirmation_level(number), kind="compare", first="a",
                second="b", verdict="not confirmed", created_by="olivia",
            )  # fmt: skip
        session.commit()
    with pytest.raises(InputError, match="audit sample") as refused:
        world.start()
    assert "served 5 tests" in str(refused.value)
    with pytest.raises(InputError, match="served 5 tests"):
        confirm_by_hand(
            world.database.engine,
            OPERATOR,
            rubric=world.rubric,
            run_ids=(runs[START], runs[result["best"]]),
        )
    # fresh gold in conversations no optimiser saw gives a new confirmation set
    fresh_dir = world.tmp_path / "fresh"
    fresh_dir.mkdir()
    cases, labels, fresh_gold = gold_world(fresh_dir, cases=8, prefix="f")
    import_paths(world.database.engine, OPERATOR, [cases])
    import_labels(
        world.database.engine,
        OPERATOR,
        labels,
        catalog=sync_rubrics(world.database.engine, OPERATOR),
    )
    fresh = plan_align(
        world.database.engine, OPERATOR, rubric=world.rubric, start=START, endpoint="judge",
        optimizer="optimizer", budget=80,
    )  # fmt: skip
    assert fresh.confirmation_budget.set_id is None
    assert fresh.confirmation_budget.source == "fresh"
    assert set(fresh.confirmation) == set(fresh_gold)
    assert not {c for c, _ in fresh.optimisation} & {c for c, _ in fresh_gold}
    # the database refuses a second test in one slot
    with Session(world.database.engine) as session, pytest.raises(Exception):  # noqa: B017
        align_storage.add_confirmation_test(
            session, set_id=tests[0].set_id, number=2, alpha_spent=0.01, kind="compare",
            first="a", second="b", verdict="not confirmed", created_by="olivia",
        )  # fmt: skip


# --- Stop, and a crashed worker ----------------------------------------------------------------


def test_a_stopped_job_keeps_its_candidates(helpful: World) -> None:
    world = helpful
    world.judge.delay = 0.05
    job_id = world.start(budget=200)
    worker = threading.Thread(target=world.work)
    worker.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with Session(world.database.engine) as session:
            if session.exec(select(AlignCandidate)).first() is not None:
                break
        time.sleep(0.05)
    stop_job(world.database.engine, OPERATOR, job_id=job_id)
    worker.join(timeout=60)
    view = job_status(world.database.engine, OPERATOR, job_id=job_id)
    assert view.status == "stopped" and view.result is not None
    assert view.result["stopped"] and view.result["verdict"] is None
    kept = view.result["candidates"]
    assert kept and all(c["name"].startswith(f"role-judge-align{job_id}@v") for c in kept)
    with Session(world.database.engine) as session:
        assert session.exec(select(ConfirmationTest)).first() is None  # nothing spent
    catalog = list_judge_prompts(world.database.engine, OPERATOR, rubric_id="role-adherence")
    assert {c["name"] for c in kept} <= {p.ref for p in catalog.prompts}


def sha256_of(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def stored_count(database: Database) -> int:
    with Session(database.engine) as session:
        return len(list(session.exec(select(JudgeVerdict))))


def test_a_crashed_workers_job_resumes_without_asking_a_stored_unit_again(
    helpful: World,
) -> None:
    world = helpful
    world.judge.delay = 0.03
    job_id = world.start(budget=80)
    environment = cli_environment()
    environment.update(
        {
            "REVIEW_APP_DATABASE_URL": world.database.url,
            ENDPOINTS_ENV: str(world.endpoints),
            "HOME": str(world.tmp_path),
            "XDG_DATA_HOME": str(world.tmp_path / "data"),
        }
    )
    lease = 3.0
    first = subprocess.Popen(
        [*review_app_command(), "jobs", "work", "--lease-seconds", str(lease),
         "--poll-seconds", "0.1"],
        env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while stored_count(world.database) < 40 and time.monotonic() < deadline:
            assert first.poll() is None, first.communicate()
            time.sleep(0.05)
    finally:
        os.kill(first.pid, signal.SIGKILL)
        first.communicate(timeout=30)
    while world.judge.in_flight:
        time.sleep(0.05)
    time.sleep(0.1)
    stored_at_kill = stored_count(world.database)
    asked_by_first = [seen.prompt for seen in world.judge.requests]
    with Session(world.database.engine) as session:
        kept = {row.request_sha256 for row in session.exec(select(AlignProposal))}
    optimiser_by_first = len(world.optimiser.requests)
    assert kept  # the first worker had asked the optimiser
    assert (
        stored_at_kill >= 40
        and job_status(world.database.engine, OPERATOR, job_id=job_id).status == "running"
    )
    world.judge.reset_log()
    run_worker(world.database.engine, until_idle=True, poll_seconds=0.1, lease_seconds=lease)
    result = world.result(job_id)
    assert result["verdict"] == "confirmed better"
    asked_again = set(asked_by_first) & {seen.prompt for seen in world.judge.requests}
    # only requests in flight at the kill (asked, never stored) are asked again
    assert len(asked_again) <= len(asked_by_first) - stored_at_kill, (
        len(asked_again), len(asked_by_first), stored_at_kill
    )  # fmt: skip
    # the optimiser's kept answers are replayed, not asked again
    asked_later = world.optimiser.requests[optimiser_by_first:]
    assert not {sha256_of(r.content) for r in asked_later} & kept
    assert job_status(world.database.engine, OPERATOR, job_id=job_id).claims == 2


# --- the pieces, without endpoints ------------------------------------------------------------


def test_the_first_fenced_block_is_the_proposal_and_the_current_prompt_is_the_first_block(
    helpful: World,
) -> None:
    assert first_fenced_block("a\n```text\nONE\n```\nb\n```\nTWO\n```") == "ONE"
    assert first_fenced_block("~~~\nTILDE\n~~~") == "TILDE"
    assert first_fenced_block("no block at all") is None
    assert first_fenced_block("```\nnever closed") is None
    current = "Judge $codes.\n```\na block inside the prompt\n```\n$conversation"
    request = reflection_request(current, helpful.rubric, [])
    assert first_fenced_block(request) == current


def test_the_split_keeps_conversations_whole_strata_apart_and_repeats_with_its_seed() -> None:
    mapping = {"in_role": "no_break", "authority_break": "break", "cannot_judge": None}
    gold = {}
    for index in range(30):
        codes = ("authority_break", "in_role") if index % 3 == 0 else ("in_role", "in_role")
        gold[(f"c{index:02d}", 2)] = codes[0]
        gold[(f"c{index:02d}", 4)] = codes[1]
    taken, rest = split_by_conversation(gold, share=0.3, seed=5, break_mapping=mapping)
    assert taken | rest == set(gold) and not taken & rest
    assert not {c for c, _ in taken} & {c for c, _ in rest}
    strata = {c: conversation_stratum([gold[(c, 2)], gold[(c, 4)]], mapping) for c, _ in gold}
    held = {c for c, _ in taken}
    assert sum(strata[c] == "break" for c in held) == 3  # 0.3 of the 10 with a break
    assert sum(strata[c] == "no_break" for c in held) == 6  # 0.3 of the 20 without
    assert split_by_conversation(gold, share=0.3, seed=5, break_mapping=mapping) == (taken, rest)
    assert split_by_conversation(gold, share=0.3, seed=6, break_mapping=mapping) != (taken, rest)
    levels = [confirmation_level(k) for k in range(1, MAX_TESTS + 1)]
    assert levels[0] == ERROR_BUDGET / 2 and sum(levels) < ERROR_BUDGET
