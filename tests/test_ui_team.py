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

from review_app.services.cases.cases import list_cases
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from review_app.services.team.people import add_person, list_people, operator_actor
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


def test_a_policy_owner_assigns_cases_from_the_page(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = shared_engine(db_url)
    add_person(engine, operator_actor(), name="dana", role="reviewer")
    at = open_team(monkeypatch, user="olivia")  # the demo's policy owner
    assert "People" not in texts(at.subheader)  # people and roles are for admins
    assert progress(db_url)["dana"] == (0, 0)
    at.multiselect(key="team_assign_reviewers").set_value(["dana"])
    at.selectbox(key="team_assign_lane").set_value("violation")
    at.number_input(key="team_assign_overlap").set_value(5)
    at.button(key="team_assign").click()
    run(at)
    assert not at.error, texts(at.error)
    rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
    violations = {c.case_id for c in list_cases(engine, lane="violation")}
    with Session(engine) as session:
        dana = next(p for p in list_people(engine) if p.name == "dana")
        queued = assignments.assigned_case_ids(
            session, reviewer_id=dana.id, rubric_id=rubric.id, version=rubric.version
        )
    assert queued == violations and violations
    assert progress(db_url)["dana"] == (len(violations), 0)
    assert any(f"dana +{len(violations)}" in t for t in texts(at.toast))
    rows = at.dataframe[0].value.to_dict("records")
    assert {r["person"]: r["open"] for r in rows}["dana"] == len(violations)
    assert texts(at.info)[0].startswith(f"{len(violations)} queued case")


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
    assert any("audit sample 1: drew 5 of" in t for t in texts(at.toast))


def test_an_impossible_request_says_why_and_changes_nothing(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_team(monkeypatch)
    before = progress(db_url)
    at.button(key="team_assign").click()  # no reviewer chosen
    run(at)
    assert texts(at.error) == ["field reviewers: choose at least one reviewer"]
    at.number_input(key="team_audit_size").set_value(100_000)
    at.multiselect(key="team_audit_reviewers").set_value(["ana"])
    at.button(key="team_audit").click()
    run(at)
    assert any("asks for 100000 turns but only" in t for t in texts(at.error))
    assert progress(db_url) == before


def test_an_admin_adds_people_changes_roles_and_deactivates(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = open_team(monkeypatch)
    at.text_input(key="team_add_name").set_value("dana")
    at.selectbox(key="team_add_role").set_value("reviewer")
    at.button(key="team_add").click()
    run(at)
    engine = shared_engine(db_url)
    assert {p.name: p.role for p in list_people(engine)}["dana"] == "reviewer"
    at.text_input(key="team_add_name").set_value("dana")
    at.selectbox(key="team_add_role").set_value("policy_owner")
    at.button(key="team_add").click()
    run(at)
    assert {p.name: p.role for p in list_people(engine)}["dana"] == "policy_owner"
    at.selectbox(key="team_active_name").set_value("dana")
    at.radio(key="team_active_change").set_value("deactivate")
    at.button(key="team_active").click()
    run(at)
    assert "dana" not in {p.name for p in list_people(engine)}
    assert "dana" in {p.name for p in list_people(engine, include_inactive=True)}
    rows = at.dataframe[0].value.to_dict("records")
    assert {r["person"]: r["active"] for r in rows}["dana"] is False
