"""The team page, driven with AppTest from the entry script on a copy of the demo set.

A policy owner sees each person's progress and assigns cases and audit samples from
the page; an admin also adds people, changes roles and deactivates; a reviewer sees
nothing of it. Every change is checked through the services the commands use.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session
from streamlit.testing.v1 import AppTest

from review_app.services.access.actors import operator_actor
from review_app.services.cases.case_views import list_cases
from review_app.services.judging.run_defaults import team_judge
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from review_app.services.team.people import add_person, list_people
from review_app.services.team.team import team_view
from storage import assignments
from storage.engine import shared_engine
from tests.conftest import REPO
from tests.ui_support import app_database, demo_template, plain, routed_pages

APP = REPO / "review_app" / "ui" / "app.py"
RUBRIC = "role-adherence@1"


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_template(tmp_path_factory.mktemp("team-demo") / "review.db")


@pytest.fixture
def db_url(demo_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with app_database(demo_file, tmp_path, monkeypatch, local_user=None) as url:
        yield url


def open_team(monkeypatch: pytest.MonkeyPatch, *, user: str | None = None) -> AppTest:
    """The team page as the local admin ``lee``, or ``user`` signed in through OIDC."""
    at = AppTest.from_file(str(APP), default_timeout=60)
    if user is None:
        monkeypatch.setenv("REVIEW_APP_AUTH", "local")
        monkeypatch.setenv("REVIEW_APP_LOCAL_USER", "lee")
    else:
        monkeypatch.setenv("REVIEW_APP_AUTH", "oidc")
        at.user = {"is_logged_in": True, "email": user, "name": user.title()}
    run(at)
    at.switch_page("views/team.py")
    return run(at)


def run(at: AppTest) -> AppTest:
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def texts(elements: Iterable[Any]) -> list[str]:
    return [plain(str(element.value)) for element in elements]


def progress(db_url: str) -> dict[str, tuple[int, int]]:
    engine = shared_engine(db_url)
    rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
    view = team_view(engine, operator_actor(), rubric=rubric)
    return {m.name: (m.assigned, m.finished) for m in view.members}


def test_a_reviewer_sees_nothing_of_the_team(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reviewer is routed to their own pages only: no team page to list or open."""
    monkeypatch.setenv("REVIEW_APP_AUTH", "oidc")
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.user = {"is_logged_in": True, "email": "ana", "name": "Ana"}
    run(at)
    assert routed_pages(at) == ["queue", "review", "rubrics", ""]  # "": the root, the queue
    with pytest.raises(ValueError, match="Could not find a navigation page"):
        at.switch_page("views/team.py")
    # the admin lee has every page
    assert "team" in routed_pages(open_team(monkeypatch))


def test_the_page_shows_each_persons_progress_and_what_to_do(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_team(monkeypatch)
    assert texts(at.title) == ["Team"]
    table = at.dataframe[0].value
    shown = {
        row["person"]: (row["assigned"], row["finished"], row["open"])
        for row in table.to_dict("records")
    }
    expected = progress(db_url)
    assert {name: (a, f) for name, (a, f, _) in shown.items()} == expected
    assert all(a - f == o for a, f, o in shown.values())
    # the demo's queues are all labeled
    assert texts(at.info)[0] == (
        "Every assigned case is done: read the agreement page, then adjudicate the disagreements."
    )


def frames(at: AppTest, *columns: str) -> list[list[dict[str, Any]]]:
    """The rows of each table on the page with exactly these columns, in page order
    (AppTest gives a read-only table no key)."""
    return [
        d.value.to_dict("records") for d in at.dataframe if list(d.value.columns) == list(columns)
    ]


def pairs_shown(at: AppTest) -> list[dict[str, Any]]:
    """The one (case, reviewer) table on the page."""
    [rows] = frames(at, "case", "reviewer")
    return rows


def progress_rows(at: AppTest) -> list[dict[str, Any]]:
    [rows] = frames(at, "person", "role", "active", "assigned", "finished", "open")
    return rows


def panel(at: AppTest) -> list[str]:
    """The result panel's sentence and lines (empty: no panel)."""
    found = [e for e in at.success if "task_alt" in str(e.proto.icon)]
    return texts(found) + [str(t.value) for t in at.text]


def test_a_policy_owner_assigns_cases_from_the_page(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo's cases have 3 reviewers each: "fill up to 2" previews nothing, "add these
    reviewers" previews every violation case for dana, and Apply writes exactly those
    pairs and keeps the outcome on the page."""
    engine = shared_engine(db_url)
    add_person(engine, operator_actor(), name="dana", role="reviewer")
    at = open_team(monkeypatch, user="olivia")  # the demo's policy owner
    assert "People" not in texts(at.subheader)  # people and roles are for admins
    assert at.radio(key="team_assign_mode").value is None  # no mode preselected
    assert at.button(key="team_assign").disabled  # Apply waits for a preview
    at.multiselect(key="team_assign_reviewers").set_value(["dana"])
    at.selectbox(key="team_assign_lane").set_value("violation")
    at.radio(key="team_assign_mode").set_value("fill")
    run(at)
    at.number_input(key="team_assign_n").set_value(2)
    at.button(key="team_assign_preview").click()
    run(at)
    assert any(
        "would assign 0 (case, reviewer) pairs" in t and "already had 2 or more reviewers" in t
        for t in texts(at.markdown)
    )
    at.radio(key="team_assign_mode").set_value("add")
    run(at)
    assert at.button(key="team_assign").disabled  # the preview was for another request
    at.button(key="team_assign_preview").click()
    run(at)
    violations = {c.case_id for c in list_cases(engine, lane="violation")}
    previewed = pairs_shown(at)
    assert {(r["case"], r["reviewer"]) for r in previewed} == {(c, "dana") for c in violations}
    assert progress(db_url)["dana"] == (0, 0)  # a preview writes nothing
    at.button(key="team_assign").click()
    run(at)
    assert not at.error, texts(at.error)
    rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
    with Session(engine) as session:
        dana = next(p for p in list_people(engine) if p.name == "dana")
        queued = assignments.assigned_case_ids(
            session, reviewer_id=dana.id, rubric_id=rubric.id, version=rubric.version
        )
    assert queued == violations and violations
    assert panel(at) == [
        f"add the chosen reviewers to each of {len(violations)} cases: assigned "
        f"{len(violations)} (case, reviewer) pairs (dana +{len(violations)}); 0 pairs were "
        "assigned already"
    ]
    shown = pairs_shown(at)
    assert {(r["case"], r["reviewer"]) for r in shown} == {(c, "dana") for c in violations}
    rows = progress_rows(at)
    assert {r["person"]: r["open"] for r in rows}["dana"] == len(violations)
    run(at)  # the panel stays on the next run, until dismissed
    assert panel(at)[0].startswith("add the chosen reviewers")
    at.button(key="team_result_dismiss").click()
    run(at)
    assert panel(at) == []


def test_an_audit_sample_is_drawn_and_queued_from_the_page(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_team(monkeypatch)
    at.number_input(key="team_audit_size").set_value(5)
    at.number_input(key="team_audit_seed").set_value(7)
    at.multiselect(key="team_audit_reviewers").set_value(["chloe"])
    at.number_input(key="team_audit_overlap").set_value(1)
    at.button(key="team_audit").click()
    run(at)
    assert not at.error, texts(at.error)
    assert panel(at)[0].startswith("audit sample 1: drew 5 of")
    at.button(key="team_audit").click()  # the same seed again
    run(at)
    assert panel(at)[0].startswith("audit sample 2: drew 5 of")
    assert "seed 7 was used before: audit sample 1 drew 5 turns on " in panel(at)[0]
    assert ", by lee. This is a new sample, not that one again" in panel(at)[0]


def test_an_uncertainty_audit_is_previewed_drawn_and_a_repeat_named(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run picker opens on the team's judge (a complete run); the preview's pairs are
    the pairs the draw assigns; the same seed again says what the first draw was."""
    engine = shared_engine(db_url)
    add_person(engine, operator_actor(), name="dana", role="reviewer")
    at = open_team(monkeypatch)
    rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
    team_run = team_judge(engine, operator_actor(), rubric=rubric)
    assert team_run is not None
    assert at.selectbox(key="team_uncertain_run").value == team_run.run_id
    at.number_input(key="team_uncertain_size").set_value(10)
    at.number_input(key="team_uncertain_seed").set_value(3)
    at.multiselect(key="team_uncertain_reviewers").set_value(["dana"])
    at.number_input(key="team_uncertain_overlap").set_value(4)
    run(at)
    assert at.button(key="team_uncertain").disabled
    at.button(key="team_uncertain_preview").click()
    run(at)
    assert any(t.startswith("preview, nothing stored: would draw ") for t in texts(at.markdown))
    pairs = pairs_shown(at)
    assert pairs and {r["reviewer"] for r in pairs} == {"dana"}
    assert progress(db_url)["dana"] == (0, 0)
    at.button(key="team_uncertain").click()
    run(at)
    assert panel(at)[0].startswith("audit sample 1: drew ")
    shown = pairs_shown(at)
    assert shown == pairs and progress(db_url)["dana"] == (len(pairs), 0)
    at.button(key="team_uncertain_preview").click()  # the same seed again
    run(at)
    assert any(
        t.startswith("seed 3 was used before: audit sample 1 drew ") for t in texts(at.warning)
    )
    at.button(key="team_uncertain").click()
    run(at)
    assert panel(at)[0].startswith("audit sample 2: drew ")
    assert ", by lee. This is a new sample, not that one again" in panel(at)[0]


def test_an_impossible_request_says_why_and_changes_nothing(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_team(monkeypatch)
    before = progress(db_url)
    at.button(key="team_assign_preview").click()  # no mode chosen
    run(at)
    assert texts(at.error) == [
        "Choose how to assign: add these reviewers, or fill each case up to N."
    ]
    at.radio(key="team_assign_mode").set_value("add")
    at.button(key="team_assign_preview").click()  # no reviewer chosen
    run(at)
    assert texts(at.error) == ["field reviewers: choose at least one reviewer"]
    at.number_input(key="team_audit_size").set_value(100_000)
    at.multiselect(key="team_audit_reviewers").set_value(["ana"])
    at.button(key="team_audit").click()
    run(at)
    assert any("asks for 100000 turns but only" in t for t in texts(at.error))
    assert progress(db_url) == before


def people(db_url: str) -> dict[str, tuple[str, bool]]:
    engine = shared_engine(db_url)
    return {p.name: (p.role, p.active) for p in list_people(engine, include_inactive=True)}


def review_change(at: AppTest, name: str | None, change: str | None, role: str | None = None):
    if name is not None:
        at.selectbox(key="team_rights_name").set_value(name)
    if change is not None:
        at.selectbox(key="team_rights_change").set_value(change)
    run(at)
    if role is not None:
        at.selectbox(key="team_rights_role").set_value(role)
    at.button(key="team_rights_review").click()
    return run(at)


def test_the_rights_form_opens_on_nobody_and_its_defaults_change_nobody(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_team(monkeypatch)
    before = people(db_url)
    assert at.selectbox(key="team_rights_name").value is None
    assert at.selectbox(key="team_rights_change").value is None
    assert at.selectbox(key="team_add_role").value is None
    review_change(at, None, None)
    assert texts(at.error) == ["Choose a person and a change first; nothing was changed."]
    assert not [b for b in at.button if b.key == "team_rights_confirm"]
    assert people(db_url) == before


def test_an_admin_adds_people_changes_roles_and_deactivates_after_confirming(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_team(monkeypatch)
    at.text_input(key="team_add_name").set_value("dana")
    at.selectbox(key="team_add_role").set_value("policy_owner")
    at.button(key="team_add").click()
    run(at)
    assert people(db_url)["dana"] == ("policy_owner", True)
    assert panel(at) == ["dana added as policy owner"]
    # adding someone already there changes nothing (rights change below, confirmed)
    at.text_input(key="team_add_name").set_value("Dana")
    at.selectbox(key="team_add_role").set_value("reviewer")
    at.button(key="team_add").click()
    run(at)
    assert texts(at.error) == ["This person is on the team already: change their rights below."]
    assert people(db_url)["dana"] == ("policy_owner", True)

    review_change(at, "dana", "role", "reviewer")  # a demotion: named, then confirmed
    assert people(db_url)["dana"] == ("policy_owner", True)
    [warning] = [t for t in texts(at.warning) if t.startswith("dana goes from")]
    assert warning.startswith("dana goes from a policy owner to a reviewer and loses assigning")
    assert warning.endswith("they keep their queue (0 open assignments).")
    at.button(key="team_rights_confirm").click()
    run(at)
    assert people(db_url)["dana"] == ("reviewer", True)
    assert panel(at)[0] == "dana: now reviewer"

    review_change(at, "ana", "deactivate")  # ana: every demo case, all labeled
    [warning] = [t for t in texts(at.warning) if t.startswith("ana (reviewer) loses")]
    assert "labeling the cases in their queue. They have no open assignment;" in warning
    at.button(key="team_rights_cancel").click()
    run(at)
    assert people(db_url)["ana"] == ("reviewer", True)  # cancelled: nothing changed
    review_change(at, None, None)
    at.button(key="team_rights_confirm").click()
    run(at)
    assert people(db_url)["ana"] == ("reviewer", False)
    assert panel(at)[0] == "ana: deactivated"
    rows = progress_rows(at)
    assert {r["person"]: r["active"] for r in rows}["ana"] is False


def test_an_admin_cannot_deactivate_or_demote_themselves(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = shared_engine(db_url)
    add_person(engine, operator_actor(), name="bo", role="admin")  # lee is not the last
    at = open_team(monkeypatch)  # lee, the local admin
    before = people(db_url)
    review_change(at, "lee", "deactivate")
    assert texts(at.error) == ["Refused: lee: you cannot deactivate yourself; another admin can."]
    assert not [b for b in at.button if b.key == "team_rights_confirm"]
    review_change(at, "lee", "role", "policy_owner")
    assert texts(at.error) == ["Refused: lee: you cannot demote yourself; another admin can."]
    assert people(db_url) == before
