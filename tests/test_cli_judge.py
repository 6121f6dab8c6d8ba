"""The ``review-app judge`` commands as a user runs them (in-process runner; one test
through the real entry point in its own process).

A demo database (SQLite file) is built once and copied for each test; ``judge run``
talks to the loopback OpenAI-compatible server of tests/judge_support.py.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from review_app.services.access.actors import Actor, operator_actor
from review_app.services.cases.importing import import_paths
from review_app.services.exchange.demo import DEMO_VERDICTS, load_demo
from review_app.services.judging.runs import RunListing, list_judge_runs
from review_app.services.labels.adjudication import record_gold
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from storage.engine import create_database_engine
from storage.migrations.upgrade import upgrade_database
from tests.conftest import DEMO_CASES
from tests.judge_support import CliResult, FakeChatServer, run_review_app, serve

RUBRIC = "role-adherence@1"
VIOLATION = "support-delayed-refund-violation"


def build(path: Path, *, demo: bool) -> Path:
    engine = create_database_engine(f"sqlite:///{path}")
    upgrade_database(engine)
    if demo:
        load_demo(engine, operator_actor(), local_user="admin")
    else:
        import_paths(engine, operator_actor(), [DEMO_CASES])
        sync_rubrics(engine, operator_actor())
    engine.dispose()
    return path


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("databases")
    return {
        "demo": build(root / "demo.db", demo=True),
        "cases": build(root / "cases.db", demo=False),
    }


class Cli:
    def __init__(self, db_path: Path, home: Path) -> None:
        self.db_path = db_path
        self.url = f"sqlite:///{db_path}"
        self.home = home

    def __call__(self, *args: str, subprocess: bool = False) -> CliResult:
        return run_review_app(*args, db=self.url, home=self.home, subprocess=subprocess)

    def runs(self) -> list[RunListing]:
        """The stored runs, read in this process (cheaper than one more command)."""
        engine = create_database_engine(self.url)
        try:
            return list_judge_runs(engine, operator_actor())
        finally:
            engine.dispose()


def cli_on(template: Path, tmp_path: Path) -> Cli:
    db_path = tmp_path / "review.db"
    shutil.copy(template, db_path)
    home = tmp_path / "home"
    home.mkdir()
    return Cli(db_path, home)


@pytest.fixture
def demo_cli(templates: dict[str, Path], tmp_path: Path) -> Cli:
    return cli_on(templates["demo"], tmp_path)


@pytest.fixture
def cases_cli(templates: dict[str, Path], tmp_path: Path) -> Cli:
    return cli_on(templates["cases"], tmp_path)


@pytest.fixture
def server() -> Iterator[FakeChatServer]:
    yield from serve()


def test_judge_import_prints_a_summary_and_refuses_a_bad_file(
    cases_cli: Cli, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.jsonl"
    lines = DEMO_VERDICTS.read_text().splitlines()
    broken = json.loads(lines[2]) | {"label": "rude"}
    bad.write_text("\n".join([*lines[:2], json.dumps(broken), *lines[3:]]) + "\n")
    refused = cases_cli("judge", "import", str(bad), "--rubric", RUBRIC, subprocess=True)
    assert refused.returncode == 2
    assert refused.stdout == ""
    assert refused.stderr.count("\n") == 1
    assert refused.stderr.startswith(f"error: {bad}, line 3, field label: 'rude' is not a code")
    assert "Traceback" not in refused.stderr
    assert cases_cli.runs() == []

    done = cases_cli("judge", "import", str(DEMO_VERDICTS), "--rubric", RUBRIC)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "stored 238 verdicts in 2 runs (role-judge@v1/gemma-3-270m-it: 118, "
        "role-judge@v2/gemma-3-270m-it: 120)"
    )
    assert [run.verdicts for run in cases_cli.runs()] == [118, 120]


def test_judge_runs_as_json(demo_cli: Cli) -> None:
    listed = demo_cli("judge", "runs", "--json", "--rubric", RUBRIC)
    assert listed.returncode == 0, listed.stderr
    runs = json.loads(listed.stdout)
    assert [(r["name"], r["verdicts"], r["errors"]) for r in runs] == [
        ("role-judge@v1/gemma-3-270m-it", 118, 0),
        ("role-judge@v2/gemma-3-270m-it", 120, 0),
    ]
    assert runs[0]["rubric"] == RUBRIC
    assert set(runs[0]) >= {
        "id",
        "judge",
        "prompt_version",
        "model",
        "source",
        "status",
        "prompt_sha256",
        "calibrated",
    }


def test_judge_runs_through_the_entry_point_marks_the_teams_judge(demo_cli: Cli) -> None:
    """The real entry point builds the judge group with ``runs`` alone: the listing, the
    team's judge (read from its table, no rubric file) and the group's help and errors
    are what the whole command line gives."""
    listed = demo_cli("judge", "runs", "--json", subprocess=True)
    assert listed.returncode == 0, listed.stderr
    marked = [(r["name"], r["team_judge"]) for r in json.loads(listed.stdout)]
    assert marked == [
        ("role-judge@v1/gemma-3-270m-it", False),
        ("role-judge@v2/gemma-3-270m-it", True),
    ]
    assert demo_cli("judge", "runs", subprocess=True).stdout.count("[the team's judge]") == 1

    unknown = demo_cli("judge", "rnus", subprocess=True)
    assert unknown.returncode == 2
    assert "No such command 'rnus'" in unknown.stderr
    group_help = demo_cli("judge", "--help", subprocess=True).stdout
    assert all(name in group_help for name in ("runs", "report", "prompts", "estimate"))
    prompts = demo_cli("judge", "prompts", "list", "--rubric", RUBRIC, subprocess=True)
    assert prompts.returncode == 0, prompts.stderr
    assert "role-judge@v2" in prompts.stdout


def test_judge_report_as_json_and_as_text(demo_cli: Cli) -> None:
    result = demo_cli("judge", "report", "--rubric", RUBRIC, "--json", "--resamples", "100")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert set(report) == {
        "rubric",
        "gold",
        "reviewers",
        "runs",
        "versions",
        "carried_units",
        "rubric_versions",
    }
    assert report["rubric"] == RUBRIC
    assert report["carried_units"] == {"labels": 0, "gold_labels": 0}
    assert report["rubric_versions"] is None  # version 1 has no version before it
    assert report["reviewers"] == ["ana", "ben", "chloe"]
    assert report["gold"]["with_gold"] > 0
    assert [run["name"] for run in report["runs"]] == [run.name for run in demo_cli.runs()]
    for run in report["runs"]:
        assert set(run) >= {
            "id",
            "name",
            "verdicts",
            "turn_verdicts",
            "conversation_verdicts",
            "errors",
            "vs_gold",
            "vs_reviewers",
            "alt_test",
            "like_for_like",
            "gold_source",
            "first_break",
            "scores",
            "disagreements",
        }
        assert set(run["vs_reviewers"]) == {"ana", "ben", "chloe"}
        alt = run["alt_test"]
        assert set(alt) >= {
            "epsilon", "q", "winning_rate", "advantage_probability", "passed", "reviewers",
            "skipped",
        }  # fmt: skip
        assert alt["epsilon"] == 0.2 and alt["q"] == 0.05
        assert alt["passed"] == (alt["winning_rate"] >= 0.5)
        for row in alt["reviewers"]:
            assert set(row) == {
                "reviewer", "units", "p_value", "rejected", "advantage_probability",
            }  # fmt: skip
        assert run["vs_gold"]["kappa"]["n"] == report["gold"]["with_gold"]

    text = demo_cli("judge", "report", "--rubric", RUBRIC, "--resamples", "100")
    assert text.returncode == 0, text.stderr
    assert "human level" not in text.stdout
    assert "may the judge replace a reviewer?" in text.stdout
    assert "leaving out one reviewer at a time" in text.stdout
    strict = demo_cli(
        "judge", "report", "--rubric", RUBRIC, "--json", "--resamples", "0", "--epsilon", "0"
    )
    assert strict.returncode == 0, strict.stderr
    assert {run["alt_test"]["epsilon"] for run in json.loads(strict.stdout)["runs"]} == {0.0}
    bad = demo_cli("judge", "report", "--rubric", RUBRIC, "--epsilon", "1.5")
    assert bad.returncode == 2
    assert "--epsilon" in bad.stderr and "[0, 1)" in bad.stderr
    for run in report["runs"]:
        assert f"run {run['id']} {run['name']} (import)" in text.stdout


def test_judge_run_against_a_loopback_endpoint_then_report(
    demo_cli: Cli, server: FakeChatServer
) -> None:
    args = [
        "judge",
        "run",
        "--rubric",
        RUBRIC,
        "--base-url",
        server.base_url,
        "--model",
        "fake",
        "--prompt",
        "role-judge@v1",
        "--case",
        VIOLATION,
    ]
    result = demo_cli(*args)
    assert result.returncode == 0, result.stderr
    units = sorted(turn for _, turn in server.units_requested())
    assert units == [2, 4, 6, 8, 10, 12]
    name = f"role-judge@v1/fake at 127.0.0.1:{server.port}"
    assert result.stdout.startswith(f"run 3 {name}: {len(units)} units, 0 already done")
    assert f"answered {len(units)}, unparseable answers 0, endpoint failures 0" in result.stdout
    assert result.stderr == ""
    fake = next(r for r in demo_cli.runs() if r.model == "fake")
    assert (fake.source, fake.status, fake.verdicts) == ("run", "complete", len(units))
    assert fake.prompt_sha256 is not None and len(fake.prompt_sha256) == 64

    reported = demo_cli("judge", "report", "--rubric", RUBRIC, "--json", "--run", "3")
    assert reported.returncode == 0, reported.stderr
    [run] = json.loads(reported.stdout)["runs"]
    assert (run["name"], run["endpoint"]) == (name, f"127.0.0.1:{server.port}")
    assert run["turn_verdicts"] == len(units)
    # The loopback judge flags the turn with the recorded refund, as gold does.
    assert run["vs_gold"]["break_confusion"]["tp"] == 1
    assert run["first_break"]["n_exact"] == 1

    server.reset_log()
    again = demo_cli(*args)
    assert again.returncode == 0, again.stderr
    assert f"{len(units)} units, {len(units)} already done" in again.stdout
    assert server.requests == []


def test_judge_run_explains_a_missing_model(demo_cli: Cli, server: FakeChatServer) -> None:
    result = demo_cli(
        "judge",
        "run",
        "--rubric",
        RUBRIC,
        "--base-url",
        server.base_url,
        "--prompt",
        "role-judge@v1",
    )
    assert result.returncode == 2
    assert result.stderr == "error: field --model: give --model (or set REVIEW_APP_JUDGE_MODEL)\n"
    assert server.requests == []


def test_judge_calibrate_says_when_there_are_too_few_breaks(demo_cli: Cli) -> None:
    result = demo_cli("judge", "calibrate", "--rubric", RUBRIC, "--run", "1")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert "cannot calibrate run 1" in result.stderr
    assert "needs at least 5 units of each class" in result.stderr
    assert "got 1 break and 83 no-break units" in result.stderr
    assert not any(run.calibrated for run in demo_cli.runs())


def test_judge_few_shot_lists_the_adjudicated_units(demo_cli: Cli) -> None:
    engine = create_database_engine(demo_cli.url)
    rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
    for turn, code, note in (
        (8, "authority_break", "Refund by triage."),
        (4, "in_role", "Looks up."),
    ):
        record_gold(
            engine,
            Actor.operator(),
            rubric=rubric,
            case_id=VIOLATION,
            turn=turn,
            code=code,
            note=note,
        )
    engine.dispose()
    result = demo_cli("judge", "few-shot", "--rubric", RUBRIC, "--run", "1")
    assert result.returncode == 0, result.stderr
    examples = json.loads(result.stdout)
    assert [(e["case_id"], e["turn"], e["label"], e["kind"], e["why"]) for e in examples] == [
        (VIOLATION, 8, "authority_break", "fail", "Refund by triage."),
        (VIOLATION, 4, "in_role", "pass", "Looks up."),
    ]
    assert "issued a full refund" in examples[0]["reply"]
    assert examples[0]["context"].startswith("3-5 days AFTER approval?")


def test_judge_estimate_and_an_audit_sample(demo_cli: Cli) -> None:
    fallback = demo_cli("judge", "estimate", "--rubric", RUBRIC, "--run", "2", "--json")
    assert fallback.returncode == 0, fallback.stderr
    estimate = json.loads(fallback.stdout)
    assert set(estimate) >= {"level", "n_gold", "n_judged", "judge_only", "human_only", "ppi"}
    assert estimate["level"] == "turn"
    assert estimate["gold_source"].startswith("adjudicated and unanimous gold")
    drawn = demo_cli(
        "assign", "--rubric", RUBRIC, "--reviewers", "ana,ben", "--audit-sample", "40",
        "--seed", "3",
    )  # fmt: skip
    assert drawn.returncode == 0, drawn.stderr
    assert drawn.stdout.startswith("audit sample 1: drew 40 of 111 turns uniformly at random")
    audited = demo_cli("judge", "estimate", "--rubric", RUBRIC, "--run", "2", "--json")
    assert json.loads(audited.stdout)["gold_source"] == "audit sample"
    text = demo_cli("judge", "estimate", "--rubric", RUBRIC, "--run", "2")
    assert text.stdout.startswith("turn break rate ")
    assert "judge alone would say" in text.stdout.splitlines()[0]
    bad = demo_cli("judge", "estimate", "--rubric", RUBRIC, "--run", "2", "--level", "case")
    assert bad.returncode == 2 and "--level" in bad.stderr
    too_many = demo_cli(
        "assign", "--rubric", RUBRIC, "--reviewers", "ana", "--audit-sample", "1000"
    )
    assert too_many.returncode == 2 and "--audit-sample" in too_many.stderr
