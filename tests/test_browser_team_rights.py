"""No lockout from the team page, and each role's sidebar, in Chromium (issue 34).

A served demo behind proxy sign-in (the ``X-Forwarded-User`` header), with two admins,
ada and bo, at 1280x800: the rights form applied with the values it opens with changes
nobody (it opens with nobody and no change chosen, and says so); ada choosing herself
and "deactivate" is refused before any confirmation, and nothing changes; a reviewer's
sidebar lists the queue, review and rubrics only (and the team page's address shows them
no team), while an admin's lists all nine pages.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from review_app.services.access.actors import operator_actor
from review_app.services.exchange.demo import load_demo
from review_app.services.reports import report_store
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from review_app.services.team.people import add_person, list_people
from storage.engine import create_database_engine
from storage.migrations.upgrade import upgrade_database
from tests.served import IDLE, chromium, free_port, require_browser, serving, wait_healthy

pytestmark = [pytest.mark.browser, pytest.mark.slow]

RUNNING = '[data-testid="stApp"][data-test-script-state="running"]'
QUIET = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  const idle = app && app.getAttribute("data-test-script-state") === "notRunning";
  const now = performance.now();
  if (!idle) { window.__idleSince = null; return false; }
  if (window.__idleSince == null) window.__idleSince = now;
  return now - window.__idleSince > 500;
}"""

ALL_PAGES = [
    "Queue",
    "Review",
    "Rubrics",
    "Agreement",
    "Adjudicate",
    "Judge",
    "Import",
    "Export",
    "Team",
]


@dataclass
class Served:
    url: str
    database: str


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    require_browser()
    root = tmp_path_factory.mktemp("team-rights")
    database = f"sqlite:///{root / 'review.db'}"
    engine = create_database_engine(database)
    upgrade_database(engine)
    load_demo(engine, operator_actor())  # no person for the operating-system user
    for name in ("ada", "bo"):
        add_person(engine, operator_actor(), name=name, role="admin")
    # The team page's reliability report stored first: computed by a job instead, its
    # arrival reruns the page, and on a loaded machine that rerun could fall between a
    # choice and the click that reviews it (the form then says to choose again; nothing
    # changes, which is the safe outcome, but not the one under test here).
    rubric = sync_rubrics(engine, operator_actor()).get("role-adherence@1")
    report_store.reviewer_reliability(engine, operator_actor(), rubric=rubric)
    engine.dispose()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with serving(database, root, port=port, user=None, auth="proxy") as (process, log):
        wait_healthy(url, process, log)
        yield Served(url, database)


@pytest.fixture(scope="module")
def browser(served: Served) -> Iterator[Any]:
    with chromium() as launched:
        yield launched


def people(served: Served) -> dict[str, tuple[str, bool]]:
    engine = create_database_engine(served.database)
    try:
        return {p.name: (p.role, p.active) for p in list_people(engine, include_inactive=True)}
    finally:
        engine.dispose()


def open_as(browser: Any, served: Served, name: str, address: str, shown: str) -> Any:
    """A tab signed in as ``name`` through the proxy's header, on ``address`` once it
    shows ``shown``; the caller closes its context."""
    context = browser.new_context(
        viewport={"width": 1280, "height": 800}, extra_http_headers={"X-Forwarded-User": name}
    )
    tab = context.new_page()
    tab.goto(f"{served.url}/{address}")
    tab.get_by_text(shown, exact=True).first.wait_for(timeout=120_000)
    tab.wait_for_selector(IDLE, timeout=120_000)
    return tab


def choose(tab: Any, label: str, option: str) -> None:
    """Pick ``option`` in the select box labeled ``label``."""
    box = tab.get_by_role("combobox", name=label, exact=True)
    box.click()
    box.fill(option)
    tab.get_by_role("option", name=option, exact=True).wait_for(timeout=30_000)
    box.press("Enter")
    settle(tab)
    assert box.input_value() == option


def settle(tab: Any) -> None:
    """Until the run a widget change started is over: the app goes running (if it has
    not already been and gone), then stays idle for half a second."""
    from playwright.sync_api import TimeoutError as NotSeen

    with contextlib.suppress(NotSeen):  # the run was over before we looked
        tab.wait_for_selector(RUNNING, state="attached", timeout=2_000)
    tab.wait_for_function(QUIET, timeout=60_000)


NOTHING_CHOSEN = "Choose a person and a change first"


def review_change(tab: Any, **chosen: str) -> str:
    """Click "Review this change" with the choices ``chosen`` (select box label -> option)
    still made. On a loaded machine a rerun started by a background report's arrival can
    land between a choice and the click and reset the form to nobody chosen (the safe
    outcome, which the page says); then the choices are made again, twice at most."""
    for attempt in range(3):
        for label, option in chosen.items():
            box = tab.get_by_role("combobox", name=label, exact=True)
            if box.input_value() != option:
                choose(tab, label, option)
        tab.get_by_role("button", name="Review this change").click()
        settle(tab)
        text: str = tab.locator('[data-testid="stMain"]').inner_text()
        if not chosen or NOTHING_CHOSEN not in text or attempt == 2:
            return text
    raise AssertionError("unreachable")


def sidebar_pages(tab: Any) -> list[str]:
    links = tab.locator('[data-testid="stSidebarNavLink"]')
    # each link's text is its icon's name, then its title
    return [links.nth(i).inner_text().split()[-1] for i in range(links.count())]


def test_the_rights_form_applied_with_its_defaults_changes_nobody(
    served: Served, browser: Any
) -> None:
    before = people(served)
    tab = open_as(browser, served, "ada", "team", "Change someone's rights")
    try:
        person = tab.get_by_role("combobox", name="Person", exact=True)
        change = tab.get_by_role("combobox", name="Change", exact=True)
        assert (person.input_value(), person.get_attribute("placeholder")) == (
            "",
            "choose a person",
        )
        assert (change.input_value(), change.get_attribute("placeholder")) == (
            "",
            "choose a change",
        )
        shown = review_change(tab)
        assert "Choose a person and a change first; nothing was changed." in shown
        assert tab.get_by_role("button", name="Yes,").count() == 0
        assert people(served) == before
    finally:
        tab.context.close()


def test_an_admin_cannot_deactivate_themselves(served: Served, browser: Any) -> None:
    before = people(served)
    assert before["ada"] == ("admin", True) and before["bo"] == ("admin", True)
    tab = open_as(browser, served, "ada", "team", "Change someone's rights")
    try:
        choose(tab, "Person", "ada")
        choose(tab, "Change", "deactivate")
        shown = review_change(tab, Person="ada", Change="deactivate")
        assert "Refused: ada: you cannot deactivate yourself; another admin can." in shown
        assert tab.get_by_role("button", name="Yes, deactivate ada").count() == 0
        assert people(served) == before
        # another admin would be asked to confirm, naming what bo loses
        choose(tab, "Person", "bo")
        shown = review_change(tab, Person="bo", Change="deactivate")
        assert "bo (admin) loses every right from their next action on: adding people" in shown
        assert tab.get_by_role("button", name="Yes, deactivate bo").count() == 1
        assert people(served) == before  # nothing applies before the confirmation
    finally:
        tab.context.close()


def test_a_reviewers_sidebar_lists_only_the_reviewers_pages(served: Served, browser: Any) -> None:
    tab = open_as(browser, served, "ana", "", "Queue")
    try:
        assert sidebar_pages(tab) == ["Queue", "Review", "Rubrics"]
        tab.goto(f"{served.url}/team")
        tab.wait_for_selector(IDLE, timeout=120_000)
        tab.wait_for_timeout(500)
        main = tab.locator('[data-testid="stMain"]').inner_text()
        assert "Change someone's rights" not in main and "Assign cases" not in main
        assert "for policy owners" not in main
    finally:
        tab.context.close()
    admin = open_as(browser, served, "ada", "", "Queue")
    try:
        assert sidebar_pages(admin) == ALL_PAGES
    finally:
        admin.context.close()
