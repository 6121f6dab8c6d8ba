"""Every policy-owner page in Chromium, on the demo and on 100,000 conversations.

Issue 21: at 1280x800 and 1920x1080, on the demo and on a database of 100,000 cases
(``benchmarks/large_db.py``: the demo grown inside SQLite, a judge run over every
assistant turn, three reviewers' labels on 2,000 cases, gold on 500), each page opened
by its address, signed in through local mode as ``lee`` (an admin), must show:

- no horizontal scroll: the document is no wider than the window, and no element of
  the main block reaches past its right edge (tables scroll inside their own box);
- no traceback and no "Something went wrong" (the app's catch-all), nothing in the
  server's log;
- no internal text: the patterns in :data:`INTERNAL` (command-line flags in messages,
  Python names, raw ``None``/``nan`` cells, metric ids such as ``cohen_kappa``, reviewer
  pair ids ``ana|ben``, 64-character hashes, p-values with a dozen decimals), in the
  page's text or in its tables' cells;
- its decision sentence (agreement: "alpha ...", judge: "May this judge replace a reviewer?").

The large database is built once per module (about 20 s).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.bench_pages_large import PAGES, Page, open_page, two_servers
from benchmarks.large_db import build_large_database, load_demo_database
from tests.served import IDLE, chromium, require_browser

N_CASES = 100_000
SIZES = {"1920x1080": (1920, 1080), "1280x800": (1280, 800)}

INTERNAL = {
    "a command-line flag in a message": re.compile(r"\w --[a-z]+[:=]"),
    "a Python function name": re.compile(r"\b(fit_calibration_map|[a-z]+_[a-z_]+\(\))"),
    "a raw None or nan": re.compile(r"(^|[\s|(,:])(None|nan|NaN|null)($|[\s|),])"),
    "a metric id": re.compile(
        r"\b(cohen_kappa|fleiss_kappa|krippendorff_alpha|percent_agreement|scott_pi|"
        r"gwet_ac1|n_units|ci_low|ci_high|p_value|brier_score|expected_calibration_error|"
        r"break_rate|winning_rate)\b"
    ),
    "a reviewer pair id": re.compile(r"\b[a-z]+\|[a-z]+\b"),
    "a hash": re.compile(r"\b[0-9a-f]{64}\b"),
    "an unrounded number": re.compile(r"\d\.\d{7,}"),
    "a traceback": re.compile(r"Traceback \(most recent call last\)|Something went wrong"),
}

# Per page: the document's and the window's widths; elements of the main block
# reaching past its right edge; data grids whose scroll box is wider than their box;
# the text of the main block and of every grid cell.
MEASURE = """() => {
  const main = document.querySelector('[data-testid="stMainBlockContainer"]');
  const box = main.getBoundingClientRect();
  const scrolling = document.scrollingElement;
  const past = Array.from(main.querySelectorAll('*'))
    .filter((e) => e.offsetParent !== null && !e.closest('.dvn-scroller'))
    .map((e) => [e, e.getBoundingClientRect()])
    .filter(([e, r]) => r.width > 0 && r.right > box.right + 1)
    .map(([e, r]) => (e.getAttribute('data-testid') || e.tagName) + ' ' +
      Math.round(r.right - box.right) + 'px: ' + (e.textContent || '').slice(0, 60));
  const grids = Array.from(main.querySelectorAll('[data-testid="stDataFrame"]'))
    .filter((g) => g.offsetParent !== null)
    .map((g) => {
      const s = g.querySelector('.dvn-scroller');
      return {
        columns: Array.from(g.querySelectorAll('[role="columnheader"]'))
          .map((h) => h.textContent).join(' | '),
        scroll: s ? s.scrollWidth : 0,
        client: s ? s.clientWidth : 0,
      };
    });
  const cells = Array.from(main.querySelectorAll('[role="gridcell"], [role="columnheader"]'))
    .map((c) => c.textContent);
  return {
    document: scrolling.scrollWidth, window: scrolling.clientWidth,
    past: past.slice(0, 10), grids: grids, cells: cells,
    text: main.innerText,
  };
}"""


GRIDS = """() => {
  const grids = Array.from(document.querySelectorAll('[data-testid="stDataFrame"]'))
    .filter((g) => g.offsetParent !== null && !g.closest('details:not([open])'));
  const drawn = grids.filter((g) => g.querySelector('[role="columnheader"]'));
  return [grids.length, drawn.length];
}"""


def settle_grids(tab: Any, *, seconds: float = 30) -> None:
    """Until every visible data grid has drawn its header and their count held for 1.5 s (the
    grids are drawn after the script's run, the first one once its code has loaded)."""
    deadline = time.monotonic() + seconds
    seen, since = None, time.monotonic()
    while time.monotonic() < deadline:
        counts = tab.evaluate(GRIDS)
        if counts != seen:
            seen, since = counts, time.monotonic()
        elif counts[0] == counts[1] and time.monotonic() - since >= 1.5:
            return
        tab.wait_for_timeout(250)
    raise AssertionError(f"the data grids did not settle (found, drawn): {seen}")


def page_problems(tab: Any, page: Page) -> list[str]:
    """What is wrong with the settled page in ``tab`` (empty: nothing)."""
    problems = []
    if tab.locator('[data-testid="stException"]').count():
        problems.append("a traceback (stException)")
    for summary in tab.locator('[data-testid="stMain"] [data-testid="stExpander"] summary').all():
        summary.click()
    tab.wait_for_selector(IDLE, state="attached", timeout=60_000)
    settle_grids(tab)
    found = tab.evaluate(MEASURE)
    if found["document"] > found["window"]:
        problems.append(f"scrolls sideways: {found['document']} > {found['window']} px")
    problems += [f"past the main block: {element}" for element in found["past"]]
    problems += [
        f"a table scrolls sideways ({grid['scroll']} > {grid['client']} px): {grid['columns']}"
        for grid in found["grids"]
        if grid["scroll"] > grid["client"] + 1
    ]
    texts = [found["text"], *found["cells"]]
    for what, pattern in INTERNAL.items():
        for text in texts:
            match = pattern.search(text)
            if match:
                start = max(0, match.start() - 40)
                problems.append(f"{what}: ...{text[start : match.end() + 40]!r}...")
                break
    if page.sentence is not None:
        headings = tab.locator('[data-testid="stMain"] h3').all_inner_texts()
        if not any(page.sentence in heading for heading in headings):
            problems.append(f"no decision sentence ({page.sentence!r}) in {headings}")
    return problems


@pytest.fixture(scope="module")
def databases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    require_browser()
    root = tmp_path_factory.mktemp("wide")
    demo, large = root / "demo.db", root / "large.db"
    load_demo_database(demo)
    build_large_database(large, n_cases=N_CASES)
    return {"demo": demo, "100k": large}


@pytest.fixture(scope="module")
def servers(
    databases: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, tuple[str, Path]]]:
    """Per database: the address of a local-mode server signed in as ``lee``, its log."""
    with two_servers(tmp_path_factory.mktemp("servers"), databases) as found:
        yield found


@pytest.fixture(scope="module")
def browser(servers: dict[str, tuple[str, Path]]) -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("database", ["100k", "demo"])
def test_every_policy_owner_page_fits_and_speaks_plainly(
    servers: dict[str, tuple[str, Path]], browser: Any, database: str, size: str
) -> None:
    address, log = servers[database]
    width, height = SIZES[size]
    problems = {}
    for page in PAGES:
        context = browser.new_context(viewport={"width": width, "height": height})
        try:
            tab, _ = open_page(context, address, page, timeout_ms=180_000)
            found = page_problems(tab, page)
        finally:
            context.close()
        if found:
            problems[page.name] = found
    logged = log.read_text()
    assert "failed" not in logged, logged[logged.index("failed") - 200 :][:3000]
    assert not problems, problems


@pytest.mark.parametrize(
    "text",
    [
        "field --run: fit_calibration_map needs at least 5 units of each class for cv=5",
        "cohen_kappa ana|rita: fewer than 30 pairable units",
        "p = 0.000000000000006",
        "None",
        "role_instruction_mismatch: " + "a" * 64,
    ],
)
def test_the_patterns_catch_what_the_issue_names(text: str) -> None:
    assert any(pattern.search(text) for pattern in INTERNAL.values())


@pytest.mark.parametrize(
    "text",
    [
        "alpha 0.35 [0.22, 0.44]: reviewers agree on codes only fairly",
        "None.",
        "scope_break, in_role",
        "p < 0.001",
        "run `review-app judge run --run 2`",
    ],
)
def test_the_patterns_leave_plain_text_alone(text: str) -> None:
    assert not any(pattern.search(text) for pattern in INTERNAL.values())
