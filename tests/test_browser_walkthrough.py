"""Defects of issue 21 that live in the browser, acted out in Chromium as a user would.

One server on a demo-loaded SQLite file, signed in through local mode as ``lee``, an
admin with the demo's 17 cases in their queue. Each test uses the cases no other test
of the module touches, so the order they run in does not matter.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from review_app.services.access.actors import operator_actor, sign_in
from review_app.services.labels.labeling import case_labels
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from review_app.services.team.queue import next_case
from tests.served import (
    IDLE,
    Served,
    chromium,
    demo_server,
    until_equal,
)

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[1]
USER = "lee"
RUBRIC = "role-adherence@1"
VIOLATION_CASE = "support-delayed-refund-violation"
SIDEBAR_CASE = "support-clean-late-parcel"
FINISHED_CASE = "travel-persona-tone-drift"
AFTER_N_CASE = "support-false-refund-claim"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with demo_server(tmp_path_factory.mktemp("walkthrough"), user=USER) as served:
        yield served  # lee gets every case


@pytest.fixture(scope="module")
def browser(server: Served) -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def tab(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        yield context.new_page()
    finally:
        context.close()


def _settled(tab: Any) -> None:
    tab.wait_for_selector(IDLE, timeout=30_000)


def _ready(tab: Any) -> None:
    _settled(tab)
    tab.wait_for_selector('body[data-review-keys="ready"]', state="attached", timeout=30_000)


def _labels(server: Served, case_id: str) -> dict[int, str]:
    me = sign_in(server.engine, name=USER, auth_mode="local")
    rubric = sync_rubrics(server.engine, operator_actor()).get(RUBRIC)
    found = case_labels(server.engine, me, case_id=case_id, rubric=rubric)
    return {turn: row.code for turn, row in found.mine.items()}


def _assistant_turns(server: Served, case_id: str) -> list[int]:
    from review_app.services.cases.case_views import load_case_view

    view = load_case_view(server.engine, operator_actor(), case_id=case_id)
    return [t.turn for t in view.turns if t.actor == "assistant"]


def _following(server: Served, after: str | None) -> str:
    me = sign_in(server.engine, name=USER, auth_mode="local")
    rubric = sync_rubrics(server.engine, operator_actor()).get(RUBRIC)
    found = next_case(server.engine, me, rubric=rubric, after=after)
    assert found is not None
    return found


def _panel(tab: Any) -> Any:
    return tab.frame_locator("iframe[title*='review_keys']")


# --- 3. keys right after N, and after a click on the sidebar's switch ----------------------


def test_a_label_key_right_after_n_on_the_review_page_labels_the_next_case(
    server: Served, tab: Any
) -> None:
    opened = AFTER_N_CASE
    following = _following(server, opened)
    assert _labels(server, opened) == {} and _labels(server, following) == {}
    tab.goto(f"{server.url}/review?case={opened}")
    _ready(tab)
    tab.keyboard.press("N")
    tab.keyboard.press("1")  # at once: the next case is not up yet
    tab.wait_for_url(f"**/review?case={following}")
    first = _assistant_turns(server, following)[0]
    until_equal(lambda: _labels(server, following), {first: "in_role"})
    assert _labels(server, opened) == {}, "the key labeled the case being left"
    assert not tab.locator('[data-testid="stException"]').count()


def test_a_label_key_right_after_n_on_the_queue_labels_the_case_it_opens(
    server: Served, tab: Any
) -> None:
    opens = _following(server, None)
    before = _labels(server, opens)
    first_open = next(t for t in _assistant_turns(server, opens) if t not in before)
    tab.goto(f"{server.url}/queue")
    # As soon as the page's first message is in, before the button may be drawn: the
    # key still opens the case (CI once pressed N between the two and lost it).
    tab.wait_for_function("() => window.__reviewKeyBuffer !== undefined", timeout=30_000)
    tab.keyboard.press("N")
    tab.keyboard.press("2")  # within the 0.3 s the page change takes
    tab.wait_for_url(f"**/review?case={opens}")
    rubric = sync_rubrics(server.engine, operator_actor()).get(RUBRIC)
    until_equal(lambda: _labels(server, opens), {**before, first_open: rubric.codes[1]})
    assert not tab.locator('[data-testid="stException"]').count()


def test_a_label_key_after_clicking_the_sidebar_switch_is_heard(server: Served, tab: Any) -> None:
    case_id = SIDEBAR_CASE
    tab.goto(f"{server.url}/review?case={case_id}")
    _ready(tab)
    switch = tab.locator('[data-testid="stSidebar"] [data-testid="stCheckbox"]').first
    switch.click()
    _settled(tab)
    tab.wait_for_timeout(300)
    tab.keyboard.press("1")
    first = _assistant_turns(server, case_id)[0]
    until_equal(lambda: _labels(server, case_id), {first: "in_role"})
    focused = tab.evaluate("() => document.activeElement && document.activeElement.tagName")
    assert focused in ("BODY", None), f"focus stayed on {focused}"


# --- 4. a finished case says so -----------------------------------------------------------


def test_a_finished_case_says_n_opens_the_next(server: Served, tab: Any) -> None:
    from playwright.sync_api import expect

    case_id = FINISHED_CASE
    turns = _assistant_turns(server, case_id)
    tab.goto(f"{server.url}/review?case={case_id}")
    _ready(tab)
    done = _panel(tab).locator("#done")
    for _ in turns:
        tab.keyboard.press("1")
        tab.wait_for_timeout(150)
    until_equal(lambda: len(_labels(server, case_id)), len(turns))
    expect(done).to_have_text("All turns labeled; N opens the next case.")


# --- 5. every page the README names opens by its address ----------------------------------


def _readme_pages() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    table = text.split("| page | for | what |", 1)[1].split("\n\n", 1)[0]
    paths = re.findall(r"^\| `([^`]+)` \|", table, flags=re.MULTILINE)
    assert "queue" in paths and len(paths) >= 8, paths
    return paths


def test_every_page_in_the_readme_opens_by_its_address(server: Served, tab: Any) -> None:
    from playwright.sync_api import expect

    for path in _readme_pages():
        address = path.replace("<case_id>", VIOLATION_CASE)
        tab.goto(f"{server.url}/{address}")
        _settled(tab)
        tab.wait_for_timeout(300)
        body = tab.locator("body").inner_text()
        assert "Page not found" not in body, f"/{address}: {body[:200]}"
        assert not tab.locator('[data-testid="stException"]').count(), address
    tab.goto(f"{server.url}/queue")
    _settled(tab)
    expect(tab.get_by_role("button", name="Open my next case (N)")).to_be_visible()


# --- 7. the focused turn is not outlined in a violation's red ------------------------------


def _rgb(colour: str) -> tuple[int, ...]:
    found = re.findall(r"[\d.]+", colour)
    return tuple(int(float(v)) for v in found[:3])


def test_the_focus_outline_is_not_a_violations_red(server: Served, tab: Any) -> None:
    tab.goto(f"{server.url}/review?case={VIOLATION_CASE}")
    _ready(tab)
    tab.wait_for_selector('[data-review-focus="1"]')
    outline = tab.evaluate(
        """() => getComputedStyle(document.querySelector('[data-review-focus="1"]'))
                 .outlineColor"""
    )
    violation = tab.evaluate(
        """() => {
            const alert = document.querySelector('[data-testid="stAlertContentError"]');
            return alert ? getComputedStyle(alert).color : null;
        }"""
    )
    red, _green, blue = _rgb(outline)
    assert blue > red, f"the focus outline {outline} reads as a violation"
    assert violation is not None and _rgb(violation) != _rgb(outline)
    legend = tab.get_by_text(re.compile("^Marks: red = role violation"))
    assert legend.count() == 1
