"""Altair charts for the dashboards: plain rows in, a chart out (no data access here)."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, cast

import altair as alt

from review_app.calibration.scores import ReliabilityReport, ThresholdSweep
from review_app.stats.alt_test import AltTestResult, ReviewerTest, SkippedReviewer
from review_app.stats.core import Estimate
from review_app.ui import readings

if TYPE_CHECKING:
    from review_app.agreement.summary import PairKappaJson
    from review_app.calibration.scores import ReliabilityJson, ThresholdSweepJson
    from review_app.calibration.versions import VersionDifferenceJson
    from review_app.services.judging.drift import AgreementFigures, DriftReport
    from review_app.services.judging.judge_report import JudgeRunReport
    from review_app.services.judging.selective import CoverageCurve
    from review_app.services.review.agreement_reports import AgreementReport, ConfusionCell
    from review_app.stats.alt_test import AltTestJson

COEFFICIENT_NAMES = readings.NAMES

FULL_LABELS = alt.Axis(labelLimit=0, labelOverlap=False)
"""An axis whose labels are never cut short (Vega-Lite cuts them at 180 px by default)
nor left out where they would overlap (every code is named)."""
EVERY_ENTRY = alt.Legend(labelLimit=0, symbolLimit=0, orient="bottom", columns=3)
"""A legend listing every entry in full, below the chart (beside it, a short chart's
legend drops the entries that do not fit its height)."""

_SPECS: OrderedDict[str, dict[str, Any]] = OrderedDict()
_SPECS_LOCK = threading.Lock()
_SPECS_MAX = 64
_THEME_LOCK = threading.Lock()


def vega_lite(build: Callable[..., alt.TopLevelMixin], *args: Any) -> dict[str, Any]:
    """The Vega-Lite spec of the chart ``build(*args)``, for ``st.vega_lite_chart``: built
    once per distinct input in this process, shared between sessions (read-only).

    ``st.altair_chart`` builds and validates the Altair chart again at every run (on the
    demo: 0.1-0.3 s of a warm agreement or judge page), though its rows come from reports
    that change only with the data. Converted as ``st.altair_chart`` converts: without
    Altair's default theme, which sets sizes Streamlit does not want
    (tests/test_ui_charts.py compares the two).
    """
    key = f"{build.__qualname__}:{json.dumps(args, sort_keys=True, default=repr)}"
    with _SPECS_LOCK:
        found = _SPECS.get(key)
        if found is not None:
            _SPECS.move_to_end(key)
            return found
    chart = build(*args)
    # The theme is global to the process: one conversion at a time.
    with _THEME_LOCK:
        theme = alt.theme.enable("none") if alt.theme.active == "default" else nullcontext()
        with theme:
            spec: dict[str, Any] = chart.to_dict()
    with _SPECS_LOCK:
        _SPECS[key] = spec
        while len(_SPECS) > _SPECS_MAX:
            _SPECS.popitem(last=False)
    return spec


def coefficient_rows(reports: Mapping[str, AgreementReport]) -> list[dict[str, Any]]:
    """One row per (rubric version, coefficient) resting on enough units, for the chart.

    A coefficient on fewer than ``readings.MIN_UNITS`` units is not plotted: the table
    (:func:`coefficient_table_rows`) says "not enough data (n units)" instead.
    """
    rows = []
    for ref, report in reports.items():
        for key, name in COEFFICIENT_NAMES.items():
            coefficient = Estimate.from_dict(report[key])
            if not readings.enough(coefficient):
                continue
            ci = coefficient.ci95
            rows.append(
                {
                    "rubric": ref,
                    "coefficient": name,
                    "value": coefficient.value,
                    "low": ci[0] if ci else None,
                    "high": ci[1] if ci else None,
                    "units": coefficient.n,
                }
            )
    return rows


def coefficient_table_rows(reports: Mapping[str, AgreementReport]) -> list[dict[str, Any]]:
    """One row per (rubric version, coefficient) as text: value, interval, units."""
    return [
        {
            "rubric": ref,
            "coefficient": name,
            "value": readings.figure_text(replace(coefficient, ci95=None)),
            "95% interval": readings.interval_text(coefficient),
            "units": coefficient.n,
        }
        for ref, report in reports.items()
        for key, name in COEFFICIENT_NAMES.items()
        for coefficient in [Estimate.from_dict(report[key])]
    ]


def coefficients_chart(rows: list[dict[str, Any]]) -> alt.LayerChart:
    # Null values (no coefficient, no interval) would make Vega log "Infinite extent":
    # each layer gets only the rows it can draw, on a fixed domain.
    shown = [row for row in rows if row["value"] is not None]
    intervals = [row for row in shown if row["low"] is not None and row["high"] is not None]
    domain = alt.Scale(domain=[-0.2, 1])

    def base(values: list[dict[str, Any]]) -> alt.Chart:
        return alt.Chart(alt.Data(values=values)).encode(
            y=alt.Y("coefficient:N", title=None, axis=FULL_LABELS),
            yOffset="rubric:N",
            color=alt.Color("rubric:N", title="rubric version", legend=EVERY_ENTRY),
        )

    points = (
        base(shown)
        .mark_point(filled=True, size=80)
        .encode(
            x=alt.X("value:Q", scale=domain, title="value"),
            tooltip=["rubric:N", "coefficient:N", alt.Tooltip("value:Q", format=".3f"), "units:Q"],
        )
    )
    layers = [points]
    if intervals:
        bars = (
            base(intervals)
            .mark_rule(strokeWidth=2)
            .encode(x=alt.X("low:Q", scale=domain), x2="high:Q")
        )
        layers.insert(0, bars)
    return cast(alt.LayerChart, alt.layer(*layers).properties(height=alt.Step(14)))


def pairwise_kappa_rows(cohen: Mapping[str, PairKappaJson]) -> list[dict[str, Any]]:
    """One row per pair of reviewers: kappa, its interval, its units (as text)."""
    return [
        {
            "reviewers": " and ".join(pair.split("|", 1)),
            "kappa": readings.figure_text(replace(coefficient, ci95=None)),
            "95% interval": readings.interval_text(coefficient),
            "units": coefficient.n,
        }
        for pair, kappa in cohen.items()
        for coefficient in [Estimate.from_dict(kappa)]
    ]


def interval_caption(report: AgreementReport) -> str | None:
    """How the pair kappas' intervals were made (``None`` when none has one)."""
    methods = sorted({m for c in report["cohen_kappa"].values() if (m := c["method"])})
    if not methods:
        return None
    return f"{report['bootstrap']['confidence']:.0%} intervals: {'; '.join(methods)}"


def pairwise_kappa_chart(cohen: Mapping[str, PairKappaJson]) -> alt.LayerChart:
    rows = []
    for pair, kappa in cohen.items():
        first, second = pair.split("|", 1)
        coefficient = Estimate.from_dict(kappa)
        # Too few shared turns: an empty cell, never a colour (readings.enough).
        value = coefficient.value if readings.enough(coefficient) else None
        for a, b in ((first, second), (second, first)):
            rows.append(
                {
                    "reviewer_a": a,
                    "reviewer_b": b,
                    "kappa": value,
                    "units": coefficient.n,
                    "text": "—" if value is None else f"{value:.2f}",
                }
            )
    base = alt.Chart(alt.Data(values=rows)).encode(
        x=alt.X("reviewer_a:N", title=None, axis=FULL_LABELS),
        y=alt.Y("reviewer_b:N", title=None, axis=FULL_LABELS),
    )
    cells = base.mark_rect().encode(
        color=alt.Color("kappa:Q", scale=alt.Scale(domain=[-0.2, 1], scheme="blues")),
        tooltip=["reviewer_a:N", "reviewer_b:N", "kappa:Q", "units:Q"],
    )
    return cast(alt.LayerChart, alt.layer(cells, base.mark_text().encode(text="text:N")))


def distribution_chart(rows: list[dict[str, Any]]) -> alt.Chart:
    """Each reviewer's labels as shares of a bar; the legend lists every code."""
    codes = sorted({str(row["code"]) for row in rows})
    return (
        alt.Chart(alt.Data(values=rows))
        .mark_bar()
        .encode(
            y=alt.Y("reviewer:N", title=None, axis=FULL_LABELS),
            x=alt.X("share:Q", stack="normalize", title="share of the reviewer's labels"),
            color=alt.Color(
                "code:N",
                title="label",
                scale=alt.Scale(domain=codes, scheme="tableau20"),
                legend=alt.Legend(labelLimit=0, symbolLimit=0, orient="bottom", columns=2),
            ),
            tooltip=["reviewer:N", "code:N", "count:Q", alt.Tooltip("share:Q", format=".0%")],
        )
    )


def confusion_rows(
    cells: list[ConfusionCell], reviewer_a: str, reviewer_b: str
) -> list[dict[str, Any]]:
    """The confusion chart's data: each cell's codes under the reviewers' names and as
    ``a`` and ``b``, and its count."""
    return [
        {reviewer_a: cell.a, reviewer_b: cell.b, "a": cell.a, "b": cell.b, "count": cell.count}
        for cell in cells
    ]


def confusion_chart(
    matrix: list[ConfusionCell], reviewer_a: str, reviewer_b: str
) -> alt.LayerChart:
    rows = confusion_rows(matrix, reviewer_a, reviewer_b)
    base = alt.Chart(alt.Data(values=rows)).encode(
        x=alt.X(
            "a:N",
            title=reviewer_a,
            axis=alt.Axis(labelLimit=0, labelAngle=-40, labelOverlap=False),
        ),
        y=alt.Y("b:N", title=reviewer_b, axis=alt.Axis(labelLimit=0, labelOverlap=False)),
    )
    cells = base.mark_rect().encode(
        color=alt.Color("count:Q", scale=alt.Scale(scheme="oranges")),
        tooltip=["a:N", "b:N", "count:Q"],
    )
    return cast(alt.LayerChart, alt.layer(cells, base.mark_text().encode(text="count:Q")))


def _rounded(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


_STATES = {"partial": "stopped", "complete": "complete", "failed": "failed", "running": "running"}


def judge_test_rows(runs: Sequence[JudgeRunReport]) -> list[dict[str, Any]]:
    """One row per judge run: may it replace a reviewer (the alternative annotator test)."""
    rows = []
    for run in runs:
        alt_test = AltTestResult.from_dict(run["alt_test"])
        vs_gold = run["vs_gold"]
        rows.append(
            {
                "run": run["name"],
                "state": _STATES.get(run["status"], run["status"])
                if run["source"] != "import"
                else "imported",
                "replaces a reviewer?": (alt_test.verdict or "not tested").split(":", 1)[0],
                "winning rate": _rounded(alt_test.winning_rate),
                "advantage": _rounded(alt_test.advantage_probability),
                "gold turns": None if vs_gold is None else vs_gold["kappa"]["n"],
                "errors": run["errors"],
            }
        )
    return rows


def judge_metric_rows(runs: Sequence[JudgeRunReport]) -> list[dict[str, Any]]:
    """One row per judge run: its agreement with gold, rounded for reading."""
    rows: list[dict[str, Any]] = []
    for run in runs:
        vs_gold = run["vs_gold"]
        rows.append(
            {
                "run": run["name"],
                **{
                    title: _rounded(None if vs_gold is None else vs_gold[key]["value"])
                    for title, key in _METRICS.items()
                },
            }
        )
    return rows


_METRICS: dict[str, Literal["kappa", "break_kappa", "precision", "recall", "f1", "tnr"]] = {
    "kappa": "kappa",
    "break kappa": "break_kappa",
    "precision": "precision",
    "recall": "recall",
    "F1": "f1",
    "TNR": "tnr",
}
"""The columns of :func:`judge_metric_rows`: title -> figure of ``vs_gold``."""


def alt_test_rows(alt_test: AltTestJson) -> list[dict[str, Any]]:
    """The alternative annotator test per reviewer: tested ones, then skipped ones.

    p-values are rounded for reading (``p < 0.001``); the exact ones are in the JSON.
    """
    rows: list[dict[str, Any]] = [
        {
            "reviewer": test.reviewer,
            "units": test.units,
            "p-value": readings.format_p(test.p_value),
            "judge wins": "yes" if test.rejected else "no",
            "advantage": _rounded(test.advantage_probability),
            "note": "",
        }
        for test in map(ReviewerTest.from_dict, alt_test["reviewers"])
    ]
    rows.extend(
        {
            "reviewer": skipped.reviewer,
            "units": skipped.units,
            "p-value": "—",
            "judge wins": "—",
            "advantage": "—",
            "note": skipped.reason,
        }
        for skipped in map(SkippedReviewer.from_dict, alt_test["skipped"])
    )
    return rows


def threshold_chart(sweep: ThresholdSweepJson) -> alt.LayerChart:
    rows: list[dict[str, Any]] = []
    for point in ThresholdSweep.from_dict(sweep).points:
        for metric, value in (("kappa", point.kappa), ("f1", point.f1)):
            if value is not None:
                rows.append(
                    {
                        "threshold": point.threshold,
                        "metric": metric,
                        "value": value,
                        "best": point.is_best,
                    }
                )
    low = min([0.0, *(row["value"] for row in rows)])
    base = alt.Chart(alt.Data(values=rows)).encode(
        x=alt.X("threshold:Q", scale=alt.Scale(domain=[0, 1])),
        y=alt.Y("value:Q", title="kappa / F1", scale=alt.Scale(domain=[low, 1])),
        color=alt.Color("metric:N", legend=EVERY_ENTRY),
    )
    layers = [base.mark_line(point=True)]
    if any(row["best"] for row in rows):  # an empty layer logs "Infinite extent"
        layers.append(
            base.transform_filter("datum.best").mark_point(size=120, filled=True, shape="diamond")
        )
    return cast(alt.LayerChart, alt.layer(*layers))


def reliability_chart(reliability: ReliabilityJson) -> alt.LayerChart:
    rows = [
        {"predicted": b.mean_predicted, "observed": b.observed_frequency, "count": b.count}
        for b in ReliabilityReport.from_dict(reliability).bins
    ]
    diagonal = (
        alt.Chart(alt.Data(values=[{"x": 0, "y": 0}, {"x": 1, "y": 1}]))
        .mark_line(strokeDash=[4, 4], color="gray")
        .encode(x="x:Q", y="y:Q")
    )
    points = (
        alt.Chart(alt.Data(values=rows))
        .mark_line(point=True)
        .encode(
            x=alt.X("predicted:Q", scale=alt.Scale(domain=[0, 1]), title="mean predicted break"),
            y=alt.Y("observed:Q", scale=alt.Scale(domain=[0, 1]), title="observed break rate"),
            tooltip=["predicted:Q", "observed:Q", "count:Q"],
        )
    )
    return cast(alt.LayerChart, alt.layer(diagonal, points))


def version_difference_rows(
    differences: list[VersionDifferenceJson], columns: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """Units where prompt versions differ, flattened for a table. ``columns`` (run name ->
    column title) keeps those runs only, and the units where they differ."""
    rows = []
    for item in differences:
        codes = item["codes"]
        if columns is not None:
            codes = {columns[name]: code for name, code in codes.items() if name in columns}
            if len(set(codes.values())) < 2:
                continue
        unit = item["unit"]
        assert isinstance(unit, list)  # a (case_id, turn) unit
        case_id, turn = unit
        rows.append(
            {
                "case_id": str(case_id),
                "turn": int(cast(int, turn)),
                "gold": item["reference"] or "—",
                **{str(name): code for name, code in sorted(codes.items())},
            }
        )
    return rows


def drift_rows(report: DriftReport) -> list[dict[str, Any]]:
    """Break rate by answer position per source (gold, each run), for the drift chart."""
    rows = []
    for source in report["sources"]:
        for row in source["by_position"]:
            ci = row["ci95"]
            rows.append(
                {
                    "source": source["name"],
                    "answers": row["bin"],
                    "rate": row["rate"],
                    "low": None if ci is None else ci[0],
                    "high": None if ci is None else ci[1],
                    "units": row["units"],
                }
            )
    return rows


def drift_chart(report: DriftReport) -> alt.LayerChart:
    """Break rate by answer position bin (an ordinal axis: 1, 2, 3-4, 5-8, 9+) with
    conversation-bootstrap intervals, one colour per source, every source in the legend."""
    rows = drift_rows(report)
    order: list[str] = []
    for source in report["sources"]:
        for row in source["by_position"]:
            if row["bin"] not in order:
                order.append(row["bin"])
    order.sort(key=lambda label: int(label.split("-")[0].rstrip("+")))
    base = alt.Chart(alt.Data(values=rows)).encode(
        x=alt.X(
            "answers:O",
            sort=order,
            title="assistant answer in the conversation (1st, 2nd, 3rd-4th, ...)",
            axis=alt.Axis(labelAngle=0, labelLimit=0),
        ),
        xOffset=alt.XOffset("source:N"),
        color=alt.Color("source:N", title=None, legend=EVERY_ENTRY),
    )
    points = base.mark_point(filled=True, size=70).encode(
        y=alt.Y("rate:Q", title="share breaking the role", axis=alt.Axis(format="%")),
        tooltip=[
            "source:N",
            "answers:N",
            alt.Tooltip("rate:Q", format=".1%"),
            alt.Tooltip("low:Q", format=".1%"),
            alt.Tooltip("high:Q", format=".1%"),
            "units:Q",
        ],
    )
    band = (
        base.transform_filter("datum.low != null")
        .mark_rule(strokeWidth=2)
        .encode(y=alt.Y("low:Q"), y2="high:Q")
    )
    return cast(alt.LayerChart, alt.layer(band, points).properties(height=260))


def _group_figure(value: float | None, units: int) -> str:
    """A coefficient of one group as text: too few units or none is never a number."""
    if units < readings.MIN_UNITS:
        return "not enough data"
    return "undefined: all alike" if value is None else f"{value:.2f}"


def drift_agreement_rows(report: DriftReport) -> list[dict[str, Any]]:
    """Reviewer alpha and each run's kappa against gold by position bin and by role; a
    run's column is named by its prompt version and model, never by its id."""
    names = {
        str(source["run"]): source["name"]
        for source in report["sources"]
        if source["source"] == "run"
    }
    agreement = report["agreement"]
    groups: list[tuple[str, str, AgreementFigures]] = [
        *(("answers", row["bin"], row) for row in agreement["by_position"]),
        *(("role", row["role"], row) for row in agreement["by_role"]),
    ]
    rows = []
    for by, group, row in groups:
        units = row["units"]
        rows.append(
            {
                "by": by,
                "group": group,
                "turns": units,
                "reviewer alpha": _group_figure(row["reviewer_alpha"], units),
                **{
                    f"judge kappa, {names.get(run, 'run')}": _group_figure(k, units)
                    for run, k in row["judge_kappa"].items()
                },
            }
        )
    return rows


def coverage_chart(curve: CoverageCurve, alpha: float) -> alt.LayerChart:
    """Coverage (share of turns the judge decides) against alpha, the chosen alpha marked."""
    rows = [
        {"alpha": p["alpha"], "coverage": p["coverage"], "chosen": p["alpha"] == alpha}
        for p in curve["points"]
        if p["coverage"] is not None
    ]
    base = alt.Chart(alt.Data(values=rows)).encode(
        x=alt.X("alpha:Q", title="alpha: most disagreement with gold allowed"),
        y=alt.Y(
            "coverage:Q",
            scale=alt.Scale(domain=[0, 1]),
            title="share the judge decides",
            axis=alt.Axis(format="%"),
        ),
    )
    layers = [base.mark_line(point=True)]
    if any(row["chosen"] for row in rows):
        layers.append(base.transform_filter("datum.chosen").mark_point(size=140, filled=True))
    return cast(alt.LayerChart, alt.layer(*layers))
