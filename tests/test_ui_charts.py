"""The charts of the agreement and judge pages: each drawn from a Vega-Lite spec built once
per distinct input (review_app/ui/charts.py ``vega_lite``), exactly as ``st.altair_chart``
would draw the Altair chart, and never changed by drawing it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from review_app.ui import charts
from tests.ui_support import app_database, demo_template

APP = Path(__file__).resolve().parents[1] / "review_app" / "ui" / "app.py"
ADMIN = "root"
TIMEOUT = 60
BUILDERS = {
    "coefficients_chart",
    "pairwise_kappa_chart",
    "distribution_chart",
    "confusion_chart",
    "drift_chart",
    "coverage_chart",
    "threshold_chart",
    "reliability_chart",
    "confusion_heatmap",  # a reviewer's confusion matrix (reviewer reliability)
    "alpha_periods_chart",  # alpha over time
}


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_template(tmp_path_factory.mktemp("charts") / "ui.db", local_user=ADMIN)


@pytest.fixture
def database(demo_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    with app_database(demo_file, tmp_path, monkeypatch, local_user=ADMIN) as url:
        yield url


def _page(page: str) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.run()
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _both_ways() -> None:
    """Each recorded chart twice: through st.altair_chart, then from its cached spec."""
    import streamlit as st

    from review_app.ui import charts

    for build, args in st.session_state["drawn"]:
        st.altair_chart(build(*args), width="stretch")
        st.vega_lite_chart(spec=charts.vega_lite(build, *args), width="stretch")


def test_charts_are_drawn_as_st_altair_chart_draws_them(
    database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn: list[tuple[Any, tuple[Any, ...]]] = []
    specs: list[dict[str, Any]] = []
    built = charts.vega_lite

    def recording(build: Any, *args: Any) -> dict[str, Any]:
        drawn.append((build, args))
        specs.append(built(build, *args))
        return specs[-1]

    monkeypatch.setattr(charts, "vega_lite", recording)
    for page in ("views/agreement.py", "views/judge.py"):
        _page(page)
    assert {build.__name__ for build, _ in drawn} == BUILDERS
    monkeypatch.setattr(charts, "vega_lite", built)
    # the same input gives the very spec built before (shared, never rebuilt)
    for (build, args), spec in zip(drawn, specs, strict=True):
        assert built(build, *args) is spec
    before = [json.dumps(spec, sort_keys=True) for spec in specs]

    at = AppTest.from_function(_both_ways, default_timeout=TIMEOUT)
    at.session_state["drawn"] = drawn
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    protos = [chart.proto for chart in at.get("vega_lite_chart")]
    assert len(protos) == 2 * len(drawn)
    for (build, _), altair, cached in zip(drawn, protos[::2], protos[1::2], strict=True):
        assert cached == altair, build.__name__
    # drawing a spec leaves it as it was (the next session draws it again)
    assert [json.dumps(spec, sort_keys=True) for spec in specs] == before
