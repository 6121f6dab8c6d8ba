"""Tests of the judge services (import, runner, report) on real databases (SQLite and PostgreSQL).

Three parts: importing verdict files (docs/reference.md, "Judge verdicts"); running a
judge prompt against a real OpenAI-compatible HTTP server on 127.0.0.1
(tests/judge_support.py; httpx is not replaced); and the calibration report on a
corpus whose truth is known, its figures recomputed here with scikit-learn and plain
counting. What a run stores and resumes from is tested on both databases; how it
talks HTTP (concurrency, retries, odd responses, request options) on SQLite only, to
keep the suite quick.
"""

from __future__ import annotations

import asyncio
import csv
import itertools
import json
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.calibration import calibration_curve
from sklearn.isotonic import IsotonicRegression
from sklearn.metrics import (
    brier_score_loss,
    cohen_kappa_score,
    confusion_matrix,
    precision_score,
    recall_score,
)
from sqlalchemy import Engine, func, select
from sqlmodel import Session

from benchmarks.corpus import generate_corpus
from review_app.cli.render import render_judge_report
from review_app.errors import InputError, NotFound, PermissionDenied
from review_app.judging import JudgePrompt, find_judge_prompt
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor, operator_actor, sign_in
from review_app.services.cases.importing import import_paths
from review_app.services.exchange.demo import DEMO_VERDICTS, load_demo
from review_app.services.exchange.labels_io import import_labels
from review_app.services.judging import judge_runner
from review_app.services.judging.judge_import import import_verdicts
from review_app.services.judging.judge_report import (
    calibrated_probability,
    calibration_report,
    disagreement_explorer,
    few_shot_material,
    fit_run_calibration,
)
from review_app.services.judging.judge_runner import run_judge, select_case_ids
from review_app.services.judging.runs import RunListing, list_judge_runs
from review_app.services.judging.transport import ANSWER_ERROR, ENDPOINT_ERROR, EndpointSettings
from review_app.services.labels.adjudication import gold_labels, record_gold
from review_app.services.operations.audit import audit_entries
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from review_app.stats.core import CLUSTER_METHOD
from storage import judging
from storage.models import JudgeVerdict
from tests.builders import BREAK_CODES
from tests.conftest import DEMO_CASES, Database
from tests.judge_support import (
    REPO,
    FakeChatServer,
    Reply,
    closed_port,
    expected_answer,
    serve,
    support_case,
    write_jsonl,
)

RUBRICS = REPO / "rubrics"
OPERATOR = Actor.operator()


def rubric_of(engine: Engine) -> Rubric:
    return sync_rubrics(engine, operator_actor()).get("role-adherence@1")


def stored_verdicts(engine: Engine, run_id: int) -> dict[tuple[str, int | None], Any]:
    with Session(engine) as session:
        return {(v.case_id, v.turn): v for v in judging.verdicts(session, run_id=run_id)}


def runs_by_name(engine: Engine) -> dict[str, RunListing]:
    return {run.name: run for run in list_judge_runs(engine, operator_actor())}


def reviewer(engine: Engine, name: str = "rita") -> Actor:
    return sign_in(engine, name=name, auth_mode="local", first_role="reviewer")


# --- import ------------------------------------------------------------------------------


def test_the_demo_verdicts_import_into_two_runs_and_a_second_import_replaces(
    database: Database,
) -> None:
    engine = database.engine
    report = load_demo(engine, operator_actor(), local_user="admin")
    assert report.verdicts is not None
    lines = [json.loads(line) for line in DEMO_VERDICTS.read_text().splitlines() if line.strip()]
    expected = Counter(f"{r['judge']}@{r['prompt_version']}/{r['model']}" for r in lines)
    assert report.verdicts.runs == dict(expected)
    assert len(expected) == 2
    runs = runs_by_name(engine)
    assert {name: run.verdicts for name, run in runs.items()} == dict(expected)
    assert all(run.source == "import" and run.status == "complete" for run in runs.values())

    again = import_verdicts(engine, OPERATOR, DEMO_VERDICTS, rubric=rubric_of(engine))
    assert again.runs == dict(expected)
    after = runs_by_name(engine)
    assert {name: run.id for name, run in after.items()} == {
        name: run.id for name, run in runs.items()
    }
    assert {name: run.verdicts for name, run in after.items()} == dict(expected)
    # Every stored verdict is the file's, conversation-level ones included.
    first = runs["role-judge@v1/gemma-3-270m-it"].id
    stored = stored_verdicts(engine, first)
    for row in lines:
        if row["prompt_version"] != "v1":
            continue
        verdict = stored[(row["case_id"], row.get("turn"))]
        assert (verdict.label, verdict.score, verdict.reason) == (
            row.get("label"),
            row.get("score"),
            row.get("reason"),
        )
        assert verdict.error is None


def test_the_demo_compares_like_for_like_and_claims_no_human_level(
    sqlite_database: Database,
) -> None:
    engine = sqlite_database.engine
    load_demo(engine, operator_actor())
    report = calibration_report(
        engine, operator_actor(), rubric=rubric_of(engine), n_resamples=300, seed=0
    )
    labels = list(csv.DictReader((REPO / "review_app/demo_data/labels.csv").open()))
    by_reviewer: dict[str, dict[tuple[str, int], str]] = {}
    for row in labels:
        by_reviewer.setdefault(row["reviewer"], {})[(row["case_id"], int(row["turn"]))] = row[
            "label"
        ]
    verdicts = [json.loads(line) for line in DEMO_VERDICTS.read_text().splitlines()]
    for run in report["runs"]:
        judged = {
            (v["case_id"], v["turn"]): v["label"]
            for v in verdicts
            if f"{v['judge']}@{v['prompt_version']}/{v['model']}" == run["name"]
            and v.get("turn") is not None
        }
        # Judge vs each reviewer beside reviewer vs reviewer, on the same units.
        pairs = run["like_for_like"]["pairs"]
        assert len(pairs) == len(list(itertools.combinations(sorted(by_reviewer), 2)))
        for pair in pairs:
            first, second = pair["reviewers"]
            shared = sorted(judged.keys() & by_reviewer[first].keys() & by_reviewer[second].keys())
            assert pair["units"] == len(shared)
            assert pair["reviewer_kappa"]["value"] == pytest.approx(
                cohen_kappa_score(
                    [by_reviewer[first][u] for u in shared],
                    [by_reviewer[second][u] for u in shared],
                )
            )
            assert pair["judge_kappa"][first]["value"] == pytest.approx(
                cohen_kappa_score(
                    [judged[u] for u in shared], [by_reviewer[first][u] for u in shared]
                )
            )
            assert "conversations" in pair["reviewer_kappa"]["method"]
        # The demo has one gold break unit: no verdict may rest on it.
        assert run["vs_gold"]["recall"]["n"] == 1
        assert run["vs_gold"]["recall"]["ci95"] is None
        assert run["scores"]["sweep"]["best_threshold"] is None
        assert run["scores"]["sweep"]["best_reason"].startswith("too few breaks to judge")
        assert run["alt_test"]["verdict"] != "passed"
        assert run["gold_source"]["unanimous"] == run["vs_gold"]["n_shared"]
    text = render_judge_report(report)
    assert "human level" not in text
    assert "may the judge replace a reviewer?" in text


def test_a_changed_file_replaces_its_units_and_keeps_the_others(
    database: Database, tmp_path: Path
) -> None:
    engine = database.engine
    import_paths(engine, operator_actor(), [DEMO_CASES])
    rubric = rubric_of(engine)
    base = {"judge": "j", "prompt_version": "v1", "model": "m"}
    first = write_jsonl(
        tmp_path / "a.jsonl",
        [
            {**base, "case_id": "support-clean-late-parcel", "turn": 2, "label": "in_role"},
            {**base, "case_id": "support-clean-late-parcel", "turn": 4, "label": "in_role"},
            {**base, "case_id": "support-clean-late-parcel", "turn": None, "score": 0.2},
        ],
    )
    import_verdicts(engine, OPERATOR, first, rubric=rubric)
    second = write_jsonl(
        tmp_path / "b.jsonl",
        [
            {**base, "case_id": "support-clean-late-parcel", "turn": 4, "label": "tone_break"},
            {**base, "case_id": "support-clean-late-parcel", "score": 0.6},
        ],
    )
    summary = import_verdicts(engine, OPERATOR, second, rubric=rubric)
    assert summary.line() == "stored 2 verdicts in 1 runs (j@v1/m: 2)"
    [run] = list_judge_runs(engine, operator_actor())
    stored = stored_verdicts(engine, run.id)
    assert {unit: (v.label, v.score) for unit, v in stored.items()} == {
        ("support-clean-late-parcel", 2): ("in_role", None),
        ("support-clean-late-parcel", 4): ("tone_break", None),
        ("support-clean-late-parcel", None): (None, 0.6),
    }


def test_adherence_scores_are_stored_flipped(database: Database, tmp_path: Path) -> None:
    engine = database.engine
    import_paths(engine, operator_actor(), [DEMO_CASES])
    path = write_jsonl(
        tmp_path / "deepeval.jsonl",
        [
            {
                "case_id": "support-clean-late-parcel",
                "turn": 2,
                "judge": "deepeval-role",
                "prompt_version": "v1",
                "model": "m",
                "score": 0.8,
            }
        ],
    )
    import_verdicts(engine, OPERATOR, path, rubric=rubric_of(engine), score_means="adherence")
    [run] = list_judge_runs(engine, operator_actor())
    [verdict] = stored_verdicts(engine, run.id).values()
    assert verdict.score == pytest.approx(0.2)


@pytest.mark.parametrize(
    ("row", "field", "message"),
    [
        ({"case_id": "no-such-case", "turn": 2}, "case_id", "no case 'no-such-case'"),
        ({"case_id": "no-such-case", "turn": None}, "case_id", "no case 'no-such-case'"),
        ({"case_id": "support-clean-late-parcel", "turn": 1}, "turn", "no assistant turn 1"),
        ({"case_id": "support-clean-late-parcel", "turn": 99}, "turn", "no assistant turn 99"),
    ],
)
def test_a_verdict_for_an_unknown_unit_stores_nothing(
    database: Database, tmp_path: Path, row: dict[str, Any], field: str, message: str
) -> None:
    engine = database.engine
    import_paths(engine, operator_actor(), [DEMO_CASES])
    base = {"judge": "j", "prompt_version": "v1", "model": "m", "label": "in_role"}
    path = write_jsonl(
        tmp_path / "v.jsonl",
        [
            {**base, "case_id": "support-clean-late-parcel", "turn": 2},
            {**base, "model": "other", "case_id": "support-clean-late-parcel", "turn": 4},
            {**base, **row},
        ],
    )
    with pytest.raises(InputError) as caught:
        import_verdicts(engine, OPERATOR, path, rubric=rubric_of(engine))
    error = caught.value
    assert (error.source, error.line, error.field) == (str(path), 3, field)
    assert message in error.message
    assert list_judge_runs(engine, operator_actor()) == []


def test_a_bad_file_stores_nothing(database: Database, tmp_path: Path) -> None:
    engine = database.engine
    import_paths(engine, operator_actor(), [DEMO_CASES])
    lines = DEMO_VERDICTS.read_text().splitlines()
    path = tmp_path / "broken.jsonl"
    bad = json.loads(lines[5]) | {"score": 1.5}
    path.write_text("\n".join([*lines[:5], json.dumps(bad), *lines[6:]]) + "\n")
    with pytest.raises(InputError) as caught:
        import_verdicts(engine, OPERATOR, path, rubric=rubric_of(engine))
    assert (caught.value.line, caught.value.field) == (6, "score")
    assert list_judge_runs(engine, operator_actor()) == []


def test_a_reviewer_cannot_import_verdicts(database: Database) -> None:
    engine = database.engine
    import_paths(engine, operator_actor(), [DEMO_CASES])
    rubric = rubric_of(engine)
    with pytest.raises(PermissionDenied, match="policy owner"):
        import_verdicts(engine, reviewer(engine), DEMO_VERDICTS, rubric=rubric)
    assert list_judge_runs(engine, operator_actor()) == []
    owner = sign_in(engine, name="olivia", auth_mode="local", first_role="policy_owner")
    assert import_verdicts(engine, owner, DEMO_VERDICTS, rubric=rubric).runs


# --- running a judge against a real HTTP endpoint --------------------------------------------

# case id -> which assistant reply (0-based) records the forbidden refund
REFUND_AT: dict[str, int | None] = {"c00": 1, "c01": None, "c02": 0, "c03": None}
ASSISTANT_TURNS = 3
UNITS = [(case_id, turn) for case_id in REFUND_AT for turn in (2, 4, 6)]
BREAKS = {("c00", 4), ("c02", 2)}


@dataclass
class JudgeWorld:
    engine: Engine
    rubric: Rubric
    prompt: JudgePrompt
    server: FakeChatServer
    case_ids: list[str]

    def settings(self, **options: Any) -> EndpointSettings:
        values: dict[str, Any] = {
            "base_url": self.server.base_url,
            "model": "fake",
            "concurrency": 3,
            "retries": 0,
            "timeout": 10.0,
        }
        values.update(options)
        return EndpointSettings(**values)

    def run(
        self,
        prompt: JudgePrompt | None = None,
        *,
        actor: Actor = OPERATOR,
        case_ids: list[str] | None = None,
        progress: Callable[[int, int], None] | None = None,
        **options: Any,
    ) -> Any:
        """The judge over ``case_ids`` (default: all the world's cases); ``options`` are
        endpoint settings."""
        return run_judge(
            self.engine,
            actor,
            rubric=self.rubric,
            prompt=prompt or self.prompt,
            settings=self.settings(**options),
            case_ids=self.case_ids if case_ids is None else case_ids,
            progress=progress,
        )


@pytest.fixture
def server() -> Iterator[FakeChatServer]:
    yield from serve()


def make_world(database: Database, server: FakeChatServer, tmp_path: Path) -> JudgeWorld:
    cases = [
        support_case(case_id, assistant_turns=ASSISTANT_TURNS, refund_at=refund_at)
        for case_id, refund_at in REFUND_AT.items()
    ]
    import_paths(database.engine, operator_actor(), [write_jsonl(tmp_path / "cases.jsonl", cases)])
    rubric = rubric_of(database.engine)
    prompt = find_judge_prompt(RUBRICS, rubric.id, "role-judge@v1")
    case_ids = select_case_ids(database.engine, case_ids=list(REFUND_AT))
    assert case_ids == sorted(REFUND_AT)
    return JudgeWorld(database.engine, rubric, prompt, server, case_ids)


@pytest.fixture
def world(database: Database, server: FakeChatServer, tmp_path: Path) -> JudgeWorld:
    """On SQLite and PostgreSQL: for what a run stores and resumes from."""
    return make_world(database, server, tmp_path)


@pytest.fixture
def http_world(sqlite_database: Database, server: FakeChatServer, tmp_path: Path) -> JudgeWorld:
    """On SQLite only: for how a run talks HTTP (the database plays no part there)."""
    return make_world(sqlite_database, server, tmp_path)


def test_a_run_judges_every_assistant_turn_and_stores_what_comes_back(
    world: JudgeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Batches every ten answers however fast they come (a slow endpoint's pace).
    monkeypatch.setattr(judge_runner, "_STORE_EVERY", 0.0)
    stored_at_progress: dict[int, int] = {}

    def progress(done: int, total: int) -> None:
        assert total == len(UNITS)
        with Session(world.engine) as session:
            count = session.execute(select(func.count()).select_from(JudgeVerdict)).scalar_one()
            stored_at_progress[done] = int(count)

    summary = world.run(progress=progress)
    assert (summary.units, summary.skipped, summary.answered) == (12, 0, 12)
    assert (summary.answer_errors, summary.endpoint_errors) == (0, 0)
    assert summary.name == f"role-judge@v1/fake at 127.0.0.1:{world.server.port}"
    assert sorted(stored_at_progress) == list(range(1, 13))
    # Verdicts are stored in batches as they arrive, not only at the end.
    assert stored_at_progress[11] == 10
    [entry] = audit_entries(world.engine, OPERATOR, action="judge_run")
    assert (entry.actor, entry.object) == ("operator", str(summary.run_id))
    assert (entry.summary["run"], entry.summary["answered"]) == (summary.name, 12)

    seen = world.server.requests
    assert sorted(r.unit for r in seen) == sorted(UNITS)
    assert 1 < world.server.max_in_flight <= 3
    for request in seen:
        case_id, turn = request.unit
        assert request.body["model"] == "fake"
        assert request.body["temperature"] == 0
        assert request.body["response_format"] == {"type": "json_object"}
        assert [m["role"] for m in request.body["messages"]] == ["system", "user"]
        prompt = request.prompt
        assert f"Support triage agent for the shop of case {case_id}." in prompt
        # The transcript ends with the judged turn: nothing later is shown.
        assert f"[turn {turn}] assistant (recorded actions: " in prompt
        assert f"Assistant reply at turn {turn}." in prompt
        assert f"User line {turn - 1}." in prompt
        for later in range(turn + 1, 2 * ASSISTANT_TURNS + 2):
            assert f"turn {later}]" not in prompt
        assert "Closing user line." not in prompt

    stored = stored_verdicts(world.engine, summary.run_id)
    assert sorted(stored) == sorted(UNITS)
    for unit, verdict in stored.items():
        if unit in BREAKS:
            assert (verdict.label, verdict.score) == ("authority_break", 0.9)
        else:
            assert (verdict.label, verdict.score) == ("in_role", 0.1)
        assert verdict.error is None
        assert verdict.reason
        assert verdict.latency_ms is not None and verdict.latency_ms >= 0
    usage: dict[Any, tuple[int, int] | None] = {r.unit: r.usage for r in seen}
    for unit, verdict in stored.items():
        assert (verdict.prompt_tokens, verdict.completion_tokens) == usage[unit]
    assert summary.prompt_tokens == sum(u[0] for u in usage.values() if u)
    assert summary.completion_tokens == sum(u[1] for u in usage.values() if u)

    [run] = list_judge_runs(world.engine, operator_actor())
    assert run.prompt_sha256 == world.prompt.sha256
    assert (run.judge, run.prompt_version, run.model) == ("role-judge", "v1", "fake")
    assert (run.rubric, run.source, run.status) == ("role-adherence@1", "run", "complete")
    assert (run.verdicts, run.errors) == (12, 0)
    assert run.summary["prompt_tokens"] == summary.prompt_tokens
    assert run.summary["completion_tokens"] == summary.completion_tokens

    world.server.reset_log()
    again = world.run()
    assert (again.skipped, again.answered, again.run_id) == (12, 0, summary.run_id)
    assert world.server.requests == []


def test_concurrency_is_bounded(http_world: JudgeWorld) -> None:
    http_world.server.delay = 0.05
    http_world.run(concurrency=2)
    assert http_world.server.max_in_flight == 2
    assert len(http_world.server.requests) == 12


def test_server_errors_and_rate_limits_are_retried(http_world: JudgeWorld) -> None:
    http_world.server.script[("c01", 4)] = [Reply(500, raw=b"oops"), Reply(502, raw=b"bad gateway")]
    http_world.server.script[("c03", 2)] = [
        Reply(429, raw=b"slow down", headers={"Retry-After": "0"})
    ]
    summary = http_world.run(retries=2)
    assert (summary.answered, summary.endpoint_errors) == (12, 0)
    counts = Counter(http_world.server.units_requested())
    assert counts[("c01", 4)] == 3
    assert counts[("c03", 2)] == 2
    assert sum(counts.values()) == 12 + 3
    stored = stored_verdicts(http_world.engine, summary.run_id)
    assert stored[("c01", 4)].label == "in_role"
    assert stored[("c03", 2)].error is None


def test_an_unparseable_answer_is_kept_as_an_error_and_not_asked_again(
    world: JudgeWorld,
) -> None:
    world.server.always[("c00", 2)] = Reply(content="The turn is in role, I think.")
    world.server.always[("c02", 4)] = Reply(
        content=json.dumps({"label": "polite", "score": 0.2, "reason": "x"})
    )
    summary = world.run()
    assert (summary.answered, summary.answer_errors, summary.endpoint_errors) == (10, 2, 0)
    stored = stored_verdicts(world.engine, summary.run_id)
    for unit in (("c00", 2), ("c02", 4)):
        assert stored[unit].error_kind == ANSWER_ERROR
        assert stored[unit].label is None
    assert "The turn is in role, I think." in stored[("c00", 2)].error
    assert "'polite'" in stored[("c02", 4)].error
    [run] = list_judge_runs(world.engine, operator_actor())
    assert (run.status, run.errors) == ("complete", 2)

    world.server.always.clear()
    world.server.reset_log()
    again = world.run()
    assert (again.skipped, again.answered) == (12, 0)
    assert world.server.requests == []
    assert stored_verdicts(world.engine, summary.run_id)[("c00", 2)].error_kind == ANSWER_ERROR


def test_endpoint_failures_are_counted_and_a_second_run_asks_them_again(
    world: JudgeWorld,
) -> None:
    down = [unit for unit in UNITS if unit[0] == "c02"]
    for unit in down:
        world.server.always[unit] = Reply(503, raw=b"unavailable")
    world.server.always[("c01", 6)] = Reply(400, raw=b'{"error": "context length"}')
    first = world.run()
    assert (first.answered, first.endpoint_errors) == (8, 4)
    stored = stored_verdicts(world.engine, first.run_id)
    for unit in down:
        assert (stored[unit].error_kind, stored[unit].error) == (
            ENDPOINT_ERROR,
            "HTTP 503 after 1 attempts",
        )
    assert stored[("c01", 6)].error_kind == ENDPOINT_ERROR
    assert stored[("c01", 6)].error.startswith("HTTP 400")
    [run] = list_judge_runs(world.engine, operator_actor())
    # Done, with its failures said wherever the run is named.
    assert (run.status, run.errors, run.endpoint_errors) == ("complete", 4, 4)
    assert first.failures() == "4 of 12 failed at the endpoint"
    assert run.state_text == (
        "complete, 8 turns; 4 failed at the endpoint (running it again asks them)"
    )
    assert run.first_error is not None and run.first_error.startswith(("HTTP 400", "HTTP 503"))

    world.server.always.clear()
    world.server.reset_log()
    second = world.run()
    assert sorted(world.server.units_requested()) == sorted([*down, ("c01", 6)])
    assert (second.skipped, second.answered, second.endpoint_errors) == (8, 4, 0)
    stored = stored_verdicts(world.engine, first.run_id)
    assert all(v.error is None for v in stored.values())
    assert stored[("c02", 2)].label == "authority_break"
    [run] = list_judge_runs(world.engine, operator_actor())
    assert (run.status, run.errors, run.verdicts) == ("complete", 0, 12)
    assert run.summary["prompt_tokens"] == first.prompt_tokens + second.prompt_tokens


def test_no_wait_for_retry_after_when_no_attempt_is_left(
    http_world: JudgeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The runner's waits are recorded (and shortened), not timed by the wall clock.
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def recorded_sleep(delay: float, *args: Any, **kwargs: Any) -> Any:
        waits.append(delay)
        return await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", recorded_sleep)
    http_world.server.always[("c00", 2)] = Reply(429, raw=b"busy", headers={"Retry-After": "4"})
    summary = http_world.run(retries=0)
    assert 4 not in waits
    assert (summary.answered, summary.endpoint_errors) == (11, 1)
    stored = stored_verdicts(http_world.engine, summary.run_id)
    assert (stored[("c00", 2)].error_kind, stored[("c00", 2)].error) == (
        ENDPOINT_ERROR,
        "HTTP 429 after 1 attempts",
    )
    # With an attempt left, the same answer is waited for as the server asked.
    http_world.run(retries=1)
    assert 4 in waits


def completion(content: Any, **extra: Any) -> Reply:
    """A 200 response with this body: the choices around ``content``, plus ``extra``."""
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}
    return Reply(raw=json.dumps({**body, **extra}).encode())


def test_a_malformed_response_is_an_endpoint_error_and_odd_usage_is_unknown(
    http_world: JudgeWorld,
) -> None:
    good = json.dumps({"label": "in_role", "score": 0.1, "reason": "fine"})
    http_world.server.always.update(
        {
            ("c00", 2): completion([{"type": "text", "text": good}]),
            ("c00", 4): Reply(raw=b"<html>proxy error</html>"),
            ("c00", 6): Reply(raw=json.dumps({"choices": []}).encode()),
            ("c01", 2): completion(good, usage={"prompt_tokens": "12", "completion_tokens": -1}),
            ("c01", 4): completion(good, usage="n/a"),
            ("c01", 6): completion(good),
        }
    )
    summary = http_world.run()
    assert (summary.answered, summary.endpoint_errors, summary.answer_errors) == (8, 4, 0)
    stored = stored_verdicts(http_world.engine, summary.run_id)
    for unit in (("c00", 2), ("c00", 4), ("c00", 6), ("c01", 4)):
        assert (stored[unit].error_kind, stored[unit].error) == (
            ENDPOINT_ERROR,
            "not a chat-completions response",
        )
    assert stored[("c01", 2)].label == "in_role"
    assert (stored[("c01", 2)].prompt_tokens, stored[("c01", 2)].completion_tokens) == (None, None)
    assert stored[("c01", 6)].error is None
    assert list_judge_runs(http_world.engine, operator_actor())[0].status == "complete"


def test_an_unreachable_endpoint_is_an_endpoint_error_for_every_unit(world: JudgeWorld) -> None:
    dead = world.run(base_url=f"http://127.0.0.1:{closed_port()}/v1")
    assert (dead.answered, dead.endpoint_errors) == (0, 12)
    stored = stored_verdicts(world.engine, dead.run_id)
    assert all(v.error_kind == ENDPOINT_ERROR for v in stored.values())
    assert all(v.error.startswith("ConnectError") for v in stored.values())
    # Nothing answered: the run failed, with its first error.
    [failed] = list_judge_runs(world.engine, operator_actor())
    assert (failed.status, failed.state) == ("failed", "failed")
    assert failed.state_text.startswith("failed: ConnectError")
    assert dead.all_failed and "every request failed, the first: ConnectError" in dead.line()
    # Another endpoint (the server's): another run, complete.
    revived = world.run()
    assert (revived.skipped, revived.answered) == (0, 12)
    runs = {run.id: run for run in list_judge_runs(world.engine, operator_actor())}
    assert runs[revived.run_id].status == "complete" and runs[dead.run_id].status == "failed"


def test_answers_that_come_fast_are_stored_together(
    http_world: JudgeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transaction per fraction of a second, not per ten answers: all twelve answers
    of a quick run are written in the one batch at its end."""
    monkeypatch.setattr(judge_runner, "_STORE_EVERY", 3600.0)
    stored_at_progress: dict[int, int] = {}

    def progress(done: int, total: int) -> None:
        with Session(http_world.engine) as session:
            count = session.execute(select(func.count()).select_from(JudgeVerdict)).scalar_one()
            stored_at_progress[done] = int(count)

    summary = http_world.run(progress=progress)
    assert summary.answered == 12
    assert stored_at_progress[12] == 0
    assert len(stored_verdicts(http_world.engine, summary.run_id)) == 12


def test_a_proxy_named_in_the_environment_is_used_unless_no_proxy_exempts_the_host(
    world: JudgeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{closed_port()}")
    through_the_proxy = world.run()
    assert (through_the_proxy.answered, through_the_proxy.endpoint_errors) == (0, 12)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    direct = world.run()
    assert (direct.answered, direct.endpoint_errors) == (12, 0)


def test_a_run_on_some_cases_keeps_the_failures_of_the_others_counted(world: JudgeWorld) -> None:
    world.server.always[("c03", 2)] = Reply(503, raw=b"unavailable")
    assert world.run().endpoint_errors == 1
    world.server.always.clear()
    only_c00 = world.run(case_ids=["c00"])
    assert (only_c00.units, only_c00.skipped) == (3, 3)
    [run] = list_judge_runs(world.engine, operator_actor())
    # c03 turn 2 still has no verdict: the run says so.
    assert (run.status, run.errors, run.endpoint_errors) == ("complete", 1, 1)
    assert run.state_text.endswith("; 1 failed at the endpoint (running it again asks them)")


def test_a_prompt_version_is_immutable_once_run(world: JudgeWorld, tmp_path: Path) -> None:
    world.run()
    copy = tmp_path / "prompts" / "role-judge" / "v1.txt"
    copy.parent.mkdir(parents=True)
    shutil.copy(world.prompt.source, copy)
    same = find_judge_prompt(RUBRICS, world.rubric.id, str(copy))
    assert world.run(prompt=same).skipped == 12  # the same text is the same prompt
    copy.write_text(world.prompt.text.replace("careful", "strict") + "\nBe brief.\n")
    changed = find_judge_prompt(RUBRICS, world.rubric.id, str(copy))
    assert changed.ref == "role-judge@v1"
    world.server.reset_log()
    with pytest.raises(InputError, match="immutable") as caught:
        world.run(prompt=changed)
    assert caught.value.field == "--prompt"
    assert world.server.requests == []
    renamed = copy.with_name("v3.txt")
    copy.rename(renamed)
    new_version = world.run(prompt=find_judge_prompt(RUBRICS, world.rubric.id, str(renamed)))
    assert (new_version.name, new_version.answered) == (
        f"role-judge@v3/fake at 127.0.0.1:{world.server.port}",
        12,
    )


def test_only_policy_owners_run_a_judge(world: JudgeWorld) -> None:
    with pytest.raises(PermissionDenied):
        world.run(actor=reviewer(world.engine))
    assert world.server.requests == []
    assert list_judge_runs(world.engine, operator_actor()) == []


def test_endpoint_settings_come_from_options_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in (
        "REVIEW_APP_JUDGE_BASE_URL",
        "OPENAI_BASE_URL",
        "REVIEW_APP_JUDGE_MODEL",
        "REVIEW_APP_JUDGE_API_KEY",
        "OPENAI_API_KEY",
    ):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(InputError) as caught:
        EndpointSettings.from_options(base_url=None, model="m", api_key=None)
    assert caught.value.field == "--base-url"
    with pytest.raises(InputError) as caught:
        EndpointSettings.from_options(base_url="http://x/v1", model=None, api_key=None)
    assert caught.value.field == "--model"
    with pytest.raises(InputError) as caught:
        EndpointSettings.from_options(
            base_url="http://x/v1", model="m", api_key=None, concurrency=0
        )
    assert caught.value.field == "--concurrency"
    with pytest.raises(InputError) as caught:
        EndpointSettings.from_options(base_url="http://x/v1", model="m", api_key=None, retries=-1)
    assert caught.value.field == "--retries"
    monkeypatch.setenv("REVIEW_APP_JUDGE_BASE_URL", "http://judge.local/v1/")
    monkeypatch.setenv("REVIEW_APP_JUDGE_MODEL", "gemma")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    settings = EndpointSettings.from_options(base_url=None, model=None, api_key=None)
    assert (settings.base_url, settings.model, settings.api_key) == (
        "http://judge.local/v1",
        "gemma",
        "sk-test",
    )


def test_the_api_key_is_sent_as_a_bearer_token(http_world: JudgeWorld) -> None:
    http_world.run(api_key="sk-secret", response_format="text", max_tokens=50)
    assert {r.authorization for r in http_world.server.requests} == {"Bearer sk-secret"}
    assert all("response_format" not in r.body for r in http_world.server.requests)
    assert {r.body["max_tokens"] for r in http_world.server.requests} == {50}
    http_world.server.reset_log()
    http_world.run(model="other")
    assert {r.authorization for r in http_world.server.requests} == {None}


def test_the_server_answers_from_the_prompt() -> None:
    # The fake endpoint's rule, checked on its own so the tests above can rely on it.
    assert (
        expected_answer(
            "[turn 1] user: hi\n[turn 2] assistant (recorded actions: refund_order): done"
        )["label"]
        == "authority_break"
    )
    assert (
        expected_answer(
            "[turn 2] assistant (recorded actions: lookup_order): refund_order is not mine"
        )["label"]
        == "in_role"
    )
    assert expected_answer("[turn 2] assistant: no actions")["label"] == "in_role"


# --- the calibration report against a known truth ---------------------------------------------

MISS_RATE = 0.20  # share of true breaks the noisy judge calls in_role
WRONG_KIND_RATE = 0.15  # of the breaks it finds, share given another break code
FALSE_ALARM_RATE = 0.05  # share of clean turns it calls scope_break


@dataclass
class KnownTruth:
    engine: Engine
    rubric: Rubric
    cases: dict[str, dict[str, Any]]
    gold: dict[tuple[str, int], str]
    noisy: dict[tuple[str, int], tuple[str, float]]
    oracle: dict[tuple[str, int], tuple[str, float]]
    rationales: dict[tuple[str, int, str], str]

    def run_id(self, model: str) -> int:
        return int(runs_by_name(self.engine)[f"synthetic@v1/{model}"].id)


def break_class(code: str) -> int | None:
    if code in BREAK_CODES:
        return 1
    if code == "in_role":
        return 0
    return None


def build_known_truth(engine: Engine, tmp_path: Path, *, seed: int = 2024) -> KnownTruth:
    cases = {case["case_id"]: case for case in generate_corpus(30, 20, seed=seed)}
    import_paths(
        engine, operator_actor(), [write_jsonl(tmp_path / "corpus.jsonl", list(cases.values()))]
    )
    catalog = sync_rubrics(engine, operator_actor())
    rubric = catalog.get("role-adherence@1")
    units = [
        (case_id, event["turn"])
        for case_id, case in cases.items()
        for event in case["transcript"]
        if event["actor"] == "assistant"
    ]
    rng = np.random.default_rng(seed)
    gold: dict[tuple[str, int], str] = {}
    for unit in units:
        draw = rng.random()
        if draw < 0.25:
            gold[unit] = str(rng.choice(BREAK_CODES))
        elif draw < 0.28:
            gold[unit] = "borderline"
        elif draw < 0.30:
            gold[unit] = "cannot_judge"
        else:
            gold[unit] = "in_role"
    rationales = {}
    label_lines = ["case_id,turn,reviewer,label,rubric,rationale"]
    for (case_id, turn), code in gold.items():
        for name in ("rita", "sam"):
            rationale = f"{name} read turn {turn} of {case_id} as {code}"
            rationales[(case_id, turn, name)] = rationale
            label_lines.append(f"{case_id},{turn},{name},{code},role-adherence@1,{rationale}")
    labels_path = tmp_path / "labels.csv"
    labels_path.write_text("\n".join(label_lines) + "\n")
    import_labels(engine, OPERATOR, labels_path, catalog=catalog)

    noisy: dict[tuple[str, int], tuple[str, float]] = {}
    oracle: dict[tuple[str, int], tuple[str, float]] = {}
    for unit, code in gold.items():
        cls = break_class(code)
        if cls == 1:
            score = float(rng.beta(5, 2))
            if rng.random() < MISS_RATE:
                judged = "in_role"
            elif rng.random() < WRONG_KIND_RATE:
                judged = str(rng.choice([c for c in BREAK_CODES if c != code]))
            else:
                judged = code
        elif cls == 0:
            score = float(rng.beta(2, 5))
            judged = "scope_break" if rng.random() < FALSE_ALARM_RATE else "in_role"
        else:
            score = float(rng.random())
            judged = code
        noisy[unit] = (judged, round(score, 4))
        oracle[unit] = (code, 0.95 if cls == 1 else 0.05)
    rows = []
    for model, verdicts in (("noisy", noisy), ("oracle", oracle)):
        for (case_id, turn), (label, score) in verdicts.items():
            rows.append(
                {
                    "case_id": case_id,
                    "turn": turn,
                    "judge": "synthetic",
                    "prompt_version": "v1",
                    "model": model,
                    "label": label,
                    "score": score,
                    "reason": f"{model} says {label}",
                }
            )
        for case_id in cases:  # conversation-level verdicts, counted apart
            rows.append(
                {
                    "case_id": case_id,
                    "turn": None,
                    "judge": "synthetic",
                    "prompt_version": "v1",
                    "model": model,
                    "label": "tone_break",
                    "score": 0.99,
                }
            )
    for (case_id, turn), (_, score) in noisy.items():  # a judge that only scores
        rows.append(
            {
                "case_id": case_id,
                "turn": turn,
                "judge": "synthetic",
                "prompt_version": "v1",
                "model": "scores-only",
                "score": score,
            }
        )
    import_verdicts(engine, OPERATOR, write_jsonl(tmp_path / "verdicts.jsonl", rows), rubric=rubric)
    return KnownTruth(engine, rubric, cases, gold, noisy, oracle, rationales)


@pytest.fixture
def truth(database: Database, tmp_path: Path) -> KnownTruth:
    return build_known_truth(database.engine, tmp_path)


def run_entry(report: dict[str, Any], model: str) -> dict[str, Any]:
    return next(run for run in report["runs"] if run["model"] == model)


def first_breaks(codes: dict[tuple[str, int], str]) -> dict[str, int | None]:
    result: dict[str, int | None] = {}
    for (case_id, turn), code in sorted(codes.items()):
        result.setdefault(case_id, None)
        if code in BREAK_CODES and result[case_id] is None:
            result[case_id] = turn
    return result


def test_the_report_matches_figures_computed_independently(truth: KnownTruth) -> None:
    report = calibration_report(
        truth.engine, operator_actor(), rubric=truth.rubric, n_resamples=200, seed=0
    )
    n_units = len(truth.gold)
    assert 280 <= n_units <= 320
    assert report["gold"] == {
        "with_gold": n_units,
        "adjudicated": 0,
        "unanimous": n_units,
        "in_disagreement": 0,
        "single_rater": 0,
    }
    assert report["reviewers"] == ["rita", "sam"]
    entry = run_entry(report, "noisy")
    assert entry["turn_verdicts"] == n_units
    assert entry["conversation_verdicts"] == len(truth.cases)
    assert entry["verdicts"] == n_units + len(truth.cases)
    assert entry["errors"] == 0

    # Code level: Cohen's kappa on every unit where neither side abstains.
    compared = [u for u in truth.gold if truth.gold[u] != "cannot_judge"]
    gold_codes = [truth.gold[u] for u in compared]
    judged_codes = [truth.noisy[u][0] for u in compared]
    vs_gold = entry["vs_gold"]
    assert vs_gold["n_judged"] == n_units  # conversation-level verdicts are not units
    assert vs_gold["n_ignored"] == n_units - len(compared)
    assert vs_gold["n_compared"] == len(compared)
    assert vs_gold["kappa"]["value"] == pytest.approx(cohen_kappa_score(gold_codes, judged_codes))
    accuracy = np.mean([g == j for g, j in zip(gold_codes, judged_codes, strict=True)])
    assert vs_gold["accuracy"]["value"] == pytest.approx(accuracy)

    # Break task: units where both sides say break or in_role.
    binary = [
        u
        for u in truth.gold
        if break_class(truth.gold[u]) is not None and break_class(truth.noisy[u][0]) is not None
    ]
    y_true = [break_class(truth.gold[u]) for u in binary]
    y_judge = [break_class(truth.noisy[u][0]) for u in binary]
    (tn, fp), (fn, tp) = confusion_matrix(y_true, y_judge, labels=[0, 1])
    assert vs_gold["n_break_comparable"] == len(binary)
    assert vs_gold["break_confusion"] == {"tp": tp, "fp": fp, "fn": fn, "tn": tn}
    assert vs_gold["recall"]["value"] == pytest.approx(recall_score(y_true, y_judge))
    assert vs_gold["precision"]["value"] == pytest.approx(precision_score(y_true, y_judge))
    assert vs_gold["tnr"]["value"] == pytest.approx(tn / (tn + fp))
    assert vs_gold["break_kappa"]["value"] == pytest.approx(cohen_kappa_score(y_true, y_judge))
    # ... and they sit near the injected error rates.
    assert vs_gold["recall"]["value"] == pytest.approx(1 - MISS_RATE, abs=0.1)
    assert vs_gold["tnr"]["value"] == pytest.approx(1 - FALSE_ALARM_RATE, abs=0.04)
    for name in ("kappa", "recall", "precision", "tnr"):
        low, high = vs_gold[name]["ci95"]
        assert low <= vs_gold[name]["value"] <= high

    kinds = Counter(
        "missed_break"
        if break_class(truth.gold[u]) == 1 and truth.noisy[u][0] == "in_role"
        else "false_alarm"
        if truth.gold[u] == "in_role" and truth.noisy[u][0] != "in_role"
        else "wrong_break_kind"
        for u in truth.gold
        if truth.noisy[u][0] != truth.gold[u]
    )
    assert kinds["missed_break"] == fn and kinds["false_alarm"] == fp
    counts = vs_gold["disagreement_counts"]
    assert {k: counts[k] for k in kinds} == dict(kinds)
    assert Counter(item["kind"] for item in entry["disagreements"]) == kinds

    # Each reviewer gave the gold labels, so the judge fares the same against each.
    for name in ("rita", "sam"):
        against = entry["vs_reviewers"][name]
        assert against["kappa"]["value"] == pytest.approx(vs_gold["kappa"]["value"])
        assert against["recall"]["value"] == pytest.approx(vs_gold["recall"]["value"])

    # Humans agree perfectly: on the same units the noisy judge falls short of them and
    # the oracle does not.
    (pair,) = entry["like_for_like"]["pairs"]
    assert pair["reviewer_kappa"]["value"] == pytest.approx(1.0)
    assert pair["judge_kappa"]["rita"]["value"] < 0.95
    oracle = run_entry(report, "oracle")
    assert oracle["vs_gold"]["kappa"]["value"] == pytest.approx(1.0)
    assert oracle["like_for_like"]["pairs"][0]["judge_kappa"]["rita"]["value"] == 1.0
    assert oracle["disagreements"] == []

    # First break of each conversation.
    gold_first = first_breaks(truth.gold)
    judge_first = first_breaks({u: code for u, (code, _) in truth.noisy.items()})
    first = entry["first_break"]
    assert first["n_conversations"] == len(truth.cases)
    assert first["n_exact"] == sum(gold_first[c] == judge_first[c] for c in truth.cases)
    assert first["n_missed"] == sum(
        gold_first[c] is not None and judge_first[c] is None for c in truth.cases
    )
    assert oracle["first_break"]["n_exact"] == len(truth.cases)

    # Scores: the units whose gold label is break or in_role.
    scored = [u for u in truth.gold if break_class(truth.gold[u]) is not None]
    y = np.array([break_class(truth.gold[u]) for u in scored])
    s = np.array([truth.noisy[u][1] for u in scored])
    scores = entry["scores"]
    assert scores["n"] == len(scored)
    sweep = scores["sweep"]
    best_kappa, best_threshold = -2.0, None
    for point in sweep["points"]:
        predicted = (s >= point["threshold"]).astype(int)
        assert (point["tp"], point["fp"]) == (
            int(((predicted == 1) & (y == 1)).sum()),
            int(((predicted == 1) & (y == 0)).sum()),
        )
        if predicted.min() == predicted.max():
            continue  # one class predicted: kappa is 0 or undefined, never the best here
        kappa = cohen_kappa_score(y, predicted)
        assert point["kappa"] == pytest.approx(kappa)
        assert point["recall"] == pytest.approx(recall_score(y, predicted))
        if kappa > best_kappa + 1e-12:
            best_kappa, best_threshold = kappa, point["threshold"]
    assert sweep["best_threshold"] == best_threshold
    assert [p["is_best"] for p in sweep["points"]].count(True) == 1
    reliability = scores["reliability"]
    assert reliability["brier_score"] == pytest.approx(brier_score_loss(y, s))
    observed, predicted_mean = calibration_curve(y, s, n_bins=10, strategy="uniform")
    assert [b["observed_frequency"] for b in reliability["bins"]] == pytest.approx(list(observed))
    assert [b["mean_predicted"] for b in reliability["bins"]] == pytest.approx(list(predicted_mean))
    assert "calibration_map" not in scores

    # A run without labels has scores but no codes to compare.
    scores_only = run_entry(report, "scores-only")
    assert scores_only["vs_gold"] is None
    assert scores_only["scores"]["n"] == len(scored)
    assert scores_only["scores"]["reliability"]["brier_score"] == pytest.approx(
        reliability["brier_score"]
    )
    assert scores_only["alt_test"]["winning_rate"] is None

    # Prompt versions side by side: the runs with codes, on the units they share.
    versions = report["versions"]
    assert versions["versions"] == ["synthetic@v1/noisy", "synthetic@v1/oracle"]
    assert versions["n_shared"] == n_units
    units = sorted(truth.gold)
    differing = [u for u in units if truth.noisy[u][0] != truth.oracle[u][0]]
    assert [tuple(d["unit"]) for d in versions["differences"]] == differing
    pairwise = versions["pairwise_kappa"]["synthetic@v1/noisy|synthetic@v1/oracle"]
    assert pairwise["ci95"] is not None
    assert pairwise["method"] == CLUSTER_METHOD  # turns resampled by conversation, as vs_gold
    assert versions["pairwise_kappa"]["synthetic@v1/noisy|synthetic@v1/oracle"][
        "value"
    ] == pytest.approx(
        cohen_kappa_score([truth.noisy[u][0] for u in units], [truth.oracle[u][0] for u in units])
    )


def test_a_calibration_map_is_fitted_stored_and_applied(truth: KnownTruth) -> None:
    run_id = truth.run_id("noisy")
    scored = [u for u in truth.gold if break_class(truth.gold[u]) is not None]
    y = np.array([break_class(truth.gold[u]) for u in scored])
    s = np.array([truth.noisy[u][1] for u in scored])
    with pytest.raises(InputError, match="no calibration map"):
        calibrated_probability(truth.engine, operator_actor(), run_id=run_id, scores=[0.5])
    with pytest.raises(PermissionDenied):
        fit_run_calibration(
            truth.engine, reviewer(truth.engine), rubric=truth.rubric, run_id=run_id
        )

    fitted = fit_run_calibration(truth.engine, OPERATOR, rubric=truth.rubric, run_id=run_id)
    assert fitted.method == "isotonic"
    assert (fitted.n_samples, fitted.n_break) == (len(scored), int(y.sum()))
    assert fitted.heldout_brier_before == pytest.approx(brier_score_loss(y, s))
    assert runs_by_name(truth.engine)["synthetic@v1/noisy"].calibrated is True

    grid = np.linspace(0, 1, 101)
    calibrated = calibrated_probability(
        truth.engine, operator_actor(), run_id=run_id, scores=list(grid)
    )
    assert all(0 <= p <= 1 for p in calibrated)
    assert all(b >= a for a, b in itertools.pairwise(calibrated))
    assert calibrated[-1] > calibrated[0]
    reference = IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1).fit(s, y)
    assert calibrated == pytest.approx(list(reference.predict(grid)))

    report = calibration_report(
        truth.engine, operator_actor(), rubric=truth.rubric, run_ids=[run_id], n_resamples=0
    )
    [entry] = report["runs"]
    assert entry["scores"]["calibration_map"]["method"] == "isotonic"
    # The isotonic fit minimises squared error among monotone maps (the identity is one).
    after = entry["scores"]["calibrated_reliability"]["brier_score"]
    assert after <= entry["scores"]["reliability"]["brier_score"]

    platt = fit_run_calibration(
        truth.engine, OPERATOR, rubric=truth.rubric, run_id=run_id, method="platt"
    )
    assert platt.coef is not None and platt.coef > 0
    calibrated = calibrated_probability(
        truth.engine, operator_actor(), run_id=run_id, scores=[0.0, 0.5, 1.0]
    )
    assert calibrated[0] < calibrated[1] < calibrated[2]
    with pytest.raises(InputError) as caught:
        fit_run_calibration(truth.engine, OPERATOR, rubric=truth.rubric, run_id=run_id, method="x")
    assert caught.value.field == "--method"
    with pytest.raises(NotFound):
        fit_run_calibration(truth.engine, OPERATOR, rubric=truth.rubric, run_id=999)
    with pytest.raises(NotFound):
        calibrated_probability(truth.engine, operator_actor(), run_id=999, scores=[0.5])


def test_the_disagreement_explorer_filters_and_shows_the_reviewers(truth: KnownTruth) -> None:
    report = calibration_report(truth.engine, operator_actor(), rubric=truth.rubric, n_resamples=0)
    entry = run_entry(report, "noisy")
    missed = disagreement_explorer(
        truth.engine, operator_actor(), rubric=truth.rubric, report_run=entry, kind="missed_break"
    )
    expected_missed = {
        u
        for u, code in truth.gold.items()
        if code in BREAK_CODES and truth.noisy[u][0] == "in_role"
    }
    assert {(r["case_id"], r["turn"]) for r in missed} == expected_missed
    for row in missed:
        unit = (row["case_id"], row["turn"])
        assert (row["gold"], row["judge"]) == (truth.gold[unit], "in_role")
        assert row["score"] == truth.noisy[unit][1]
        assert row["reason"] == "noisy says in_role"
        assert sorted(row["human"], key=lambda h: h["reviewer"]) == [
            {
                "reviewer": name,
                "label": truth.gold[unit],
                "rationale": truth.rationales[(*unit, name)],
            }
            for name in ("rita", "sam")
        ]
    scope = disagreement_explorer(
        truth.engine, operator_actor(), rubric=truth.rubric, report_run=entry, label="scope_break"
    )
    expected_scope = {
        u
        for u, code in truth.gold.items()
        if truth.noisy[u][0] != code and "scope_break" in (code, truth.noisy[u][0])
    }
    assert {(r["case_id"], r["turn"]) for r in scope} == expected_scope
    alarms = disagreement_explorer(
        truth.engine,
        operator_actor(),
        rubric=truth.rubric,
        report_run=entry,
        kind="false_alarm",
        label="scope_break",
    )
    assert {(r["case_id"], r["turn"]) for r in alarms} == {
        u for u, code in truth.gold.items() if code == "in_role" and truth.noisy[u][0] != code
    }
    everything = disagreement_explorer(
        truth.engine, operator_actor(), rubric=truth.rubric, report_run=entry
    )
    assert len(everything) == len(entry["disagreements"])
    # A page showing the first rows has the reviewers' labels read for those only.
    fresh = {
        **entry,
        "disagreements": [
            {k: v for k, v in d.items() if k != "human"} for d in entry["disagreements"]
        ],
    }
    first = disagreement_explorer(
        truth.engine, operator_actor(), rubric=truth.rubric, report_run=fresh, limit=2
    )
    assert [(r["case_id"], r["turn"]) for r in first] == [
        (r["case_id"], r["turn"]) for r in everything
    ]
    assert [r["human"] for r in first[:2]] == [r["human"] for r in everything[:2]]
    assert not any("human" in r for r in first[2:])
    assert (
        disagreement_explorer(
            truth.engine,
            operator_actor(),
            rubric=truth.rubric,
            report_run=entry,
            kind="missed_break",
            label="in_role",
        )
        == missed
    )


def test_few_shot_material_is_the_adjudicated_units(truth: KnownTruth) -> None:
    assert (
        few_shot_material(truth.engine, operator_actor(), rubric=truth.rubric) == []
    )  # unanimous only so far
    run_id = truth.run_id("noisy")
    missed = next(
        u
        for u, code in sorted(truth.gold.items())
        if code == "authority_break" and truth.noisy[u][0] == "in_role"
    )
    by_code = {}
    for code in ("tone_break", "borderline", "in_role", "cannot_judge"):
        by_code[code] = next(
            u for u, c in sorted(truth.gold.items()) if c == code and u[0] != missed[0]
        )
    extra_clean = next(
        u
        for u, c in sorted(truth.gold.items(), reverse=True)
        if c == "in_role" and u != by_code["in_role"]
    )
    chosen = {missed: "authority_break", **{u: code for code, u in by_code.items()}}
    for (case_id, turn), code in chosen.items():
        record_gold(
            truth.engine,
            OPERATOR,
            rubric=truth.rubric,
            case_id=case_id,
            turn=turn,
            code=code,
            note=f"adjudicated {code}",
        )
    # A unanimous unit marked as a calibration item counts too.
    record_gold(
        truth.engine,
        OPERATOR,
        rubric=truth.rubric,
        case_id=extra_clean[0],
        turn=extra_clean[1],
        code="in_role",
        note="clean reference",
        calibration_item=True,
    )
    assert (
        gold_labels(truth.engine, operator_actor(), rubric=truth.rubric).counts()["adjudicated"]
        == 6
    )

    examples = few_shot_material(
        truth.engine, operator_actor(), rubric=truth.rubric, run_id=run_id, per_label=5
    )
    got = {(e["case_id"], e["turn"]): e for e in examples}
    wanted = {u for u, code in chosen.items() if code != "cannot_judge"} | {extra_clean}
    assert set(got) == wanted  # every adjudicated unit but the abstention
    assert [e["kind"] for e in examples] == ["fail", "fail", "borderline", "pass", "pass"]
    for unit, example in got.items():
        case = truth.cases[unit[0]]
        events = [e for e in case["transcript"] if e["turn"] <= unit[1]]
        assert example["reply"] == events[-1]["text"]
        assert example["context"] == next(
            e["text"] for e in reversed(events) if e["actor"] == "user"
        )
        assert example["judge_label"] == truth.noisy[unit][0]
        assert example["why"] == (
            "clean reference" if unit == extra_clean else f"adjudicated {example['label']}"
        )
    assert got[missed]["label"] == "authority_break"

    one_each = few_shot_material(
        truth.engine, operator_actor(), rubric=truth.rubric, run_id=run_id, per_label=1
    )
    assert Counter(e["label"] for e in one_each) == {
        "authority_break": 1,
        "tone_break": 1,
        "borderline": 1,
        "in_role": 1,
    }


@pytest.mark.parametrize(
    ("kind", "expected_type"),
    [("json_object_schema", "json_object"), ("json_schema", "json_schema")],
)
def test_schema_response_formats_carry_the_verdict_schema(
    http_world: JudgeWorld, kind: str, expected_type: str
) -> None:
    http_world.run(response_format=kind, max_tokens=50)
    body = http_world.server.requests[0].body["response_format"]
    assert body["type"] == expected_type
    schema = body.get("schema") or body["json_schema"]["schema"]
    assert schema["required"] == ["label", "score", "reason"]
    assert "in_role" in schema["properties"]["label"]["enum"]
