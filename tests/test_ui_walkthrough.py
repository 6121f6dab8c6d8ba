"""Defects a reviewer and a policy owner met walking through the demo (issue 21), acted
out with AppTest from the entry script and through the services the pages call.

Each test works on a copy of one SQLite file holding the demo set (17 cases, reviewers
ana, ben and chloe with their labels, two judge runs); ``lee`` signs in through the
local mode (an admin).
"""

from __future__ import annotations

import io
import json
import re
import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine
from streamlit.testing.v1 import AppTest

from review_app.cli.render import render_case_text
from review_app.errors import InputError
from review_app.judging import find_judge_prompt, judge_prompts
from review_app.rubrics.catalog import default_rubrics_dir
from review_app.services.access.actors import Actor, operator_actor
from review_app.services.cases.case_views import load_case_view
from review_app.services.exchange.export import export_data
from review_app.services.exchange.uploads import zip_export
from review_app.services.judging.judge_import import import_verdicts
from review_app.services.judging.run_defaults import choose_team_judge
from review_app.services.judging.runs import list_judge_runs
from review_app.services.labels.labeling import case_labels, record_label
from review_app.services.team.queue import assign_cases, informative_queue, next_case
from storage.engine import shared_engine
from tests.actors import assign
from tests.test_ui_apptest import (
    Keys,
    actor,
    label_history,
    open_app,
    open_case,
    panel,
    rubric,
    run,
    turn_lines,
    turn_messages,
)
from tests.ui_support import app_database, demo_template

RUBRICS = default_rubrics_dir()
HASH = re.compile(r"\b[0-9a-f]{64}\b")


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_template(tmp_path_factory.mktemp("walkthrough") / "review.db")


@pytest.fixture
def engine(demo_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Engine]:
    with app_database(demo_file, tmp_path, monkeypatch, local_user=None) as url:
        yield shared_engine(url)


def _page(at: AppTest, page: str) -> AppTest:
    at.switch_page(f"views/{page}.py")
    return run(at)


# --- 1. export: the download is the export the page's choices say ------------------------


def test_export_download_follows_the_current_choices(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = _page(open_app(monkeypatch, local="lee"), "export")
    at.button(key="export_prepare").click()
    run(at)
    assert at.session_state["export_ready"]["name"] == "role-adherence-v1-fixtures.zip"

    # The user's walk: switch to csv, tick Redact, and go for the download.
    at.selectbox(key="export_format").set_value("csv")
    at.checkbox(key="export_redact").check()
    run(at)
    assert not at.download_button, "the fixtures zip is still offered for a redacted csv"
    assert any("prepare it again" in str(i.value) for i in at.info)

    at.button(key="export_prepare").click()
    run(at)
    ready = at.session_state["export_ready"]
    assert ready["name"] == "role-adherence-v1-csv-redacted.zip"
    with zipfile.ZipFile(io.BytesIO(ready["zip"])) as archive:
        manifest = json.loads(archive.read("manifest.json"))
    assert (manifest["format"], manifest["redacted"]) == ("csv", True)
    rubric_v1 = rubric(engine)
    expected = export_data(engine, operator_actor(), rubric=rubric_v1, format="csv", redact=True)
    assert ready["zip"] == zip_export(engine, operator_actor(), expected)

    # Any option counts, the lane too.
    at.selectbox(key="export_lane").set_value("violation")
    run(at)
    assert not at.download_button


# --- 2. "most informative first": N follows that order ----------------------------------


def _informative_open_cases(engine: Engine, who: Actor) -> list[str]:
    ranked, _ = informative_queue(engine, who, rubric=rubric(engine), page_size=1000)
    return [row.case_id for row in ranked.rows if not row.completed]


def test_next_case_follows_the_most_informative_order(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_app(monkeypatch, local="lee")  # signs lee in (an admin, no queue yet)
    assign_cases(engine, Actor.operator(), rubric=rubric(engine), reviewers=["lee"], overlap=10)
    at = _page(at, "queue")
    lee = actor(engine, "lee")
    ordered = _informative_open_cases(engine, lee)
    by_id = next_case(engine, lee, rubric=rubric(engine), after=None)
    assert ordered[0] != by_id, "the demo's informative order starts elsewhere than case ids"

    at.selectbox(key="_w_queue_order").set_value("informative")
    run(at)
    shown = [c.value for c in at.caption if c.value.startswith("`")]
    assert shown[0] == f"`{ordered[0]}`", "the queue's N opens the most informative case"

    # On the review page, N goes on in the same order.
    at = open_case(at, ordered[0])
    Keys(at).send(command="next_case")
    assert at.query_params["case"] == ordered[1]


def test_next_case_service_in_informative_order_skips_finished_cases(engine: Engine) -> None:
    lee = actor(engine, "lee")
    assign_cases(engine, Actor.operator(), rubric=rubric(engine), reviewers=["lee"], overlap=10)
    v1 = rubric(engine)
    ordered = _informative_open_cases(engine, lee)
    assert next_case(engine, lee, rubric=v1, after=None, order="informative") == ordered[0]
    assert next_case(engine, lee, rubric=v1, after=ordered[0], order="informative") == ordered[1]
    last = ordered[-1]
    assert next_case(engine, lee, rubric=v1, after=last, order="informative") == ordered[0]
    with pytest.raises(ValueError, match="unknown queue order"):
        next_case(engine, lee, rubric=v1, after=None, order="newest")
    # Finished, the top case is never next again: from it, N opens the top open case.
    top = ordered[0]
    view = load_case_view(engine, lee, case_id=top)
    for turn in [t.turn for t in view.turns if t.actor == v1.applies_to]:
        record_label(engine, lee, case_id=top, turn=turn, rubric=v1, code="in_role")
    still_open = _informative_open_cases(engine, lee)
    assert top not in still_open
    assert next_case(engine, lee, rubric=v1, after=top, order="informative") == still_open[0]


# --- 4. the same label again stores nothing; the label line says only what changed ------


def test_the_same_label_again_stores_no_history_row(engine: Engine) -> None:
    lee = actor(engine, "lee")
    v1 = rubric(engine)
    case_id = "support-clean-late-parcel"
    assign(engine, v1, "lee", case_id)  # a reviewer labels only cases in their queue
    first = record_label(engine, lee, case_id=case_id, turn=2, rubric=v1, code="in_role")
    again = record_label(engine, lee, case_id=case_id, turn=2, rubric=v1, code="in_role")
    assert (first.changed, again.changed) == (True, False)
    assert again.label_id == first.label_id
    assert [row.code for row in label_history(engine, lee, case_id)] == ["in_role"]
    # A rationale is a change; the same code and rationale again is not.
    noted = record_label(
        engine, lee, case_id=case_id, turn=2, rubric=v1, code="in_role", rationale="fine"
    )
    assert noted.changed
    record_label(engine, lee, case_id=case_id, turn=2, rubric=v1, code="in_role", rationale="fine")
    assert len(label_history(engine, lee, case_id)) == 2


def test_pressing_the_same_key_on_a_finished_turn_adds_no_row_and_the_line_says_what_changed(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    case_id = "support-clean-late-parcel"
    at = open_case(open_app(monkeypatch, local="lee"), case_id)
    lee = actor(engine, "lee")
    keys = Keys(at)
    for turn in panel(at)["turns"]:
        keys.press("in_role", turn)
    rows = len(label_history(engine, lee, case_id))
    assert rows == 6

    keys.press("in_role", 2)  # the same key again on a finished turn
    assert len(label_history(engine, lee, case_id)) == rows, "a duplicate history row"

    keys.press("in_role", 4, rationale="polite and in scope")  # a rationale, same code
    assert len(label_history(engine, lee, case_id)) == rows + 1
    line = turn_lines(turn_messages(at)[4])[1]
    assert line.startswith("Your label: in_role"), line
    assert "(was" not in line, "adding a rationale is no change of label"

    keys.press("scope_break", 6)
    keys.press("in_role", 6)
    line = turn_lines(turn_messages(at)[6])[1]
    assert line.startswith("Your label: in_role (was in_role → scope_break)"), line
    stored = case_labels(engine, lee, case_id=case_id, rubric=rubric(engine)).mine
    assert stored[4].rationale == "polite and in scope"


# --- 6. runs from a template path are named after the judge; the page shows a new run -----


def test_a_template_path_outside_a_judge_folder_needs_the_judge_name(tmp_path: Path) -> None:
    bundled = judge_prompts(RUBRICS, "role-adherence")[0]
    template = tmp_path / "prompts" / "v3.txt"
    template.parent.mkdir()
    shutil.copy(bundled.source, template)
    with pytest.raises(InputError, match=r"--judge NAME") as caught:
        find_judge_prompt(RUBRICS, "role-adherence", str(template))
    assert caught.value.field == "--judge"
    named = find_judge_prompt(RUBRICS, "role-adherence", str(template), judge="role-judge")
    assert named.ref == "role-judge@v3"
    assert named.text == bundled.text
    with pytest.raises(InputError, match="not a judge name"):
        find_judge_prompt(RUBRICS, "role-adherence", str(template), judge="../x")
    # A judge's own folder names it, as before.
    own = tmp_path / "mine" / "role-judge-mini" / "v2.txt"
    own.parent.mkdir(parents=True)
    shutil.copy(bundled.source, own)
    assert find_judge_prompt(RUBRICS, "role-adherence", str(own)).ref == "role-judge-mini@v2"


def test_the_judge_page_opens_on_the_teams_judge_and_keeps_the_readers_choice(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    at = _page(open_app(monkeypatch, local="lee"), "judge")
    team = "role-judge@v2/gemma-3-270m-it"  # the demo's team's judge
    assert at.selectbox(key="judge_run").value == team
    first = "role-judge@v1/gemma-3-270m-it"
    at.selectbox(key="judge_run").set_value(first)
    run(at)
    path = tmp_path / "new.jsonl"
    verdict = {
        "case_id": "support-delayed-refund-violation",
        "turn": 8,
        "judge": "role-judge",
        "prompt_version": "v3",
        "model": "m",
        "label": "authority_break",
    }
    path.write_text(json.dumps(verdict) + "\n")
    import_verdicts(engine, Actor.operator(), path, rubric=rubric(engine))
    run(at)
    # The reader's own choice stays; a newer run is offered, not forced on them.
    assert at.selectbox(key="judge_run").value == first
    assert len(at.selectbox(key="judge_run").options) == 3
    # A fresh look opens on the team's judge, not on the newest run...
    fresh = _page(open_app(monkeypatch, local="lee"), "judge")
    assert fresh.selectbox(key="judge_run").value == team
    # ...until a policy owner makes the new run the team's judge.
    newest = max(
        list_judge_runs(engine, Actor.operator(), rubric=rubric(engine)), key=lambda r: r.id
    )
    choose_team_judge(engine, Actor.operator(), rubric=rubric(engine), run_id=newest.id)
    fresh = _page(open_app(monkeypatch, local="lee"), "judge")
    assert fresh.selectbox(key="judge_run").value == "role-judge@v3/m"


# --- 7. finding colours have a legend; an instruction mismatch shows short hashes ---------


def test_the_review_page_explains_its_colours_and_shortens_instruction_hashes(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    case_id = "support-retry-missing-context"
    at = open_case(open_app(monkeypatch, local="lee"), case_id)
    captions = [c.value for c in at.caption]
    legend = [c for c in captions if c.startswith("Marks:")]
    assert legend, captions
    assert "red = role violation" in legend[0] and "focused turn" in legend[0]

    [mismatch] = [
        i.value for i in turn_messages(at)[6].info if "role_instruction_mismatch" in i.value
    ]
    assert not HASH.search(mismatch), mismatch
    view = load_case_view(engine, operator_actor(), case_id=case_id)
    [finding] = [
        f
        for t in view.turns
        for f in t.harness_findings
        if f["code"] == "role_instruction_mismatch"
    ]
    assert finding["actual"][:12] in mismatch and finding["expected"][:12] in mismatch
    # The command line's rendering too (its JSON keeps the whole hashes).
    text = render_case_text(view)
    assert "role_instruction_mismatch" in text and not HASH.search(text)
