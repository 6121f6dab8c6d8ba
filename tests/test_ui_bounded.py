"""What a policy-owner page sends to the browser does not grow with the data (issue 23).

The demo grown to a few hundred conversations (``benchmarks/large_db.py``, every copy
labeled, gold on many) has hundreds of units where the two prompt versions of the judge
differ, and hundreds of disagreements: a page shows the first rows of such lists (a
download holds the rest), never a table of every unit. Checked on the elements of a warm
run (AppTest): no table sends more than ``MOST_ROWS`` rows, no chart more than
``MOST_CHART_BYTES``, and the judge page's whole run stays under ``MOST_BYTES``
(the judge page sent a 213 KB table of every unit where the prompt versions differ at
20,000 conversations; about 55 KB in all here once it shows the first rows).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from benchmarks.large_db import build_large_database
from review_app.ui.common import FIRST_ROWS
from tests.ui_support import app_database

APP = Path(__file__).resolve().parents[1] / "review_app" / "ui" / "app.py"

MOST_ROWS = FIRST_ROWS
MOST_CHART_BYTES = 40_000
MOST_BYTES = 120_000
PAGES = ("agreement", "judge", "adjudicate", "queue")


@pytest.fixture(scope="module")
def grown_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("grown") / "grown.db"
    build_large_database(path, n_cases=600, labeled=600, gold=300, local_user="admin")
    return path


@pytest.fixture
def database_url(
    grown_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    with app_database(grown_file, tmp_path, monkeypatch, local_user="admin") as url:
        yield url


def elements(node: Any) -> Iterator[Any]:
    children = getattr(node, "children", None)
    if isinstance(children, dict):
        for child in children.values():
            yield from elements(child)
    else:
        yield node


def rows_sent(element: Any) -> int | None:
    """The rows of a table element (Arrow data), else None."""
    if element.type == "dataframe":
        return len(element.value)
    return None


def chart_bytes(element: Any) -> int | None:
    """The bytes of a Vega-Lite chart element (its spec and data), else None."""
    if element.type != "vega_lite_chart":
        return None
    return int(element.proto.ByteSize())


@pytest.mark.parametrize("page", PAGES)
def test_a_page_sends_bounded_tables_and_charts(database_url: str, page: str) -> None:
    at = AppTest.from_file(str(APP), default_timeout=300)
    at.run()
    at.switch_page(f"views/{page}.py").run()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    found = list(elements(at._tree))
    tables = [(e.key, n) for e in found if (n := rows_sent(e)) is not None]
    assert all(n <= MOST_ROWS for _, n in tables), tables
    charts = [n for e in found if (n := chart_bytes(e)) is not None]
    assert all(n <= MOST_CHART_BYTES for n in charts), charts
    sent = sum(e.proto.ByteSize() for e in found if getattr(e, "proto", None) is not None)
    assert sent <= MOST_BYTES, sent


def test_the_judge_page_offers_every_difference_as_a_download(database_url: str) -> None:
    at = AppTest.from_file(str(APP), default_timeout=300)
    at.run()
    at.switch_page("views/judge.py").run()
    assert not at.exception, [e.value for e in at.exception]
    captions = [c.value for c in at.caption]
    # the grown database has more differing units than the table shows
    assert any(c.startswith(f"The first {FIRST_ROWS} of ") for c in captions), captions
