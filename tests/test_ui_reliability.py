"""Reviewer reliability and agreement over time (agreement and team pages), the break rate by
stratum (judge page) and audits placed by stratum (team page), with AppTest on the demo."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, select
from sqlmodel import Session
from streamlit.testing.v1 import AppTest

from review_app.services.access.actors import operator_actor
from review_app.services.judging.runs import list_judge_runs
from review_app.services.judging.strata import stratified_estimate
from review_app.services.judging.stratified_audit import allocation_plan
from review_app.services.labels.adjudication import record_gold
from review_app.services.review.reliability import agreement_over_time_report, reliability_report
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from storage.engine import create_database_engine
from storage.labels import current_label_columns
from storage.models import AuditSample, AuditUnit
from tests.conftest import REPO
from tests.test_ui_agreement import charts
from tests.ui_support import app_database, demo_template, plain

APP = REPO / "review_app" / "ui" / "app.py"
RUBRIC = "role-adherence@1"
ADMIN = "root"


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_template(tmp_path_factory.mktemp("reliability") / "ui.db", local_user=ADMIN)


@pytest.fixture
def engine(demo_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Engine]:
    with app_database(demo_file, tmp_path, monkeypatch, local_user=ADMIN) as url:
        engine = create_database_engine(url)
        yield engine
        engine.dispose()


def open_page(page: str) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=90)
    at.run()
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def table(at: AppTest, column: str) -> list[dict]:
    """The rows of the one table with ``column``."""
    (found,) = [frame.value for frame in at.dataframe if column in frame.value.columns]
    return found.to_dict("records")


def rubric_of(engine: Engine):
    return sync_rubrics(engine, operator_actor()).get(RUBRIC)


def test_the_agreement_page_says_whom_to_trust_and_how_agreement_moves(engine: Engine) -> None:
    at = open_page("views/agreement.py")
    report = reliability_report(engine, operator_actor(), rubric=rubric_of(engine), n_resamples=200)
    rows = table(at, "below the others")
    assert [row["reviewer"] for row in rows] == [r["name"] for r in report["reviewers"]]
    for row, reviewer in zip(rows, report["reviewers"], strict=True):
        assert row["accuracy"] == f"{reviewer['accuracy']:.2f}"
        assert row["95% interval"] == f"[{reviewer['ci95'][0]:.2f}, {reviewer['ci95'][1]:.2f}]"
    shown = [plain(m.value) for m in at.markdown]
    assert report["sentence"] in shown
    assert all(r["sentence"] in shown for r in report["reviewers"])
    over_time = agreement_over_time_report(engine, operator_actor(), rubric=rubric_of(engine))
    assert over_time["sentences"][0] in shown
    assert any(over_time["sentences"][1] == plain(x.value) for x in [*at.markdown, *at.warning])
    assert at.selectbox(key="agreement_reliability_reviewer").options == [
        r["name"] for r in report["reviewers"]
    ]


def test_the_judge_page_shows_the_break_rate_by_stratum(engine: Engine) -> None:
    at = open_page("views/judge.py")
    run_id = max(
        run.id for run in list_judge_runs(engine, operator_actor(), rubric=rubric_of(engine))
    )
    for by in ("position", "lane"):
        at.segmented_control(key="strata_by").set_value(by).run()
        assert not at.exception, [e.value for e in at.exception]
        block = stratified_estimate(
            engine, operator_actor(), rubric=rubric_of(engine), run_id=run_id, by=by,
            n_resamples=300,
        )  # fmt: skip
        rows = table(at, "judge vs gold")
        assert [row["stratum"] for row in rows] == [s["stratum"] for s in block["strata"]]
        assert [row["with gold"] for row in rows] == [s["n_gold"] for s in block["strata"]]
        texts = [plain(x.value) for x in [*at.caption, *at.warning]]
        assert all(sentence in texts for sentence in block["sentences"])


def test_the_team_page_plans_audits_by_stratum_then_draws_them(engine: Engine) -> None:
    at = open_page("views/team.py")
    assert table(at, "below the others")
    rubric = rubric_of(engine)
    run_id = max(run.id for run in list_judge_runs(engine, operator_actor(), rubric=rubric))
    assert at.selectbox(key="team_strata_run").value is None  # no run chosen for anyone
    assert not [f for f in at.dataframe if "to draw" in f.value.columns]
    at.selectbox(key="team_strata_run").set_value(run_id)
    at.selectbox(key="team_strata_by").set_value("lane")
    at.number_input(key="team_strata_size").set_value(30).run()
    assert not at.exception, [e.value for e in at.exception]
    plan = allocation_plan(engine, operator_actor(), rubric=rubric, run_id=run_id, by="lane",
                           size=30)  # fmt: skip
    rows = table(at, "to draw")
    assert [(r["stratum"], r["to draw"]) for r in rows] == [
        (s["stratum"], s["allocated"]) for s in plan.strata
    ]
    assert plain(plan.budget_line()) in [plain(m.value) for m in at.markdown]
    with Session(engine) as session:
        assert session.scalars(select(AuditSample)).first() is None  # nothing drawn yet
    at.multiselect(key="team_strata_reviewers").set_value(["ana", "ben"])
    at.button(key="team_strata").click().run()
    assert not at.exception, [e.value for e in at.exception]
    with Session(engine) as session:
        sample = session.scalars(select(AuditSample)).one()
        units = session.scalars(select(AuditUnit)).all()
    assert (sample.design, sample.stratified_by, sample.run_id) == ("stratified", "lane", run_id)
    assert len(units) == 30 and all(u.stratum and u.probability for u in units)
    assert any(f"audit sample {sample.id}: drew 30 of" in plain(s.value) for s in at.success)


def test_each_reviewers_agreement_with_gold_is_drawn_per_period(engine: Engine) -> None:
    rubric = rubric_of(engine)
    with Session(engine) as session:
        columns = current_label_columns(session, rubric_id=rubric.id, version=rubric.version)
    votes: dict[tuple[str, int], Counter[str]] = {}
    for case_id, turn, code in zip(columns.case_ids, columns.turns, columns.codes, strict=True):
        votes.setdefault((case_id, turn), Counter())[code] += 1
    for (case_id, turn), counted in sorted(votes.items()):
        record_gold(engine, operator_actor(), rubric=rubric, case_id=case_id, turn=turn,
                    code=counted.most_common(1)[0][0])  # fmt: skip
    at = open_page("views/agreement.py")
    report = agreement_over_time_report(engine, operator_actor(), rubric=rubric)
    want = sorted(
        (p["period"], r["name"], round(r["value"], 6))
        for p in report["periods"]
        for r in p["reviewers"]
        if r["n"] >= 10
    )
    assert want
    drawn = [rows for spec, rows in charts(at) if "agreement with gold" in json.dumps(spec)]
    (rows,) = drawn
    assert sorted((r["period"], r["reviewer"], round(r["agreement"], 6)) for r in rows) == want
