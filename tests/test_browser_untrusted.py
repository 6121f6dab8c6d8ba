"""Nothing of the server or of another host reaches a page: Chromium, proxy sign-in, on
SQLite and on PostgreSQL.

A local image server on loopback counts every request. The address reflects a Markdown
image and a Markdown link into the review page's "no case" answer; a stored case's id
is a Markdown image (no space, so the id rules let it in) and is listed on the queue,
the adjudication list, the adjudication heading and the agreement page. Each page must
make 0 requests to the image server and draw no link to it. On PostgreSQL,
``/review?case=%00`` (a NUL, which PostgreSQL refuses) must answer "no case" like
SQLite, with no traceback and no server path on the page.
"""

from __future__ import annotations

import copy
import json
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from sqlalchemy import Engine

from review_app.services.access.actors import Actor, operator_actor, sign_in
from review_app.services.cases.importing import import_paths
from review_app.services.exchange.demo import DEMO_CASES, load_demo
from review_app.services.labels.labeling import record_label
from review_app.services.rubrics.rubric_catalog import sync_rubrics
from review_app.services.team.queue import assign_cases
from storage.engine import create_database_engine
from storage.migrations.upgrade import upgrade_database
from tests.conftest import postgres_schema
from tests.served import IDLE, chromium, free_port, require_browser, serving, wait_healthy

pytestmark = pytest.mark.browser

RUBRIC = "role-adherence@1"
OWNER = "olivia"  # the demo's policy owner, signed in by the proxy's header
# A 1x1 transparent PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d4944415478da63f8ffff3f0005fe02fea7d6a4a80000000049454e44ae426082"
)


class Images:
    """An HTTP server on loopback that answers every GET with a PNG and counts them."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        images = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                images.requests.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.send_header("Content-Length", str(len(PNG)))
                self.end_headers()
                self.wfile.write(PNG)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class Served:
    url: str
    images: Images
    stored_id: str
    kind: str
    log: Path


def _prepare(database: str, images: Images) -> str:
    """The demo, plus a case whose id is a Markdown image, in olivia's queue and in
    ana's and ben's, labeled apart (so it is a disagreement to adjudicate)."""
    engine = create_database_engine(database)
    try:
        upgrade_database(engine)
        operator = operator_actor()
        load_demo(engine, operator)
        stored_id = f"![]({images.base}/x.png)"
        case = copy.deepcopy(
            json.loads((DEMO_CASES / "support-delayed-refund-violation.json").read_text())
        )
        case["case_id"] = stored_id
        with tempfile.TemporaryDirectory() as directory:
            path = Path(directory) / "markdown-id.jsonl"
            path.write_text(json.dumps(case) + "\n")
            import_paths(engine, operator, [path])
        _queue_and_label(engine, stored_id)
        return stored_id
    finally:
        engine.dispose()


def _queue_and_label(engine: Engine, stored_id: str) -> None:
    rubric = sync_rubrics(engine, operator_actor()).get(RUBRIC)
    assign_cases(
        engine,
        Actor.operator(),
        rubric=rubric,
        reviewers=["ana", "ben", OWNER],
        overlap=10,
        case_ids=[stored_id],
    )
    for name, code in (("ana", "in_role"), ("ben", "tone_break")):
        who = sign_in(engine, name=name, auth_mode="proxy")
        record_label(engine, who, case_id=stored_id, turn=2, rubric=rubric, code=code)


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    require_browser()
    images = Images()
    root = tmp_path_factory.mktemp(f"untrusted-{request.param}")
    try:
        with _database(request.param, root) as database:
            stored_id = _prepare(database, images)
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            with serving(database, root, port=port, user=None, auth="proxy") as (process, log):
                wait_healthy(url, process, log)
                yield Served(url, images, stored_id, request.param, log)
    finally:
        images.close()


def _database(kind: str, root: Path) -> AbstractContextManager[str]:
    if kind == "sqlite":
        return nullcontext(f"sqlite:///{root / 'review.db'}")
    return postgres_schema()


@pytest.fixture(scope="module")
def browser(served: Served) -> Iterator[Any]:
    with chromium() as launched:
        yield launched


def _open(browser: Any, served: Served, address: str, shown: str) -> tuple[str, Any]:
    """The page at ``address`` signed in as the policy owner through the proxy's
    header, once it shows ``shown`` (60 s at most, for a loaded machine): its text,
    and (context, page) for the caller to close."""
    context = browser.new_context(
        viewport={"width": 1400, "height": 1000}, extra_http_headers={"X-Forwarded-User": OWNER}
    )
    tab = context.new_page()
    tab.goto(f"{served.url}/{address}")
    deadline = time.monotonic() + 60
    while True:
        tab.wait_for_selector(IDLE, timeout=60_000)
        # without the invisible word joiners that keep an address in text from being linked
        body: str = tab.locator("body").inner_text().replace("\u2060", "")
        if shown in body or time.monotonic() > deadline:
            break
        tab.wait_for_timeout(250)
    tab.wait_for_timeout(500)  # an image in the page would be requested by now
    return body, (context, tab)


def _nothing_from_the_image_host(served: Served, tab: Any) -> None:
    host = f"127.0.0.1:{served.images.port}"
    assert served.images.requests == [], "the page fetched an image named in text"
    assert tab.locator(f'img[src*="{host}"]').count() == 0
    links = tab.locator(f'a[href*="{host}"]')
    assert links.count() == 0, [
        links.nth(i).evaluate("e => e.outerHTML") for i in range(links.count())
    ]


def test_text_from_the_address_or_the_data_stays_text(served: Served, browser: Any) -> None:
    stored = served.stored_id
    reflected_image = f"![x]({served.images.base}/p.png)"
    reflected_link = f"[Session expired]({served.images.base}/)"
    visits = [
        # the queue (olivia has the stored case in her queue): its link's label
        ("", stored),
        # the adjudication list, then the unit's heading
        ("adjudicate", f"{stored} · turn 2"),
        (f"adjudicate?case={quote(stored, safe='')}&turn=2", f"{stored} · turn 2"),
        # the agreement page's disagreements
        ("agreement", f"{stored} · turn 2"),
        # the case itself (its id in the heading, a code span)
        (f"review?case={quote(stored, safe='')}", stored),
        # reflected from the address into the "no case" answer
        (f"review?case={quote(reflected_image, safe='')}", reflected_image),
        (f"review?case={quote(reflected_link, safe='')}", reflected_link),
    ]
    for address, shown in visits:
        body, (context, tab) = _open(browser, served, address, shown)
        try:
            assert shown in body, (address, body[:2000])
            _nothing_from_the_image_host(served, tab)
            assert tab.locator('[data-testid="stException"]').count() == 0, address
        finally:
            context.close()


def test_a_nul_in_the_address_is_no_case_without_a_traceback(served: Served, browser: Any) -> None:
    """PostgreSQL refuses a NUL in text: this was ``sqlalchemy.exc.DataError`` and a
    traceback naming ``review_app/ui/app.py`` and ``storage/access.py``."""
    answer = "no case '\\x00' in the database"
    body, (context, tab) = _open(browser, served, "review?case=%00", answer)
    try:
        assert answer in body, body[:2000]
        for leak in ("Traceback", "DataError", "sqlalchemy", ".py", "/review_app", "storage/"):
            assert leak not in body, (leak, body[:2000])
        assert tab.locator('[data-testid="stException"]').count() == 0
    finally:
        context.close()
