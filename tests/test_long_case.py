"""Long conversations open in seconds: the review page draws a window of turns around the
focused one and the first break, not every turn (issue 35).

The probe: a 10,000-turn case took 74 s to open (about 100,000 DOM nodes); cases of up to
100,000 events are accepted. The time is measured by ``benchmarks/bench_long_case.py``;
here, what is drawn: at most the window and the first break, the focused turn always
among them (also after J past the window, in Chromium), and labels land on the turn the
reviewer saw.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from streamlit.testing.v1 import AppTest

from benchmarks.corpus import generate_case
from review_app.services.access.actors import operator_actor
from review_app.services.cases.case_window import (
    LONG_CASE_EVENTS,
    WINDOW_EVENTS,
    WINDOW_MARGIN,
    turn_window,
)
from review_app.services.cases.importing import import_paths
from storage.engine import create_database_engine
from tests.served import chromium, free_port, require_browser, serving, wait_healthy
from tests.test_ui_apptest import APP, TIMEOUT, Keys, panel, run, turn_messages
from tests.ui_support import app_database, demo_template, plain

LONG = "long-conversation"
EVENTS = 400


def _long_case() -> dict[str, Any]:
    case = generate_case(random.Random(3), 0, EVENTS, violation_rate=0.0)
    assistant = [e for e in case["transcript"] if e["actor"] == "assistant"]
    assistant[len(assistant) * 2 // 3]["observed_actions"].append("refund_order")
    case["case_id"] = LONG
    return case


# --- which positions are drawn -----------------------------------------------------------


def test_a_short_case_is_drawn_whole() -> None:
    window = turn_window(LONG_CASE_EVENTS, focus=50, first_break=3)
    assert window.whole and window.drawn == list(range(LONG_CASE_EVENTS))


def test_a_long_case_draws_the_focus_and_the_first_break() -> None:
    window = turn_window(10_000, focus=5_000, first_break=6_600)
    assert (window.start, window.end) == (5_000 - WINDOW_EVENTS, 5_000 + WINDOW_EVENTS + 1)
    assert window.segments == ((window.start, window.end), (6_599, 6_601))
    assert len(window.drawn) == 2 * WINDOW_EVENTS + 1 + 2
    first = turn_window(10_000, focus=0, first_break=20)
    assert first.segments == ((0, WINDOW_EVENTS + 1),)  # the break inside: drawn once


def test_the_window_stays_while_the_focus_moves_inside_and_follows_it_past_the_edge() -> None:
    placed = turn_window(10_000, focus=5_000, first_break=None)
    kept = (placed.start, placed.end, placed.anchor)
    inside = turn_window(10_000, focus=5_010, first_break=None, kept=kept)
    assert (inside.start, inside.end) == (placed.start, placed.end)
    near_edge = placed.end - WINDOW_MARGIN
    moved = turn_window(10_000, focus=near_edge, first_break=None, kept=kept)
    assert moved.start == near_edge - WINDOW_EVENTS and near_edge in moved.drawn


def test_a_window_moved_by_hand_stays_until_the_focus_moves() -> None:
    placed = turn_window(10_000, focus=5_000, first_break=9_000)
    later = placed.shifted(2 * WINDOW_EVENTS)
    assert later.start == placed.start + 2 * WINDOW_EVENTS
    kept = (later.start, later.end, later.anchor)
    again = turn_window(10_000, focus=5_000, first_break=9_000, kept=kept)
    assert (again.start, again.end) == (later.start, later.end)
    assert (8_999, 9_001) in again.segments
    followed = turn_window(10_000, focus=5_001, first_break=9_000, kept=kept)
    assert 5_001 in followed.drawn
    end = turn_window(10_000, focus=9_999, first_break=None).shifted(10**6)
    assert end.end == 10_000


# --- the page --------------------------------------------------------------------------------


@pytest.fixture
def long_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    template = demo_template(tmp_path / "demo.db", local_user="lee")
    with app_database(template, tmp_path, monkeypatch, local_user="lee") as url:
        engine = create_database_engine(url)
        source = tmp_path / "long.jsonl"
        source.write_text(json.dumps(_long_case()) + "\n", encoding="utf-8")
        import_paths(engine, operator_actor(), [source])
        engine.dispose()
        yield url


def _open_long(monkeypatch: pytest.MonkeyPatch) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    run(at)
    at.switch_page("views/review.py")
    at.query_params["case"] = LONG
    return run(at)


def _drawn_turns(at: AppTest) -> list[int]:
    return sorted(turn_messages(at))


def test_the_page_draws_a_window_and_the_first_break_and_follows_the_focus(
    long_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = _long_case()
    turns = [e["turn"] for e in case["transcript"]]
    violation = next(
        e["turn"] for e in case["transcript"] if "refund_order" in e.get("observed_actions", [])
    )
    at = _open_long(monkeypatch)
    drawn = _drawn_turns(at)
    assert len(drawn) <= 2 * WINDOW_EVENTS + 3
    assert violation in drawn  # the first break is drawn wherever the focus is
    args = panel(at)
    assert args["order"] == [t for t in turns if t in drawn]  # the messages, in page order
    assert args["focus"] in drawn
    assert len(args["turns"]) == sum(e["actor"] == "assistant" for e in case["transcript"])
    caption = " ".join(plain(c.value) for c in at.caption)
    assert f"A long conversation of {EVENTS} events" in caption

    # the panel moves the focus far down (a turn chip, or J past the window): drawn there
    far = [e["turn"] for e in case["transcript"] if e["actor"] == "assistant"][150]
    keys = Keys(at)
    keys.send(focus=far)
    assert far in _drawn_turns(at) and panel(at)["focus"] == far
    assert len(_drawn_turns(at)) <= 2 * WINDOW_EVENTS + 3
    # a label pressed there lands on that turn
    keys.press("in_role")
    message = turn_messages(at)[far]
    assert "Your label: in_role" in message.text[0].value

    # the window moved by hand shows later turns, and stays while the focus stays
    before = _drawn_turns(at)
    next(b for b in at.button if b.key == "window_later").click()
    run(at)
    after = _drawn_turns(at)
    assert max(after) > max(before) and panel(at)["order"] == [t for t in turns if t in after]


# --- in Chromium ------------------------------------------------------------------------------


def test_j_past_the_window_in_chromium_draws_the_next_turns_and_labels_the_right_one(
    tmp_path: Path,
) -> None:
    require_browser()
    database = tmp_path / "review.db"
    demo_template(database, local_user="lee")
    engine = create_database_engine(f"sqlite:///{database}")
    source = tmp_path / "long.jsonl"
    source.write_text(json.dumps(_long_case()) + "\n", encoding="utf-8")
    import_paths(engine, operator_actor(), [source])
    assistant = [e["turn"] for e in _long_case()["transcript"] if e["actor"] == "assistant"]
    root = tmp_path / "served"
    (root / "home").mkdir(parents=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    idle = '[data-testid="stApp"][data-test-script-state="notRunning"]'
    with (
        serving(f"sqlite:///{database}", root, port=port, user="lee") as (process, log),
        chromium() as browser,
    ):
        wait_healthy(url, process, log)
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        tab = context.new_page()
        tab.goto(f"{url}/review?case={LONG}")
        tab.wait_for_selector('body[data-review-keys="ready"]', state="attached", timeout=60_000)
        tab.wait_for_selector('[data-review-focus="1"]', timeout=60_000)
        assert tab.locator('[data-testid="stChatMessage"]').count() <= 2 * WINDOW_EVENTS + 3
        # the first assistant turn is focused; 40 x J walks far past the drawn window
        for _ in range(40):
            tab.keyboard.press("j")
        target = assistant[40]
        deadline = time.monotonic() + 60
        while True:
            tab.wait_for_selector(idle, state="attached", timeout=60_000)
            focused = tab.locator('[data-review-focus="1"]')
            if focused.count() == 1 and f"turn {target} · " in focused.inner_text():
                break
            assert time.monotonic() < deadline, "the focused turn was never drawn"
            tab.wait_for_timeout(200)
        tab.keyboard.press("1")
        deadline = time.monotonic() + 60
        while True:
            with engine.connect() as connection:
                saved = connection.execute(
                    text("SELECT turn, code FROM labels WHERE case_id = :c AND current"),
                    {"c": LONG},
                ).all()
            if saved:
                break
            assert time.monotonic() < deadline, "the label was not saved"
            time.sleep(0.2)
        assert [tuple(row) for row in saved] == [(target, "in_role")]
        assert tab.locator('[data-testid="stChatMessage"]').count() <= 2 * WINDOW_EVENTS + 3
        assert not tab.locator('[data-testid="stException"]').count()
        context.close()
    engine.dispose()
