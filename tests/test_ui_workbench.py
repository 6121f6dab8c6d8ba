"""The judge page's prompt workbench, driven with AppTest on a copy of the demo database
(docs/reference.md, "Prompt workbench"): edit, preview, save as the next version, run on
the gold units as a background job (a worker in the test), compare."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from review_app.services.access.actors import operator_actor
from review_app.services.jobs.runner import list_jobs, run_worker
from review_app.services.judging.endpoints import ENDPOINTS_ENV
from review_app.services.judging.judge_compare import compare_judge_runs
from review_app.services.judging.judge_prompts import list_judge_prompts
from review_app.services.judging.runs import list_judge_runs
from review_app.services.labels.adjudication import gold_labels
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from storage.engine import create_database_engine
from tests.judge_support import REPO, FakeChatServer
from tests.ui_support import app_database, demo_template, plain

APP = REPO / "review_app" / "ui" / "app.py"
RUBRIC = "role-adherence@1"
SECRET = "sk-workbench-never-shown-42"


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_template(tmp_path_factory.mktemp("ui") / "demo.db", local_user="admin")


@pytest.fixture
def fake() -> Iterator[FakeChatServer]:
    server = FakeChatServer(delay=0.0).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def database_url(
    demo_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake: FakeChatServer
) -> Iterator[str]:
    endpoints = tmp_path / "endpoints.toml"
    endpoints.write_text(
        f'[endpoints.fake]\nbase_url = "{fake.base_url}"\nmodel = "fake-model"\n'
        f'api_key = "{SECRET}"\nresponse_format = "json_object"\nconcurrency = 4\n',
        encoding="utf-8",
    )
    monkeypatch.setenv(ENDPOINTS_ENV, str(endpoints))
    with app_database(demo_file, tmp_path, monkeypatch, local_user="admin") as url:
        yield url


def workbench() -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.run()
    at.switch_page("views/judge.py")
    at.run()
    at.segmented_control(key="judge_view").set_value("Prompt workbench").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(at: AppTest) -> list[str]:
    found = [
        plain(str(e.value))
        for kind in ("markdown", "caption", "info", "warning", "error", "subheader", "code")
        for e in getattr(at, kind)
    ]
    for table in at.dataframe:
        found += [str(v) for v in table.value.astype(str).to_numpy().ravel()]
    return found


def test_a_whole_iteration_edit_save_run_compare(database_url: str, fake: FakeChatServer) -> None:
    at = workbench()
    version = at.selectbox(key="workbench_version")
    start = version.value
    assert start == "role-judge@v2"  # the team's judge (the demo's)
    judge = start.split("@")[0]
    assert at.text_area(key="workbench_text").value  # filled with the version's text
    # saving an unchanged text stores nothing
    at.button(key="workbench_save").click().run()
    assert any("change it before saving" in plain(w.value) for w in at.warning)
    # an unknown placeholder is refused, naming the field and the line
    broken = at.text_area(key="workbench_text").value + "\n$nonsense\n"
    at.text_area(key="workbench_text").set_value(broken)
    at.button(key="workbench_save").click().run()
    assert any("Prompt" in e.value and "nonsense" in e.value for e in at.error), [
        e.value for e in at.error
    ]
    # a real edit is saved as the next version, which is then selected
    edited = broken.replace("\n$nonsense\n", "\nJudge refunds strictly.\n")
    at.text_area(key="workbench_text").set_value(edited)
    at.button(key="workbench_save").click().run()
    assert not at.exception
    saved = at.selectbox(key="workbench_version").value
    assert saved != start and saved.startswith(f"{judge}@v")
    assert at.text_area(key="workbench_text").value == edited
    engine = create_database_engine(database_url)
    try:
        rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
        stored = list_judge_prompts(engine, operator_actor(), rubric_id=rubric.id).get(saved)
        assert stored.text == edited and stored.derived_from == start
        assert stored.created_by == "admin"
        # the preview fills the text for the first gold unit
        first_gold = sorted(gold_labels(engine, operator_actor(), rubric=rubric).labels)[0]
        assert any("Judge refunds strictly." in c.value for c in at.code)
        assert any(f"turn {first_gold[1]}" in t for t in texts(at))
        # run on the gold units only: the requests are said first, a job runs them, as
        # the person who started it
        assert at.selectbox(key="workbench_endpoint").value == "fake"
        run_button = next(b for b in at.button if b.key == "workbench_run")
        assert run_button.label == "Run on gold units (84 requests)"
        assert any(t.startswith("84 requests to fake (model fake-model)") for t in texts(at))
        run_button.click().run()
        assert not at.exception, [e.value for e in at.exception]
        [job] = list_jobs(engine, operator_actor())
        assert job.parameters["prompt"] == saved and job.created_by == "admin"
        assert job.parameters["scope"] == "gold" and job.parameters["case_ids"] is None
        assert run_worker(engine, until_idle=True, poll_seconds=0.05) == 1
        assert len(fake.requests) == 84  # the gold units, not every turn of their cases
        at.run()
        shown = texts(at)
        progress = [plain(p.text) for p in at.get("progress")]
        assert any(t.startswith(f"Job {job.id}: ") and ", done, 84 of 84" in t for t in progress)
        # no complete earlier version ran at this endpoint: no pair, and one click to
        # run the baseline (the team's judge) there
        assert any("nothing to compare it with like for like" in t for t in shown), shown
        baseline = next(b for b in at.button if b.key == "workbench_baseline")
        assert plain(baseline.label) == "Run role-judge@v2 on fake"
        baseline.click().run()
        assert run_worker(engine, until_idle=True, poll_seconds=0.05) == 1
        at.run()
        runs = list_judge_runs(engine, operator_actor(), rubric=rubric)
        expected = compare_judge_runs(engine, operator_actor(), rubric=rubric)
    finally:
        engine.dispose()
    shown = texts(at)
    newest = max(runs, key=lambda r: r.id)
    assert newest.prompt == "role-judge@v2" and newest.endpoint == "fake"
    # the default pair: the saved version against the baseline at the same endpoint,
    # with the verdict sentence `judge compare --json` prints
    assert any(plain(m.value) == f"**{expected['verdict']}**" for m in at.markdown)
    v3 = next(r for r in runs if r.prompt == saved and r.endpoint == "fake")
    assert (expected["runs"][0]["id"], expected["runs"][1]["id"]) == (newest.id, v3.id)
    assert at.selectbox(key="workbench_second").value == v3.id
    assert at.selectbox(key="workbench_first").value == newest.id
    assert all(SECRET not in t for t in shown + progress)


def test_without_endpoints_the_page_says_who_sets_them(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENDPOINTS_ENV)
    at = workbench()
    said = [plain(i.value) for i in at.info] + [plain(c.value) for c in at.caption]
    assert any("REVIEW_APP_JUDGE_ENDPOINTS" in t for t in said), said
    offered = (
        at.selectbox(key="workbench_endpoint").options
        if any(b.key == "workbench_run" for b in at.button)
        else []
    )
    assert offered in ([], ["local"])  # the bundled model, when the local-judge extra is in
    assert at.text_area(key="workbench_text").value  # editing needs no endpoint


def test_a_reviewer_gets_no_workbench(database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REVIEW_APP_AUTH", "oidc")
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.user = {"is_logged_in": True, "email": "ana", "name": "Ana"}
    at.run()
    with pytest.raises(ValueError, match="Could not find a navigation page"):
        at.switch_page("views/judge.py")  # not among a reviewer's pages


def test_the_decision_card_runs_the_chosen_prompt_on_every_turn(database_url: str) -> None:
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.run()
    at.switch_page("views/judge.py")
    at.run()
    chosen = at.selectbox(key="judge_run").value  # role-judge@v2/gemma-3-270m-it
    assert at.selectbox(key="judge_everywhere_endpoint").value == "fake"
    at.button(key="judge_everywhere").click().run()
    assert not at.exception, [e.value for e in at.exception]
    engine = create_database_engine(database_url)
    try:
        [job] = list_jobs(engine, operator_actor())
    finally:
        engine.dispose()
    assert job.parameters["prompt"] == chosen.split("/")[0]
    assert job.parameters["case_ids"] is None and job.parameters["endpoint"] == "fake"
    assert job.parameters["scope"] is None  # every turn
    # while it runs, the card shows its progress instead of the button
    assert "judge_everywhere" not in [b.key for b in at.button]
    assert [b.key for b in at.button if b.key == "workbench_stop"] == ["workbench_stop"]
