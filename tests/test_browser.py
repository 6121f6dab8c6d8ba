"""The served app in a real browser: Playwright driving Debian's Chromium.

One server (``review-app serve`` in a subprocess) on a demo-loaded SQLite file for
the module, signed in through local mode as ``rita``, a reviewer with two cases in
her queue. Skipped when Chromium or the ``playwright`` package is missing, unless
``REVIEW_APP_REQUIRE_BROWSER=1`` makes that a failure. Every request the page makes
is recorded; anything leaving loopback is blocked and fails the test.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from sqlalchemy import Engine

from review_app.services.demo import DEMO_CASES, load_demo
from review_app.services.importing import import_paths
from review_app.services.labeling import case_labels
from review_app.services.people import Actor, add_person, operator_actor, sign_in
from review_app.services.queue import assign_cases
from review_app.services.rubric_catalog import sync_rubrics
from storage.engine import create_database_engine
from storage.migrations import upgrade_database
from tests.conftest import review_app_command

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
SCREENSHOT = REPO / "docs" / "review-page.png"
REVIEWER = "rita"
RUBRIC = "role-adherence@1"
QUEUED = ["support-clean-late-parcel", "support-delayed-refund-violation"]
HOSTILE_CASE = "hostile-markup"
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
LONG_LINE = "".join(f"{i:05d} " for i in range(20_000 // 6)).ljust(20_000, "x")


def _require_browser() -> None:
    problem = None
    if not CHROMIUM.exists():
        problem = f"{CHROMIUM} is missing"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            problem = "the playwright package is not installed"
    if problem is None:
        return
    if os.environ.get("REVIEW_APP_REQUIRE_BROWSER", "").strip().lower() in ("1", "true", "yes"):
        pytest.fail(f"{problem} (REVIEW_APP_REQUIRE_BROWSER=1)")
    pytest.skip(problem)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


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


@dataclass
class Server:
    url: str
    engine: Engine
    log: Path


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    _require_browser()
    root = tmp_path_factory.mktemp("served")
    database = f"sqlite:///{root / 'review.db'}"
    engine = create_database_engine(database)
    upgrade_database(engine)
    load_demo(engine, operator_actor())
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

    port = _free_port()
    environment = dict(os.environ)
    environment.update(
        {
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(REPO), environment.get("PYTHONPATH", "")) if p
            ),
            "REVIEW_APP_DATABASE_URL": database,
            "REVIEW_APP_AUTH": "local",
            "REVIEW_APP_LOCAL_USER": REVIEWER,
            "HOME": str(root / "home"),
        }
    )
    environment.pop("REVIEW_APP_RUBRICS_DIR", None)
    log = root / "server.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [*review_app_command(), "serve", "--port", str(port), "--host", "127.0.0.1"],
            stdout=output,
            stderr=subprocess.STDOUT,
            env=environment,
            cwd=root,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                pytest.fail(f"the server exited with {process.returncode}:\n{log.read_text()}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the server did not answer within 60 s:\n{log.read_text()}")
            time.sleep(0.2)
        yield Server(url, engine, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        engine.dispose()


@pytest.fixture(scope="module")
def browser(server: Server) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


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


def _labels(server: Server, case_id: str) -> dict[int, str]:
    reviewer = sign_in(server.engine, name=REVIEWER, auth_mode="local")
    rubric = sync_rubrics(server.engine, operator_actor()).get(RUBRIC)
    found = case_labels(server.engine, reviewer, case_id=case_id, rubric=rubric)
    return {turn: row.code for turn, row in found.mine.items()}


def _wait_for_labels(server: Server, case_id: str, expected: dict[int, str]) -> None:
    deadline = time.monotonic() + 15
    while (found := _labels(server, case_id)) != expected:
        assert time.monotonic() < deadline, f"stored {found}, expected {expected}"
        time.sleep(0.1)


def _assert_only_loopback(traffic: Traffic) -> None:
    assert traffic.requested, "the recorder saw no requests at all"
    assert traffic.blocked == []
    assert [url for url in traffic.requested if not _stays_local(url)] == []


def test_reviewer_opens_a_case_and_labels_with_the_keyboard(
    server: Server, page: tuple[Any, Traffic]
) -> None:
    from playwright.sync_api import expect

    tab, traffic = page
    case_id = "support-delayed-refund-violation"
    tab.goto(f"{server.url}/")
    _settled(tab)
    link = tab.get_by_role("link", name=case_id)
    expect(link).to_be_visible(timeout=30_000)
    expect(tab.locator('[data-testid="stPageLink"]')).to_have_count(
        len(QUEUED) + 1
    )  # and the hostile case
    link.click()
    tab.wait_for_url(f"**/review?case={case_id}")
    _settled(tab)

    messages = tab.locator('[data-testid="stChatMessage"]')
    expect(messages).to_have_count(12, timeout=30_000)
    errors = tab.locator('[data-testid="stChatMessage"] [data-testid="stAlertContentError"]')
    expect(errors).to_have_count(1)
    turn_8 = messages.filter(has_text="turn 8 ·")
    violation = turn_8.locator('[data-testid="stAlertContentError"]')
    expect(violation).to_contain_text("Violation")
    expect(violation).to_contain_text("refund_order")
    expect(violation).to_contain_text("support_triage")

    sidebar = tab.locator('[data-testid="stSidebar"]')
    heading = sidebar.locator("h3").first
    expect(heading).to_have_text("Turn 2")
    # the shortcuts are live once the label buttons are drawn
    expect(sidebar.get_by_role("button", name="in_role")).to_be_visible()
    tab.keyboard.press("1")  # in_role
    _wait_for_labels(server, case_id, {2: "in_role"})
    expect(heading).to_have_text("Turn 4")
    _settled(tab)
    tab.keyboard.press("4")  # authority_break
    _wait_for_labels(server, case_id, {2: "in_role", 4: "authority_break"})
    expect(heading).to_have_text("Turn 6")
    expect(sidebar).to_contain_text("2 of 6 turns labeled by you")

    # a fresh session for the picture (no toasts), labeling the violating turn
    tab.goto(f"{server.url}/review?case={case_id}")
    _settled(tab)
    expect(messages).to_have_count(12, timeout=30_000)
    expect(heading).to_have_text("Turn 6")  # the first turn this reviewer has not labeled
    next_turn = sidebar.get_by_role("button", name="Turn ▶")
    expect(next_turn).to_be_visible()
    _settled(tab)
    # a key pressed the instant a run settles is sometimes dropped: press until it moves
    for _ in range(5):
        tab.keyboard.press("J")  # next turn
        try:
            expect(heading).to_have_text("Turn 8", timeout=3_000)
            break
        except AssertionError:
            _settled(tab)
    expect(heading).to_have_text("Turn 8")
    _settled(tab)
    # the same picture every run: turns 7 and 8 at the top, the pointer out of the way
    tab.mouse.move(1300, 600)
    messages.filter(has_text="turn 7 ·").evaluate(
        "element => { element.style.scrollMarginTop = '90px';"
        " element.scrollIntoView({block: 'start'}); }"
    )
    tab.wait_for_timeout(1000)  # the progress bar's width animation
    SCREENSHOT.parent.mkdir(exist_ok=True)
    tab.screenshot(path=str(SCREENSHOT))
    assert not tab.locator('[data-testid="stException"]').count()
    _assert_only_loopback(traffic)


def test_transcript_markup_stays_inert(server: Server, page: tuple[Any, Traffic]) -> None:
    from playwright.sync_api import expect

    tab, traffic = page
    tab.goto(f"{server.url}/review?case={HOSTILE_CASE}")
    _settled(tab)
    messages = tab.locator('[data-testid="stChatMessage"]')
    expect(messages).to_have_count(12, timeout=30_000)

    shown = tab.locator('[data-testid="stChatMessage"] [data-testid="stText"]').all_inner_texts()
    for text in _hostile_case()["transcript"][:4]:
        assert text["text"] in shown, text["text"][:80]
    assert LONG_LINE in shown

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
