"""What pages and commands pick by themselves compares like with like (issue 33), on
SQLite and PostgreSQL: each default rule of
:mod:`review_app.services.judging.run_defaults` as its users meet it (``judge compare``
without ``--runs``, the workbench's comparison, the judge page's run, the adjudicate
page's judge column, drift, route, estimate), the team's judge, a run's identity and
state, and Run on gold units asking the gold units only.

Runs are stored as the runner and the import store them (judge, prompt version, model,
endpoint, status, verdicts), except where the runner itself is under test (a real run
against the loopback server of tests/judge_support.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import Session

import storage.judging
from review_app.errors import InputError
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import operator_actor
from review_app.services.cases.importing import import_paths
from review_app.services.jobs.runner import list_jobs, run_worker
from review_app.services.judging.drift import drift_report
from review_app.services.judging.endpoints import ENDPOINTS_ENV
from review_app.services.judging.judge_compare import compare_judge_runs
from review_app.services.judging.judge_report import calibration_report
from review_app.services.judging.prompt_workbench import (
    compare_for_workbench,
    plan_run,
    run_on_gold_units,
)
from review_app.services.judging.run_defaults import (
    choose_team_judge,
    run_choices,
    run_or_default,
    team_judge,
)
from review_app.services.judging.runs import list_judge_runs
from review_app.services.judging.unit_with_judge import unit_detail_with_judge
from review_app.services.labels.adjudication import record_gold
from review_app.services.operations.audit import audit_entries
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from tests.conftest import Database
from tests.judge_support import FakeChatServer, Reply, run_review_app, support_case, write_jsonl

OP = operator_actor()
RUBRIC = "role-adherence@1"
N_CASES = 14  # 3 assistant turns each (2, 4, 6): 42 units
UNITS = [(f"c{i:02d}", turn) for i in range(N_CASES) for turn in (2, 4, 6)]
GOLD = {u: ("authority_break" if k % 3 == 0 else "in_role") for k, u in enumerate(UNITS)}


@dataclass
class World:
    engine: Engine
    rubric: Rubric
    url: str

    def run(
        self,
        prompt_version: str,
        *,
        model: str = "m",
        endpoint: str = "loop",
        status: str = "complete",
        right: float = 1.0,
        units: list[tuple[str, int]] | None = None,
        judge: str = "role-judge",
    ) -> int:
        """A stored run answering gold on the first ``right`` share of ``units`` (all by
        default) and ``in_role`` on the rest."""
        chosen = UNITS if units is None else units
        cut = round(right * len(chosen))
        rows = [
            (case_id, turn, GOLD[(case_id, turn)] if k < cut else "in_role", 0.5, "why",
             None, None, 5, 10, 2)
            for k, (case_id, turn) in enumerate(chosen)
        ]  # fmt: skip
        summary = {"last": {"units": len(UNITS), "skipped": 0, "answered": len(rows),
                            "answer_errors": 0, "endpoint_errors": 0}}  # fmt: skip
        with Session(self.engine) as session:
            run = storage.judging.create_run(
                session,
                judge=judge,
                prompt_version=prompt_version,
                model=model,
                endpoint=endpoint,
                rubric_id=self.rubric.id,
                rubric_version=self.rubric.version,
                source="run",
                status=status,
                summary_json=json.dumps(summary),
            )
            assert run.id is not None
            storage.judging.replace_verdicts(
                session, run_id=run.id, rows=rows, now=datetime.now(UTC)
            )
            session.commit()
            return run.id


def make_world(database: Database, tmp_path: Path, gold: list[tuple[str, int]]) -> World:
    cases = [support_case(f"c{i:02d}", assistant_turns=3, refund_at=None) for i in range(N_CASES)]
    import_paths(database.engine, OP, [write_jsonl(tmp_path / "cases.jsonl", cases)])
    rubric = sync_rubrics(database.engine, OP).get(RUBRIC)
    for case_id, turn in gold:
        record_gold(
            database.engine, OP, rubric=rubric, case_id=case_id, turn=turn,
            code=GOLD[(case_id, turn)],
        )  # fmt: skip
    return World(database.engine, rubric, database.url)


@pytest.fixture
def world(database: Database, tmp_path: Path) -> World:
    """Gold on every assistant turn."""
    return make_world(database, tmp_path, UNITS)


@pytest.fixture
def audited(database: Database, tmp_path: Path) -> World:
    """Gold on one turn of each conversation (as an audit of single turns leaves it)."""
    return make_world(database, tmp_path, [(case_id, 4) for case_id, _ in UNITS[::3]])


def listing(world: World, run_id: int) -> Any:
    return next(r for r in list_judge_runs(world.engine, OP, rubric=world.rubric) if r.id == run_id)


# --- a run's identity and state --------------------------------------------------------------


def test_a_run_is_named_by_its_prompt_model_endpoint_rubric_and_state(world: World) -> None:
    done = world.run("v2", endpoint="loop")
    stopped = world.run("v3", endpoint="loop", status="partial", units=UNITS[:6])
    failed = world.run("v4", endpoint="loop", status="failed", units=[])
    assert listing(world, done).label == (
        "role-judge@v2 · model m at loop · role-adherence@1 · complete, 42 turns"
    )
    assert listing(world, done).name == "role-judge@v2/m at loop"
    assert listing(world, stopped).state_text == "stopped at 6 of 42 turns"
    assert listing(world, stopped).picker_label.endswith(" · stopped")
    assert listing(world, failed).state == "failed"
    # the same prompt and model at another endpoint is another run
    elsewhere = world.run("v2", endpoint="other")
    assert elsewhere != done and listing(world, elsewhere).name == "role-judge@v2/m at other"


# --- the team's judge and the default run ----------------------------------------------------


def test_the_default_run_is_the_teams_judge_else_the_newest_complete_never_a_stopped_one(
    world: World,
) -> None:
    older = world.run("v1")
    newer = world.run("v2")
    world.run("v3", status="partial", units=UNITS[:5])  # the newest, but stopped
    world.run("v4", status="failed", units=[])
    choices = run_choices(world.engine, OP, rubric=world.rubric)
    assert choices.team is None and choices.default is not None
    assert choices.default.id == newer
    assert choices.why == "the newest complete run (no team's judge is chosen)"
    assert run_or_default(world.engine, OP, rubric=world.rubric, run_id=None).id == newer
    # the team's judge is the default, though older; its choice is audited
    chosen = choose_team_judge(world.engine, OP, rubric=world.rubric, run_id=older)
    assert chosen.prompt == "role-judge@v1" and chosen.endpoint == "loop"
    choices = run_choices(world.engine, OP, rubric=world.rubric)
    assert (choices.default.id, choices.why) == (older, "the team's judge")
    [entry] = audit_entries(world.engine, OP, action="team_judge")
    assert entry.summary == {"before": None, "after": older, "run": "role-judge@v1/m at loop"}
    # a stopped run cannot be made the team's judge
    stopped = next(r.id for r in choices.runs if r.state == "stopped")
    with pytest.raises(InputError, match="only a complete run may be the team's judge"):
        choose_team_judge(world.engine, OP, rubric=world.rubric, run_id=stopped)
    assert team_judge(world.engine, OP, rubric=world.rubric).run_id == older  # type: ignore[union-attr]


def test_no_complete_run_means_no_default(world: World) -> None:
    world.run("v1", status="partial", units=UNITS[:3])
    assert run_choices(world.engine, OP, rubric=world.rubric).default is None
    with pytest.raises(InputError, match="no complete judge run to use by default") as caught:
        run_or_default(world.engine, OP, rubric=world.rubric, run_id=None)
    assert caught.value.field == "--run"


# --- comparisons ----------------------------------------------------------------------------


def test_judge_compare_pairs_the_same_model_and_endpoint_earlier_prompt_first(
    world: World,
) -> None:
    v2_here = world.run("v2", right=0.3)
    world.run("v2", model="other-model", endpoint="elsewhere", right=0.95)  # the demo's kind
    v3_here = world.run("v3", right=1.0)
    world.run("v4", status="partial", units=UNITS[:6])  # newer still, stopped
    report = compare_judge_runs(world.engine, OP, rubric=world.rubric, n_resamples=200)
    assert [r["id"] for r in report["runs"]] == [v2_here, v3_here]
    assert (report["first"], report["second"]) == ("v2", "v3")
    assert report["confound"] is None
    assert report["pairing"].startswith("default: role-judge@v3 against role-judge@v2")
    assert report["verdict"].startswith("v3 agrees with gold better than v2: kappa +")
    # a baseline run after the new version is still the earlier one
    later_baseline = world.run("v1", right=0.1)
    again = compare_judge_runs(world.engine, OP, rubric=world.rubric, n_resamples=50)
    assert [r["id"] for r in again["runs"]] == [v2_here, v3_here]
    assert later_baseline not in [r["id"] for r in again["runs"]]


def test_with_no_comparable_baseline_the_command_says_which_to_run(world: World) -> None:
    world.run("v1", model="other-model", endpoint="elsewhere")
    world.run("v2", endpoint="loop")
    with pytest.raises(InputError) as caught:
        compare_judge_runs(world.engine, OP, rubric=world.rubric, n_resamples=0)
    message = str(caught.value)
    assert "no complete run of an earlier prompt version has model m at loop" in message
    assert "run role-judge@v1 there first" in message
    assert caught.value.field == "--runs"


def test_a_hand_chosen_pair_names_its_confound(world: World) -> None:
    here = world.run("v2", endpoint="loop")
    other_model = world.run("v3", model="big", endpoint="cloud")
    stopped = world.run("v4", status="partial", units=UNITS[:36])
    report = compare_judge_runs(
        world.engine, OP, rubric=world.rubric, run_ids=(here, other_model), n_resamples=0
    )
    assert report["pairing"] == "chosen"
    assert report["confound"] == (
        "These runs differ in more than the prompt, also in the model (m against big) and "
        "the endpoint (loop against cloud): a difference between them may come from that, "
        "not from the prompt."
    )
    named = compare_judge_runs(
        world.engine, OP, rubric=world.rubric, run_ids=(here, stopped), n_resamples=0
    )
    assert named["confound"] == (
        "role-judge@v4 was stopped at 36 of 42 turns, so they are compared on the units both "
        "judged."
    )
    assert named["runs"][1]["state"] == "stopped"


def test_the_workbench_compares_the_chosen_versions_complete_run_or_says_why_not(
    world: World,
) -> None:
    v2 = world.run("v2", right=0.4)
    v3 = world.run("v3", right=1.0)
    world.run("v4", status="partial", units=UNITS[:6])
    shown = compare_for_workbench(
        world.engine, OP, rubric=world.rubric, prompt="role-judge@v3", endpoint="loop"
    )
    assert shown.report is not None and shown.note is None
    assert [r["id"] for r in shown.report["runs"]] == [v2, v3]
    # the version being worked on has only a stopped run: the newest complete pair, said
    stopped = compare_for_workbench(
        world.engine, OP, rubric=world.rubric, prompt="role-judge@v4", endpoint="loop"
    )
    assert stopped.note == (
        "role-judge@v4 has no complete run yet (model m at loop: stopped at 6 of 42 turns): "
        "the newest complete run is shown, role-judge@v3"
    )
    assert stopped.report is not None
    assert [r["id"] for r in stopped.report["runs"]] == [v2, v3]
    assert stopped.report["verdict"] == shown.report["verdict"]


def test_judge_compare_json_carries_the_workbenchs_verdict(world: World, tmp_path: Path) -> None:
    world.run("v2", right=0.3)
    world.run("v3", right=1.0)
    shown = compare_for_workbench(
        world.engine, OP, rubric=world.rubric, prompt="role-judge@v3", endpoint="loop"
    )
    assert shown.report is not None
    done = run_review_app(
        "judge", "compare", "--rubric", RUBRIC, "--json", db=world.url, home=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["verdict"] == shown.report["verdict"]
    text = run_review_app("judge", "compare", "--rubric", RUBRIC, db=world.url, home=tmp_path)
    assert text.stdout.splitlines()[0] == shown.report["verdict"]


# --- the pages' other defaults: side by side, adjudicate, drift, estimate, route ----------------


def test_the_side_by_side_table_and_drift_leave_a_stopped_run_out(world: World) -> None:
    world.run("v1")
    world.run("v2")
    stopped = world.run("v3", status="partial", units=UNITS[:3])
    report = calibration_report(world.engine, OP, rubric=world.rubric, n_resamples=0)
    assert report["versions"]["versions"] == ["role-judge@v1/m at loop", "role-judge@v2/m at loop"]
    assert report["versions"]["n_shared"] == 42  # not the 3 the stopped run judged
    assert {r["status"] for r in report["runs"]} == {"complete", "partial"}
    drift = drift_report(world.engine, OP, rubric=world.rubric, n_resamples=0)
    assert [s["name"] for s in drift["sources"]] == [
        "gold",
        "role-judge@v1/m at loop",
        "role-judge@v2/m at loop",
    ]
    # named, it is drawn, and says what it is
    asked = drift_report(world.engine, OP, rubric=world.rubric, run_id=stopped, n_resamples=0)
    assert asked["sources"][1]["status"] == "partial"
    assert all(
        len(s["by_position"]) == len(drift["sources"][0]["by_position"]) for s in asked["sources"]
    )


def test_the_adjudicate_judge_column_is_one_complete_run_for_every_unit(world: World) -> None:
    everywhere = world.run("v1", units=UNITS)
    some = world.run("v2", units=UNITS[:3])
    world.run("v3", status="partial", units=UNITS)  # stopped, newest: never the column
    choose_team_judge(world.engine, OP, rubric=world.rubric, run_id=some)
    seen = {
        unit: unit_detail_with_judge(
            world.engine, OP, rubric=world.rubric, case_id=unit[0], turn=unit[1]
        ).judge
        for unit in (UNITS[0], UNITS[5])
    }
    assert {judge.run_id for judge in seen.values() if judge} == {some}
    assert seen[UNITS[0]].verdict is not None  # type: ignore[union-attr]
    assert seen[UNITS[5]].verdict is None  # the team's judge did not judge it: said, not borrowed
    assert seen[UNITS[0]].why == "the team's judge"  # type: ignore[union-attr]
    assert everywhere not in {judge.run_id for judge in seen.values() if judge}


def test_estimate_and_route_commands_default_to_the_teams_judge(
    world: World, tmp_path: Path
) -> None:
    team = world.run("v1", right=0.9)
    world.run("v2", right=1.0)
    world.run("v3", status="partial", units=UNITS[:3])
    choose_team_judge(world.engine, OP, rubric=world.rubric, run_id=team)
    estimated = run_review_app(
        "judge", "estimate", "--rubric", RUBRIC, "--json", db=world.url, home=tmp_path
    )
    assert estimated.returncode == 0, estimated.stderr
    assert json.loads(estimated.stdout)["run"]["id"] == team
    routed = run_review_app(
        "judge", "route", "--rubric", RUBRIC, "--alpha", "0.2", "--delta", "0.1", "--json",
        db=world.url, home=tmp_path,
    )  # fmt: skip
    assert routed.returncode == 0, routed.stderr
    assert [r["run"] for r in json.loads(routed.stdout)["runs"]] == [team]
    used = run_review_app(
        "judge", "use", "--rubric", RUBRIC, "--run", "999", db=world.url, home=tmp_path
    )
    assert used.returncode == 2 and "999" in used.stderr


# --- Run on gold units: the gold units only, counted first; a failed run's status -----------------


@pytest.fixture
def loopback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeChatServer]:
    server = FakeChatServer(delay=0.0).start()
    path = tmp_path / "endpoints.toml"
    path.write_text(
        f'[endpoints.loop]\nbase_url = "{server.base_url}"\nmodel = "m"\nconcurrency = 2\n',
        encoding="utf-8",
    )
    monkeypatch.setenv(ENDPOINTS_ENV, str(path))
    try:
        yield server
    finally:
        server.stop()


def test_run_on_gold_units_asks_the_gold_units_only_and_says_how_many_first(
    audited: World, loopback: FakeChatServer
) -> None:
    world = audited
    gold = [(case_id, 4) for case_id, _ in UNITS[::3]]
    plan = plan_run(
        world.engine, OP, rubric=world.rubric, prompt="role-judge@v1", endpoint="loop",
        scope="gold",
    )  # fmt: skip
    assert (plan.units, plan.answered, plan.requests) == (14, 0, 14)
    assert plan.sentence() == (
        "14 requests to loop (model m): the gold units, 14 turns, none answered yet."
    )
    run_on_gold_units(
        world.engine, OP, rubric=world.rubric, prompt="role-judge@v1", endpoint="loop"
    )
    assert run_worker(world.engine, until_idle=True, poll_seconds=0.05) == 1
    # 14 requests for 14 gold units, not 42 for every turn of their conversations; each
    # prompt still shows its conversation up to the judged turn
    assert sorted(loopback.units_requested()) == sorted(gold)
    assert all(
        "[turn 3] user" in r.prompt and "[turn 5]" not in r.prompt for r in loopback.requests
    )
    again = plan_run(
        world.engine, OP, rubric=world.rubric, prompt="role-judge@v1", endpoint="loop",
        scope="gold",
    )  # fmt: skip
    assert again.requests == 0 and again.tokens_per_request is not None
    everywhere = plan_run(
        world.engine, OP, rubric=world.rubric, prompt="role-judge@v1", endpoint="loop",
        scope="all",
    )  # fmt: skip
    assert (everywhere.units, everywhere.answered, everywhere.requests) == (42, 14, 28)
    assert "about " in everywhere.sentence() and " tokens a request" in everywhere.sentence()
    [job] = list_jobs(world.engine, OP)
    assert (job.status, job.parameters["scope"], job.failures) == ("done", "gold", None)
    [run] = list_judge_runs(world.engine, OP, rubric=world.rubric)
    assert run.summary is not None and run.summary["last"]["scope"] == "the gold units"


def test_every_request_failing_fails_the_job_and_the_run_with_the_first_error(
    world: World, loopback: FakeChatServer
) -> None:
    loopback.down_status = 400
    run_on_gold_units(
        world.engine, OP, rubric=world.rubric, prompt="role-judge@v1", endpoint="loop"
    )
    assert run_worker(world.engine, until_idle=True, poll_seconds=0.05) == 1
    [job] = list_jobs(world.engine, OP)
    assert job.status == "failed"
    assert job.error is not None and job.error.startswith(
        "every request failed at the endpoint; the first: HTTP 400"
    )
    [run] = list_judge_runs(world.engine, OP, rubric=world.rubric)
    assert run.state == "failed" and run.state_text.startswith("failed: HTTP 400")
    assert "error: every request failed" in job.line()
    # some failing: done, with "k of n failed" wherever the job and the run are shown
    loopback.down_status = None
    loopback.always[("c00", 2)] = Reply(400, raw=b"{}")
    run_on_gold_units(
        world.engine, OP, rubric=world.rubric, prompt="role-judge@v1", endpoint="loop"
    )
    assert run_worker(world.engine, until_idle=True, poll_seconds=0.05) == 1
    latest = list_jobs(world.engine, OP)[0]
    assert (latest.status, latest.failures) == ("done", "1 of 42 failed at the endpoint")
    assert "1 of 42 failed at the endpoint" in latest.line()
    [run] = list_judge_runs(world.engine, OP, rubric=world.rubric)
    assert run.state == "complete"
    assert run.state_text.endswith("; 1 failed at the endpoint (running it again asks them)")


def test_the_migration_names_existing_runs_endpoints(database: Database) -> None:
    """Runs stored before migration 0018 get the host:port of the URL they recorded;
    imported ones none; downgrading and upgrading again keeps them."""
    from alembic import command
    from sqlalchemy import text

    from storage.migrations.upgrade import alembic_config, upgrade_database

    config = alembic_config()
    with database.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0018-1")  # the revision before 0018, whatever it is
    with database.engine.begin() as connection:
        for judge, source, params in (
            ("asked", "run", '{"base_url": "http://user:pw@10.0.0.5:8080/v1"}'),
            ("imported", "import", None),
        ):
            connection.execute(
                text(
                    "INSERT INTO judge_runs (judge, prompt_version, model, rubric_id, "
                    "rubric_version, source, status, params_json, created_at, updated_at) "
                    "VALUES (:judge, 'v1', 'm', 'role-adherence', 1, :source, 'complete', "
                    ":params, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
                ),
                {"judge": judge, "source": source, "params": params},
            )
    upgrade_database(database.engine)
    with database.engine.connect() as connection:
        rows = dict(connection.execute(text("SELECT judge, endpoint FROM judge_runs")).all())
    assert rows == {"asked": "10.0.0.5:8080", "imported": ""}
