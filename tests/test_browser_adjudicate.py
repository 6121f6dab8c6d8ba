"""Adjudication at reviewer speed, in Chromium at 1280x800 (issue 21).

A policy owner opens ``/adjudicate`` and, without a click or a Tab, presses a label's
number and Enter: the gold label is stored (read back through the service). The turn
being decided and the label choices are on the first screen; the queue's unit names
(with their turn numbers) are not cut off.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine

from review_app.services.access.actors import Actor, operator_actor
from review_app.services.exchange.demo import DEMO_CASES
from review_app.services.labels.adjudication import disagreement_queue, gold_labels
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from tests.served import (
    IDLE,
    Served,
    chromium,
    demo_server,
    until_equal,
)

pytestmark = pytest.mark.browser

OWNER = "root"
RUBRIC = "role-adherence@1"
WIDTH, HEIGHT = 1280, 800


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with demo_server(tmp_path_factory.mktemp("adjudicate"), user=OWNER) as served:
        yield served


@pytest.fixture
def tab(server: Served) -> Iterator[Any]:
    with chromium() as browser:
        context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
        try:
            yield context.new_page()
        finally:
            context.close()


def _rubric(engine: Engine) -> Any:
    return sync_rubrics(engine, operator_actor()).get(RUBRIC)


def _turn_text(case_id: str, turn: int) -> str:
    case = json.loads((DEMO_CASES / f"{case_id}.json").read_text(encoding="utf-8"))
    text: str = case["transcript"][turn - 1]["text"]
    return text


def _within_viewport(box: dict[str, float] | None) -> bool:
    return (
        box is not None
        and box["x"] >= 0
        and box["y"] >= 0
        and box["x"] + box["width"] <= WIDTH
        and box["y"] + box["height"] <= HEIGHT
    )


def test_keys_alone_record_a_gold_label_on_the_first_screen(server: Served, tab: Any) -> None:
    rubric = _rubric(server.engine)
    queue = disagreement_queue(server.engine, Actor.operator(), rubric=rubric)
    first, second = queue[0], queue[1]
    tab.goto(f"{server.url}/adjudicate")
    tab.wait_for_selector(IDLE, timeout=30_000)
    heading = tab.get_by_role("heading", name=f"{first.case_id} · turn {first.turn}")
    heading.wait_for(timeout=30_000)
    assert tab.url.endswith(f"adjudicate?case={first.case_id}&turn={first.turn}")

    # Above the fold: the decided turn's text, every choice and the record button.
    text = _turn_text(first.case_id, first.turn)
    turn_box = tab.locator('[data-testid="stText"]', has_text=text[:60]).first.bounding_box()
    assert _within_viewport(turn_box), ("the decided turn", turn_box)
    for label in rubric.labels[:9]:
        box = tab.locator(f".st-key-gold_pick_{label.code} button").first.bounding_box()
        assert _within_viewport(box), (label.code, box)
    record = tab.locator(".st-key-gold_submit button").first.bounding_box()
    assert _within_viewport(record), ("record", record)

    # Keys only: no click, no Tab.
    chosen = rubric.labels[1].code
    tab.keyboard.press("2")
    tab.locator(f".st-key-gold_pick_{chosen} button[kind='primary']").first.wait_for(timeout=30_000)
    tab.wait_for_selector(IDLE, timeout=30_000)
    tab.keyboard.press("Enter")

    def stored(case_id: str, turn: int) -> tuple[str, str] | None:
        gold = gold_labels(server.engine, Actor.operator(), rubric=rubric).labels.get(
            (case_id, turn)
        )
        return (gold.code, gold.source) if gold else None

    until_equal(lambda: stored(first.case_id, first.turn), (chosen, "adjudicated"))
    tab.get_by_role("heading", name=f"{second.case_id} · turn {second.turn}").wait_for(
        timeout=30_000
    )
    tab.wait_for_selector(IDLE, timeout=30_000)

    # The next unit follows, and takes keys at once too.
    tab.keyboard.press("3")
    tab.locator(f".st-key-gold_pick_{rubric.labels[2].code} button[kind='primary']").first.wait_for(
        timeout=30_000
    )
    tab.wait_for_selector(IDLE, timeout=30_000)
    tab.keyboard.press("Enter")
    until_equal(lambda: stored(second.case_id, second.turn), (rubric.labels[2].code, "adjudicated"))


def test_the_queues_unit_names_are_not_cut_off(server: Served, tab: Any) -> None:
    tab.goto(f"{server.url}/adjudicate")
    tab.wait_for_selector(IDLE, timeout=30_000)
    tab.get_by_text("Show the disagreement queue").first.click()
    links = tab.locator('[data-testid="stPageLink-NavLink"]')
    links.nth(19).wait_for(timeout=30_000)  # 26 open units in the demo, one row each
    tab.wait_for_selector(IDLE, timeout=30_000)
    cut = tab.evaluate(
        """() => [...document.querySelectorAll('[data-testid="stPageLink-NavLink"]')]
            .filter(a => a.offsetParent !== null)
            .flatMap(a => [a, ...a.querySelectorAll('*')])
            .filter(el => el.scrollWidth > el.clientWidth + 1)
            .map(el => el.textContent)"""
    )
    assert cut == []
    assert links.count() >= 20
