"""A deep link as the very first request of a freshly started server, in real Chromium.

A CI failure line links to ``review?case=<id>``; that link is often the first
request a new server sees. Streamlit runs a page without the entry script when it
discovers a ``pages/`` folder by itself, which showed a traceback ("nobody is signed
in") and the raw page list. Here the server is started, waited for without any HTTP
request (a TCP connect only), and the first page request is the deep link.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from review_app.services.access.actors import operator_actor
from review_app.services.exchange.demo import load_demo
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from review_app.services.team.people import add_person
from review_app.services.team.queue import assign_cases
from storage.engine import create_database_engine
from storage.migrations.upgrade import upgrade_database
from tests.served import IDLE, chromium, free_port, require_browser, serving, wait_listening

pytestmark = pytest.mark.browser

REVIEWER = "rita"
RUBRIC = "role-adherence@1"
ASSIGNED = "support-delayed-refund-violation"
FIRST_USER_TEXT = "I ordered a floor lamp two weeks ago"
NOT_ASSIGNED = "travel-persona-tone-drift"


@dataclass
class Fresh:
    url: str
    log: Path
    process: subprocess.Popen[bytes]


@pytest.fixture
def fresh_server(tmp_path: Path) -> Iterator[Fresh]:
    require_browser()
    database = f"sqlite:///{tmp_path / 'review.db'}"
    engine = create_database_engine(database)
    upgrade_database(engine)
    operator = operator_actor()
    load_demo(engine, operator)
    add_person(engine, operator, name=REVIEWER, role="reviewer")
    rubric = sync_rubrics(engine, operator).get(RUBRIC)
    assign_cases(
        engine, operator, rubric=rubric, reviewers=[REVIEWER], overlap=5, case_ids=[ASSIGNED]
    )
    engine.dispose()
    port = free_port()
    with serving(database, tmp_path, port=port, user=REVIEWER) as (process, log):
        wait_listening(port, process, log)
        yield Fresh(f"http://127.0.0.1:{port}", log, process)


@pytest.fixture
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


def test_a_deep_link_as_the_first_request_shows_the_case(fresh_server: Fresh, browser: Any) -> None:
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    tab = context.new_page()
    try:
        tab.goto(f"{fresh_server.url}/review?case={ASSIGNED}")
        tab.wait_for_selector(IDLE, timeout=60_000)
        expect(tab.get_by_text(FIRST_USER_TEXT).first).to_be_visible(timeout=30_000)
        assert tab.locator('[data-testid="stException"]').count() == 0
        body = tab.locator("body").inner_text()
        assert "Traceback" not in body and "nobody is signed in" not in body
        # The navigation is the app's (titles), not Streamlit's list of page files.
        sidebar = tab.locator('[data-testid="stSidebar"]').inner_text()
        assert "Review" in sidebar and "review.py" not in sidebar

        # A case outside the reviewer's queue: a plain refusal, no transcript, no traceback.
        tab.goto(f"{fresh_server.url}/review?case={NOT_ASSIGNED}")
        tab.wait_for_selector(IDLE, timeout=60_000)
        expect(tab.get_by_text(f"is not in {REVIEWER}'s queue")).to_be_visible(timeout=30_000)
        assert tab.locator('[data-testid="stException"]').count() == 0
    finally:
        context.close()
