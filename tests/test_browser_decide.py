"""The policy owner's decision pages at 1280x800 in Chromium: nothing scrolls sideways.

One server on a demo-loaded SQLite file, signed in through local mode as ``lee``, an
admin. Each page is opened by its address, every expander is opened, then the page and
each table (Glide data grids scroll inside their own box) must fit their width.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from review_app.services.access.actors import operator_actor
from review_app.services.exchange.demo import load_demo
from storage.engine import create_database_engine
from storage.migrations.upgrade import upgrade_database
from tests.served import IDLE, chromium, free_port, require_browser, serving, wait_healthy

pytestmark = pytest.mark.browser

USER = "lee"
WIDTH, HEIGHT = 1280, 800

# Each visible data grid: its scroll box's widths, and how far it reaches past its
# container (the main block's content box).
MEASURE = """() => {
  const main = document.querySelector('[data-testid="stMainBlockContainer"]')
    || document.querySelector('section.main') || document.body;
  const right = main.getBoundingClientRect().right;
  return Array.from(document.querySelectorAll('[data-testid="stDataFrame"]'))
    .filter((grid) => grid.offsetParent !== null && grid.clientWidth > 0)
    .map((grid) => {
      const scroller = grid.querySelector('.dvn-scroller');
      return {
        columns: Array.from(grid.querySelectorAll('[role="columnheader"]'))
          .map((h) => h.textContent).join(' | '),
        scroll: scroller ? scroller.scrollWidth : 0,
        client: scroller ? scroller.clientWidth : 0,
        overflow: grid.getBoundingClientRect().right - right,
      };
    });
}"""


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require_browser()
    root = tmp_path_factory.mktemp("decide")
    database = f"sqlite:///{root / 'review.db'}"
    engine = create_database_engine(database)
    upgrade_database(engine)
    load_demo(engine, operator_actor(), local_user=USER)
    engine.dispose()
    port = free_port()
    address = f"http://127.0.0.1:{port}"
    with serving(database, root, port=port, user=USER) as (process, log):
        wait_healthy(address, process, log)
        yield address


@pytest.fixture(scope="module")
def browser(url: str) -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.mark.parametrize(
    ("page", "sentence"), [("agreement", "alpha "), ("judge", "replace a reviewer")]
)
def test_the_decision_pages_fit_1280_pixels(
    url: str, browser: Any, page: str, sentence: str
) -> None:
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    try:
        tab = context.new_page()
        tab.goto(f"{url}/{page}")
        tab.wait_for_selector(IDLE, timeout=60_000)
        tab.wait_for_selector('[data-testid="stDataFrame"]', state="attached", timeout=60_000)
        headings = tab.locator("h3").all_inner_texts()
        assert any(sentence in heading for heading in headings), headings
        assert not tab.locator('[data-testid="stException"]').count()
        for summary in tab.locator('[data-testid="stExpander"] summary').all():
            summary.click()
        tab.wait_for_selector(IDLE, timeout=60_000)
        tab.wait_for_timeout(1_000)  # the grids inside lay out
        width = tab.evaluate("() => document.documentElement.scrollWidth")
        assert width <= tab.evaluate("() => window.innerWidth")
        grids = tab.evaluate(MEASURE)
        assert grids, "tables to measure"
        wide = [g for g in grids if g["scroll"] > g["client"] + 1 or g["overflow"] > 1]
        assert not wide, wide
        body = tab.locator('[data-testid="stMain"]').inner_text()
        for internal in ("field --", "fit_calibration_map", "None", "Traceback"):
            assert internal not in body, internal
    finally:
        context.close()
