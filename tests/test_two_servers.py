"""Two ``review-app serve`` processes on one PostgreSQL database: the way a team scales out.

A reviewer labels a turn through server A; server B's next page shows it, and a
label saved through B shows on A's next rerun. Nothing is cached per process that
would hide another server's writes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from review_app.services.access.actors import Actor, sign_in
from review_app.services.exchange.demo import load_demo
from review_app.services.labels.labeling import case_labels
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from review_app.services.team.people import add_person
from review_app.services.team.queue import assign_cases
from tests.conftest import Database
from tests.served import (
    IDLE,
    chromium,
    free_port,
    require_browser,
    serving,
    until_equal,
    wait_healthy,
)

pytestmark = [pytest.mark.browser, pytest.mark.postgres]

REVIEWER = "rita"
RUBRIC = "role-adherence@1"
CASE = "support-delayed-refund-violation"


@contextmanager
def _serve(database_url: str, root: Path) -> Iterator[str]:
    root.mkdir(parents=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with serving(database_url, root, port=port, user=REVIEWER) as (process, log):
        wait_healthy(url, process, log)
        yield url


def _stored(database: Database) -> dict[int, str]:
    reviewer = sign_in(database.engine, name=REVIEWER, auth_mode="local")
    rubric = sync_rubrics(database.engine, Actor.operator()).get(RUBRIC)
    found = case_labels(database.engine, reviewer, case_id=CASE, rubric=rubric)
    return {turn: row.code for turn, row in found.mine.items()}


def _wait_stored(database: Database, expected: dict[int, str]) -> None:
    until_equal(lambda: _stored(database), expected)


def _open_case(browser: Any, url: str) -> Any:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    tab = context.new_page()
    # the home page first: a deep link as a fresh server's very first request is
    # another test's subject
    tab.goto(f"{url}/")
    tab.wait_for_selector(IDLE, timeout=30_000)
    tab.goto(f"{url}/review?case={CASE}")
    _ready(tab)
    return tab


def _ready(tab: Any) -> None:
    """The review page has run and its key panel listens (focus on the first open turn)."""
    tab.wait_for_selector(IDLE, timeout=30_000)
    tab.wait_for_selector('body[data-review-keys="ready"]', state="attached", timeout=30_000)
    tab.wait_for_selector('[data-review-focus="1"]', timeout=30_000)


def test_a_label_saved_through_one_server_shows_on_the_other(
    postgres_database: Database, tmp_path: Path
) -> None:
    require_browser()
    from playwright.sync_api import expect

    engine = postgres_database.engine
    load_demo(engine, Actor.operator())
    operator = Actor.operator()
    add_person(engine, operator, name=REVIEWER, role="reviewer")
    rubric = sync_rubrics(engine, Actor.operator()).get(RUBRIC)
    assign_cases(engine, operator, rubric=rubric, reviewers=[REVIEWER], overlap=4, case_ids=[CASE])

    with ExitStack() as stack:
        server_a = stack.enter_context(_serve(postgres_database.url, tmp_path / "a"))
        server_b = stack.enter_context(_serve(postgres_database.url, tmp_path / "b"))
        browser = stack.enter_context(chromium())

        tab_a = _open_case(browser, server_a)
        tab_a.keyboard.press("1")  # in_role on turn 2, the first open turn, via A
        _wait_stored(postgres_database, {2: "in_role"})

        tab_b = _open_case(browser, server_b)  # B's next page load shows A's label
        expect(tab_b.get_by_text("Your label: in_role")).to_have_count(1, timeout=30_000)
        tab_b.keyboard.press("3")  # focus starts on turn 4, the first unlabeled one
        _wait_stored(postgres_database, {2: "in_role", 4: "scope_break"})

        # A's next page load shows B's label
        tab_a.reload()
        _ready(tab_a)
        expect(tab_a.get_by_text("Your label: scope_break")).to_have_count(1, timeout=30_000)
        for tab in (tab_a, tab_b):
            assert not tab.locator('[data-testid="stException"]').count()
