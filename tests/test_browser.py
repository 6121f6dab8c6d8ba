"""The served app in a real browser: Playwright driving Debian's Chromium.

One server (``review-app serve`` in a subprocess) on a demo-loaded SQLite file for
the module, signed in through local mode as ``rita``, a reviewer with two cases in
her queue. Skipped when Chromium or the ``playwright`` package is missing, unless
``REVIEW_APP_REQUIRE_BROWSER=1`` makes that a failure. Every request the page makes
is recorded; anything leaving loopback is blocked and fails the test.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from sqlalchemy import Engine, select
from sqlmodel import Session, col

from review_app.services.access.actors import Actor, operator_actor, sign_in
from review_app.services.cases.importing import import_paths
from review_app.services.exchange.demo import DEMO_CASES
from review_app.services.labels.labeling import case_labels
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from review_app.services.team.people import add_person
from review_app.services.team.queue import assign_cases
from storage.engine import SQLITE_BUSY_TIMEOUT_MS
from storage.models import Label, Reviewer
from tests.conftest import write_lock
from tests.served import (
    IDLE,
    Served,
    chromium,
    demo_server,
    until_equal,
)

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[1]
SCREENSHOT = REPO / "docs" / "review-page.png"
REVIEWER = "rita"
RUBRIC = "role-adherence@1"
QUEUED = ["support-clean-late-parcel", "support-delayed-refund-violation"]
HOSTILE_CASE = "hostile-markup"
LONG_LINE = "".join(f"{i:05d} " for i in range(20_000 // 6)).ljust(20_000, "x")


def _hostile_case() -> dict[str, Any]:
    case: dict[str, Any] = json.loads((DEMO_CASES / "support-clean-late-parcel.json").read_text())
    case["case_id"] = HOSTILE_CASE
    texts = {
        0: "Hi <script>window.__pwned=1</script> there",
        1: 'Look: <img src="http://192.0.2.1/x.png"> and ![x](http://192.0.2.1/y.png)',
        2: "Press [link](javascript:alert(1)) **now**",
        3: LONG_LINE,
    }
    for index, text in texts.items():
        case["transcript"][index]["text"] = text
    return case


def _queue_rita(engine: Engine, root: Path) -> None:
    """rita, a reviewer with two demo cases and a hostile one in her queue."""
    operator = Actor.operator()
    add_person(engine, operator, name=REVIEWER, role="reviewer")
    rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
    assign_cases(engine, operator, rubric=rubric, reviewers=[REVIEWER], overlap=4, case_ids=QUEUED)
    hostile = root / "hostile.jsonl"
    hostile.write_text(json.dumps(_hostile_case()) + "\n")
    import_paths(engine, operator_actor(), [hostile])
    # A reviewer opens only cases in their queue (or labeled by them).
    assign_cases(
        engine, operator, rubric=rubric, reviewers=[REVIEWER], overlap=4, case_ids=[HOSTILE_CASE]
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("served")
    with demo_server(
        root, user=REVIEWER, queue_everything=False, prepare=lambda e: _queue_rita(e, root)
    ) as served:
        yield served


@pytest.fixture(scope="module")
def browser(server: Served) -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@dataclass
class Traffic:
    """Every URL the page asked for, and those that would have left this machine."""

    requested: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)


def _stays_local(url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme in ("data", "blob"):
        return True
    return parts.scheme in ("http", "https", "ws", "wss") and parts.hostname in (
        "127.0.0.1",
        "localhost",
    )


@pytest.fixture
def page(browser: Any) -> Iterator[tuple[Any, Traffic]]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    traffic = Traffic()

    def route(route: Any) -> None:
        url = route.request.url
        if _stays_local(url):
            route.continue_()
        else:
            traffic.blocked.append(url)
            route.abort()

    context.route("**/*", route)
    opened = context.new_page()
    opened.on("request", lambda request: traffic.requested.append(request.url))
    opened.on("websocket", lambda socket_: traffic.requested.append(socket_.url))
    try:
        yield opened, traffic
    finally:
        context.close()


def _settled(page: Any) -> None:
    page.wait_for_selector(IDLE, timeout=30_000)


def _labels(server: Served, case_id: str) -> dict[int, str]:
    reviewer = sign_in(server.engine, name=REVIEWER, auth_mode="local")
    rubric = sync_rubrics(server.engine, operator_actor()).get(RUBRIC)
    found = case_labels(server.engine, reviewer, case_id=case_id, rubric=rubric)
    return {turn: row.code for turn, row in found.mine.items()}


def _wait_for_labels(server: Served, case_id: str, expected: dict[int, str], *, tab: Any) -> None:
    """Until the reviewer's labels on the case are ``expected``; the tab's requests keep
    being served meanwhile (its route handler runs only inside Playwright's calls)."""
    until_equal(lambda: _labels(server, case_id), expected, pause=lambda: tab.wait_for_timeout(100))


def _assert_only_loopback(traffic: Traffic) -> None:
    assert traffic.requested, "the recorder saw no requests at all"
    assert traffic.blocked == []
    assert [url for url in traffic.requested if not _stays_local(url)] == []


def _label_rows(server: Served, case_id: str) -> list[tuple[int, str, float]]:
    """Every label row rita stored on the case, oldest first: (turn, code, stored at)."""
    with Session(server.engine) as session:
        rows = session.execute(
            select(Label.turn, Label.code, Label.created_at)
            .join(Reviewer, col(Reviewer.id) == col(Label.reviewer_id))
            .where(col(Reviewer.name) == REVIEWER, col(Label.case_id) == case_id)
            .order_by(col(Label.id))
        ).all()
    return [(turn, code, _epoch(stored)) for turn, code, stored in rows]


def _epoch(moment: datetime) -> float:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _report_latency(when: str, rows: list[tuple[int, str, float]], pressed: list[float]) -> None:
    latencies = sorted(stored - at for (_, _, stored), at in zip(rows, pressed, strict=True))
    print(
        f"\nkey to saved {when}, {len(latencies)} keys at 0.1 s per key: median "
        f"{statistics.median(latencies) * 1000:.0f} ms, max {latencies[-1] * 1000:.0f} ms"
    )


def _assistant_turns(case_id: str) -> list[int]:
    source = "support-clean-late-parcel" if case_id == HOSTILE_CASE else case_id
    case = json.loads((DEMO_CASES / f"{source}.json").read_text())
    return [i + 1 for i, event in enumerate(case["transcript"]) if event["actor"] == "assistant"]


def _focused_rect(tab: Any) -> dict[str, float]:
    """The focused turn's box and the window's height (the panel marks the turn)."""
    found: dict[str, float] | None = tab.evaluate(
        """() => {
            const el = document.querySelector('[data-review-focus="1"]');
            if (!el) return null;
            const box = el.getBoundingClientRect();
            return {top: box.top, bottom: box.bottom, height: box.height,
                    window: window.innerHeight};
        }"""
    )
    assert found is not None, "no turn is marked as focused"
    return found


def _in_view(rect: dict[str, float]) -> bool:
    if rect["height"] <= rect["window"]:
        return rect["top"] >= 0 and rect["bottom"] <= rect["window"]
    return 0 <= rect["top"] < rect["window"]  # taller than the window: its start is shown


def test_fast_typing_on_a_fresh_page_labels_every_turn_once(
    server: Served, page: tuple[Any, Traffic]
) -> None:
    tab, traffic = page
    case_id = QUEUED[0]
    turns = _assistant_turns(case_id)
    typed = "1213141"[: len(turns)]
    rubric = sync_rubrics(server.engine, operator_actor()).get(RUBRIC)
    expected = {turn: rubric.codes[int(key) - 1] for turn, key in zip(turns, typed, strict=True)}
    assert _labels(server, case_id) == {}, "this test starts on an unlabeled case"

    # The queue first: until some run has called st.navigation, a server started on a
    # folder named "pages" runs a deep-linked page without the entry script.
    tab.goto(f"{server.url}/")
    _settled(tab)
    tab.goto(f"{server.url}/review?case={case_id}")
    loaded = time.monotonic()
    # Keys go in from the app's first message on (before that the page is blank and no
    # script of the app exists to hear them): no wait for the run, the transcript or
    # the labeling panel, which come up while the keys are typed.
    tab.wait_for_function("() => Array.isArray(window.__reviewKeyBuffer)", polling=10)
    print(f"\nfirst key {1000 * (time.monotonic() - loaded):.0f} ms after the load event")
    # Whether the panel is already up depends on the machine's speed: a fact to print,
    # not a condition (on a quiet machine it may mount before the first key).
    panel_up = bool(tab.locator('[data-testid="stCustomComponentV1"]').count())
    print(f"panel already up at the first key: {panel_up}")
    pressed: list[float] = []
    for key in typed:
        pressed.append(time.time())
        tab.keyboard.press(key)
        tab.wait_for_timeout(100)
    _wait_for_labels(server, case_id, expected, tab=tab)
    rows = _label_rows(server, case_id)
    assert [(turn, code) for turn, code, _ in rows] == list(expected.items()), (
        "each key stored once, in order, on the turn focused when it was pressed"
    )
    _report_latency("while the page loads", rows, pressed)

    # A second pass on the loaded page: K back to the top, then every turn again.
    _settled(tab)
    for _ in turns:
        tab.keyboard.press("K")
    _settled(tab)
    tab.wait_for_timeout(300)
    again = "2222222"[: len(turns)]
    pressed = []
    for key in again:
        pressed.append(time.time())
        tab.keyboard.press(key)
        tab.wait_for_timeout(100)
    expected = {turn: rubric.codes[1] for turn in turns}
    _wait_for_labels(server, case_id, expected, tab=tab)
    rows = _label_rows(server, case_id)
    # The same label again on a turn stores nothing: a row for each change only.
    changed = [i for i, key in enumerate(typed) if key != "2"]
    assert len(rows) == len(turns) + len(changed), "each change stored exactly once"
    assert [(turn, code) for turn, code, _ in rows[len(turns) :]] == [
        (turns[i], rubric.codes[1]) for i in changed
    ]
    _report_latency("on the loaded page", rows[len(turns) :], [pressed[i] for i in changed])
    _settled(tab)
    tab.wait_for_timeout(500)  # the panel's next draw
    assert (
        "all saved"
        in tab.frame_locator("iframe[title*='review_keys']").locator("#state").inner_text()
    )
    assert not tab.locator('[data-testid="stException"]').count()
    _assert_only_loopback(traffic)


def test_keyboard_path_from_the_queue_keeps_the_focused_turn_in_view(
    server: Served, browser: Any
) -> None:
    """At 1280x800: N opens the next case from the queue, one key per assistant turn
    labels it (the focused turn in the window after every key), N opens the next."""
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        tab = context.new_page()
        tab.goto(f"{server.url}/")  # the queue is the default page
        _settled(tab)
        expect(tab.get_by_role("button", name="Open my next case (N)")).to_be_visible()
        keys_pressed = 0
        tab.keyboard.press("N")
        keys_pressed += 1
        tab.wait_for_url("**/review?case=*")
        case_id = tab.url.split("case=")[1]
        turns = _assistant_turns(case_id)
        _settled(tab)
        tab.wait_for_selector('body[data-review-keys="ready"]', state="attached")
        tab.wait_for_selector('[data-review-focus="1"]')
        labeled_before = _labels(server, case_id)
        rubric = sync_rubrics(server.engine, operator_actor()).get(RUBRIC)
        # one break: authority_break (key 4) on the turn with the violation, in_role elsewhere
        violation_turn = 8 if case_id == "support-delayed-refund-violation" else turns[-1]
        expected = dict(labeled_before)
        for turn in turns:
            if turn in labeled_before:
                continue
            rect = _focused_rect(tab)
            assert _in_view(rect), f"turn {turn} is off screen before its key: {rect}"
            key = "4" if turn == violation_turn else "1"
            expected[turn] = rubric.codes[int(key) - 1]
            if turn == turns[len(turns) // 2]:
                tab.mouse.move(1270, 790)
                tab.wait_for_timeout(600)
                SCREENSHOT.parent.mkdir(exist_ok=True)
                tab.screenshot(path=str(SCREENSHOT))
            tab.keyboard.press(key)
            keys_pressed += 1
            tab.wait_for_timeout(250)
            assert _in_view(_focused_rect(tab)), f"after the key on turn {turn}"
        _wait_for_labels(server, case_id, expected, tab=tab)
        assert keys_pressed <= len(turns) + 1
        print(f"\nkeys: {keys_pressed} for {len(turns)} assistant turns, opening included")

        # the page keys scroll the transcript right after a label key
        scroller = """() => {
            let el = document.querySelector('[data-testid="stChatMessage"]');
            while (el && el !== document.body) {
                const s = getComputedStyle(el);
                if (/(auto|scroll)/.test(s.overflowY) && el.scrollHeight > el.clientHeight)
                    return el.scrollTop;
                el = el.parentElement;
            }
            return document.scrollingElement.scrollTop;
        }"""
        tab.keyboard.press("Home")
        before = tab.evaluate(scroller)
        tab.keyboard.press("PageUp")
        tab.wait_for_timeout(300)
        after = tab.evaluate(scroller)
        assert after != before or before == 0, "PageUp did not scroll"

        _settled(tab)
        queue = sorted([*QUEUED, HOSTILE_CASE])
        after = queue.index(case_id) + 1
        unfinished = [
            other
            for other in queue[after:] + queue[:after]
            if len(_labels(server, other)) < len(_assistant_turns(other))
        ]
        tab.keyboard.press("N")  # the next case in one key
        if unfinished:
            tab.wait_for_url(f"**/review?case={unfinished[0]}")
        else:
            state = tab.frame_locator("iframe[title*='review_keys']").locator("#state")
            expect(state).to_have_text("No unfinished case left in your queue.")
        assert not tab.locator('[data-testid="stException"]').count()
    finally:
        context.close()


def test_rationale_key_opens_the_rationale_and_enter_returns(
    server: Served, page: tuple[Any, Traffic]
) -> None:
    tab, _ = page
    case_id = HOSTILE_CASE
    turns = _assistant_turns(case_id)
    before = _label_rows(server, case_id)
    labeled = _labels(server, case_id)
    focused = next((t for t in turns if t not in labeled), turns[0])
    tab.goto(f"{server.url}/review?case={case_id}")
    _settled(tab)
    tab.wait_for_selector('body[data-review-keys="ready"]', state="attached")
    panel = tab.frame_locator("iframe[title*='review_keys']")
    tab.keyboard.press("R")
    editor = panel.locator("#text")
    from playwright.sync_api import expect

    expect(editor).to_be_focused()
    tab.keyboard.type("Said 12 things")  # digits are text here, not labels
    tab.keyboard.press("Enter")
    expect(editor).not_to_be_focused()
    tab.keyboard.press("2")  # the label takes the rationale along
    # generous: a deadline, not a speed check (the machine may be loaded)
    deadline = time.monotonic() + 60
    # on a labeled turn, Enter stores the rationale with its label at once; the key after
    # it is one more label
    added = 2 if focused in labeled else 1
    while len(rows := _label_rows(server, case_id)) < len(before) + added:
        assert time.monotonic() < deadline
        tab.wait_for_timeout(100)  # not time.sleep: the route handler serves the tab
    assert len(rows) == len(before) + added
    assert {row[0] for row in rows[len(before) :]} == {focused}
    reviewer = sign_in(server.engine, name=REVIEWER, auth_mode="local")
    rubric = sync_rubrics(server.engine, operator_actor()).get(RUBRIC)
    mine = case_labels(server.engine, reviewer, case_id=case_id, rubric=rubric).mine
    assert mine[focused].code == rubric.codes[1]
    assert mine[focused].rationale == "Said 12 things"


def test_transcript_markup_stays_inert(server: Served, page: tuple[Any, Traffic]) -> None:
    from playwright.sync_api import expect

    tab, traffic = page
    tab.goto(f"{server.url}/review?case={HOSTILE_CASE}")
    _settled(tab)
    messages = tab.locator('[data-testid="stChatMessage"]')
    expect(messages).to_have_count(12, timeout=30_000)

    shown = tab.locator('[data-testid="stChatMessage"] [data-testid="stText"]').all_inner_texts()
    # each turn is one plain text: header lines, a blank line, the message
    messages_shown = [t.split("\n\n", 1)[-1] for t in shown]
    for text in _hostile_case()["transcript"][:4]:
        assert text["text"] in messages_shown, text["text"][:80]
    assert LONG_LINE in messages_shown

    found = tab.evaluate(
        """() => ({
            pwned: typeof window.__pwned,
            scripts: Array.from(document.querySelectorAll("script"))
                .filter(s => s.textContent.includes("__pwned")).length,
            images: document.querySelectorAll('img[src*="192.0.2.1"]').length,
            javascriptLinks: document.querySelectorAll('a[href^="javascript" i]').length,
        })"""
    )
    assert found == {"pwned": "undefined", "scripts": 0, "images": 0, "javascriptLinks": 0}
    assert not tab.locator('[data-testid="stException"]').count()
    _assert_only_loopback(traffic)


def test_a_key_pressed_while_the_database_is_busy_is_stored_once_it_is_free(
    server: Served, page: tuple[Any, Traffic]
) -> None:
    """The server's save waits its whole busy timeout (30 s) on a lock this test holds,
    then gives up; the panel keeps the key and sends it again by itself once the lock is
    gone: no key is pressed after the release."""
    from playwright.sync_api import expect

    tab, _ = page
    case_id = HOSTILE_CASE
    before = _label_rows(server, case_id)
    rubric = sync_rubrics(server.engine, operator_actor()).get(RUBRIC)
    tab.goto(f"{server.url}/review?case={case_id}")
    _settled(tab)
    tab.wait_for_selector('body[data-review-keys="ready"]', state="attached")
    state = tab.frame_locator("iframe[title*='review_keys']").locator("#state")
    expect(state).to_have_text("all saved ✓")
    with write_lock(Path(server.engine.url.database or "")):
        tab.keyboard.press("1")
        expect(state).to_have_text(
            "Database busy: 1 key press not saved yet; they will be sent again",
            timeout=(SQLITE_BUSY_TIMEOUT_MS + 60_000),
        )
    deadline = time.monotonic() + 60
    while len(rows := _label_rows(server, case_id)) < len(before) + 1:
        assert time.monotonic() < deadline, "the waiting key was not sent again"
        tab.wait_for_timeout(100)
    expect(state).to_have_text("all saved ✓")
    rows = _label_rows(server, case_id)
    assert len(rows) == len(before) + 1, "stored once"
    assert rows[-1][1] == rubric.codes[0]
    assert not tab.locator('[data-testid="stException"]').count()
