"""Reviewer reliability, agreement over time, the break rate by stratum and audits placed by
stratum, as the team, agreement and judge pages show them: one sentence per figure and
the next step. Each draws from one service report (stored per state of the data:
review_app/services/reports/report_store.py) and holds no statistics of its own."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import altair as alt
import streamlit as st
from sqlalchemy import Engine

from review_app.agreement.over_time import PeriodJson
from review_app.agreement.reliability import ReviewerReliabilityJson
from review_app.errors import InputError, NotFound, PermissionDenied
from review_app.rubrics.model import Rubric
from review_app.services.access.actors import Actor
from review_app.services.judging.judge_report import JudgeRunReport
from review_app.services.judging.strata import STRATA_BY, StratifiedBlock
from review_app.services.judging.stratified_audit import (
    AllocationPlan,
    allocation_plan,
    draw_stratified_sample,
)
from review_app.services.reports import report_store
from review_app.services.reports.report_store import Shown
from review_app.services.review.reliability import (
    RELIABILITY_RULES,
    OverTimeReport,
    ReliabilityReport,
)
from review_app.stats.core import Estimate
from review_app.ui import charts
from review_app.ui.safe import error_text, escape

REFUSED = (InputError, NotFound, PermissionDenied)
BY_TEXT = {
    "position": "answer position",
    "lane": "lane",
    "code": "the judge's code",
    "finding": "finding on the turn",
}


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _interval(ci95: Sequence[float] | None, *, percent: bool = False) -> str:
    if not ci95:
        return "—"
    if percent:
        return f"[{_percent(ci95[0])}, {_percent(ci95[1])}]"
    return f"[{ci95[0]:.2f}, {ci95[1]:.2f}]"


# --- reviewer reliability --------------------------------------------------------------


def reliability_rows(report: ReliabilityReport) -> list[dict[str, Any]]:
    """One row per reviewer: labels, accuracy with its interval, below the others."""
    return [
        {
            "reviewer": row["name"],
            "labels": row["n_labels"],
            "accuracy": "—" if row["accuracy"] is None else f"{row['accuracy']:.2f}",
            "95% interval": _interval(row["ci95"]),
            "below the others": "yes" if row["below_others"] else "",
        }
        for row in report["reviewers"]
    ]


def confusion_heatmap(reviewer: ReviewerReliabilityJson) -> alt.LayerChart:
    """A reviewer's confusion matrix: true code (rows) against the code given."""
    rows = [
        {"true": true, "given": given, "probability": round(p, 3)}
        for true, row in reviewer["confusion"].items()
        for given, p in row.items()
    ]
    base = alt.Chart(alt.Data(values=rows)).encode(
        x=alt.X("given:N", title="code given"), y=alt.Y("true:N", title="true code (estimated)")
    )
    cells = base.mark_rect().encode(
        color=alt.Color("probability:Q", scale=alt.Scale(scheme="blues", domain=[0, 1])),
        tooltip=["true:N", "given:N", "probability:Q"],
    )
    return cast(alt.LayerChart, alt.layer(cells, base.mark_text().encode(text="probability:Q")))


def draw_reliability(shown: Shown[ReliabilityReport], *, key: str) -> None:
    """Which reviewer to trust on which codes (``reviewers reliability``)."""
    report = shown.value
    st.subheader("Which reviewer to trust, on which codes")
    if not report["reviewers"]:
        st.info("No labels under this rubric version yet: reliability needs reviewers' labels.")
        return
    headline = st.warning if report["below_others"] else st.markdown
    headline(escape(report["sentence"]))
    st.dataframe(reliability_rows(report), hide_index=True, key=f"{key}_reliability_table")
    st.caption(
        f"Accuracy: the estimated share of a reviewer's labels that are the true code, from "
        f"every label ({report['labels']:d} on {report['units']:d} turns) by Dawid-Skene; "
        f"{report['anchored_units']:d} adjudicated turns fix their true code. Interval: "
        f"{report['resamples']:d} resamples of whole conversations. " + escape(RELIABILITY_RULES)
    )
    for warning in report["warnings"]:
        st.caption(escape(warning))
    with st.expander("What each reviewer mixes up"):
        for row in report["reviewers"]:
            st.markdown(escape(row["sentence"]))
        names = [row["name"] for row in report["reviewers"]]
        chosen = st.selectbox("Confusion matrix of", names, key=f"{key}_reliability_reviewer")
        reviewer = next(row for row in report["reviewers"] if row["name"] == chosen)
        st.vega_lite_chart(spec=charts.vega_lite(confusion_heatmap, reviewer), width="stretch")
        st.caption(
            "Each row is a true code (as estimated): how often this reviewer gives each code "
            "to such turns. Off the diagonal: what they mix up. Next step: talk it through "
            "with them, or sharpen those codes' definitions and examples."
        )


# --- agreement over time ------------------------------------------------------------------


def alpha_periods_chart(report: OverTimeReport) -> alt.LayerChart:
    """Alpha per period and version, publications as vertical rules."""
    order = [p["period"] for p in report["periods"]]
    rows = [
        {"period": p["period"], "version": version, "alpha": alpha.value, "turns": alpha.n}
        for p in report["periods"]
        for version, alpha in _alphas(p)
        if alpha.value is not None and alpha.n >= 30
    ]
    x = alt.X("period:N", sort=order, title=None)
    lines = (
        alt.Chart(alt.Data(values=rows))
        .mark_line(point=True)
        .encode(
            x=x,
            y=alt.Y("alpha:Q", title="Krippendorff's alpha", scale=alt.Scale(domain=[-0.2, 1])),
            color=alt.Color("version:N"),
            tooltip=["period:N", "version:N", "alpha:Q", "turns:Q"],
        )
    )
    marks = [
        {"period": m["period"], "published": m["rubric"]}
        for m in report["publications"]
        if m["period"] is not None
    ]
    rules = (
        alt.Chart(alt.Data(values=marks))
        .mark_rule(strokeDash=[4, 3], color="gray")
        .encode(x=x, tooltip=["published:N"])
    )
    return cast(alt.LayerChart, alt.layer(lines, rules))


def _alphas(period: PeriodJson) -> list[tuple[str, Estimate]]:
    """Each version's alpha in the period."""
    return [(v["rubric"], Estimate.from_dict(v)) for v in period["versions"]]


def gold_periods_chart(report: OverTimeReport) -> alt.Chart:
    """Each reviewer's agreement with adjudicated gold per period."""
    order = [p["period"] for p in report["periods"]]
    rows = [
        {"period": p["period"], "reviewer": r["name"], "agreement": r["value"], "labels": r["n"]}
        for p in report["periods"]
        for r in p["reviewers"]
        if r["value"] is not None and r["n"] >= 10
    ]
    return (
        alt.Chart(alt.Data(values=rows))
        .mark_line(point=True)
        .encode(
            x=alt.X("period:N", sort=order, title=None),
            y=alt.Y("agreement:Q", title="agreement with gold", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("reviewer:N"),
            tooltip=["period:N", "reviewer:N", "agreement:Q", "labels:Q"],
        )
    )


def session_rows(report: OverTimeReport) -> list[dict[str, Any]]:
    """Per reviewer: agreement in a session's first hour and after it."""
    rows = []
    for name, figures in report["session"]["reviewers"].items():
        first = Estimate.from_dict(figures["first_hour"])
        later = Estimate.from_dict(figures["later"])
        change = figures["difference"]["ci95"]
        rows.append(
            {
                "reviewer": name,
                "first hour": _percent(first.value),
                "labels": first.n,
                "after": _percent(later.value),
                "labels after": later.n,
                "change (points)": _interval(None if change is None else [100 * b for b in change]),
                "falls": "yes" if figures["falls"] else "",
            }
        )
    return rows


def draw_over_time(shown: Shown[OverTimeReport], *, key: str) -> None:
    """Is agreement getting better or worse (``agreement --over-time``)."""
    report = shown.value
    st.subheader("Is agreement getting better or worse?")
    if not report["periods"]:
        st.info("No labels yet.")
        return
    st.markdown(escape(report["sentences"][0]))
    if any(alpha.value is not None and alpha.n >= 30 for p in report["periods"]
           for _, alpha in _alphas(p)):  # fmt: skip
        st.vega_lite_chart(spec=charts.vega_lite(alpha_periods_chart, report), width="stretch")
    what = "week" if report["by"] == "week" else f"batch of {report['batch']:d} labels"
    st.caption(
        f"Alpha of the turns completed in each {what} (a turn counts when its last label "
        "comes), per rubric version; dashed lines: a version's publication. Periods with "
        "fewer than 30 turns labeled twice are left out."
    )
    if any(r["n"] >= 10 for p in report["periods"] for r in p["reviewers"]):
        st.vega_lite_chart(spec=charts.vega_lite(gold_periods_chart, report), width="stretch")
        st.caption(
            "Each reviewer's share of labels equal to the adjudicated code, on adjudicated "
            "turns (the disputed ones, so lower than on all turns; its course is what counts). "
            "A reviewer falling behind: read their reliability above."
        )
    else:
        st.caption(
            "No reviewer has 10 labels on adjudicated turns in any period yet: adjudicate "
            "disagreements to see each one's agreement with gold over time."
        )
    sentence = report["sentences"][1]
    (st.warning if report["session"]["falls"] else st.markdown)(escape(sentence))
    rows = session_rows(report)
    if rows:
        st.dataframe(rows, hide_index=True, key=f"{key}_session_table")
    for warning in report["warnings"]:
        st.caption(escape(warning))


# --- the break rate by stratum (judge page) -------------------------------------------------


def strata_rows(block: StratifiedBlock) -> list[dict[str, Any]]:
    """One row per stratum: its share, gold, rate with interval, the judge against gold."""
    rows = []
    for row in block["strata"]:
        kappa = Estimate.from_dict(row["judge_kappa"])
        accuracy = Estimate.from_dict(row["judge_accuracy"])
        if kappa.value is not None:
            agreement = f"kappa {kappa.value:.2f} {_interval(kappa.ci95)}"
        elif accuracy.value is not None:
            share = _interval(accuracy.ci95, percent=True)
            agreement = f"same code {_percent(accuracy.value)} {share}"
        else:
            agreement = "—"
        rows.append(
            {
                "stratum": row["stratum"],
                "share of turns": f"{100 * row['weight']:.0f}%",
                "turns": row["n_units"],
                "with gold": row["n_gold"],
                "lambda": "—" if row["lambda"] is None else f"{row['lambda']:.2f}",
                "break rate": _percent(row["value"]),
                "95% interval": _interval(row["ci95"], percent=True),
                "judge vs gold": agreement,
            }
        )
    return rows


def draw_strata(
    engine: Engine, actor: Actor, rubric: Rubric, run: JudgeRunReport
) -> Shown[StratifiedBlock]:
    """Where the judge fails: the break rate by stratum of one run."""
    st.subheader("Where the judge fails: the break rate by stratum")
    st.segmented_control(
        "Strata",
        ["position", "lane", "code", "finding"],
        key="strata_by",
        format_func=lambda by: BY_TEXT.get(by, by),
    )
    by = st.session_state["strata_by"] or "position"
    shown = report_store.run_strata(engine, actor, rubric=rubric, run_id=run["id"], by=by)
    block = shown.value
    if block["value"] is None:
        st.caption(
            "No estimate by stratum yet: "
            + escape(block["warnings"][-1] if block["warnings"] else "no judged turns")
            + ". Place audits by stratum on the team page."
        )
        return shown
    figure = f"{_percent(block['value'])} {_interval(block['ci95'], percent=True)}"
    st.markdown(
        f"By {escape(BY_TEXT[by])}: the chatbot breaks role on {escape(figure)} of turns, the "
        "strata's own PPI++ estimates weighted by their share of the judged turns (stratified "
        "PPI, Fisch et al. 2024)."
    )
    for sentence in block["sentences"]:
        (st.warning if sentence.startswith("Where ") else st.caption)(escape(sentence))
    st.dataframe(strata_rows(block), hide_index=True, key="judge_strata_table")
    st.caption(
        f"Gold: {escape(block['gold_source'])}. Strata with fewer than 10 turns with gold are "
        "pooled. Next step: where a stratum's interval is wide or its agreement low, place "
        'the next audits there (team page, "Place audits where they count").'
    )
    for warning in block["warnings"]:
        st.caption(escape(warning.removeprefix("WARNING: ")))
    return shown


# --- audits placed by stratum (team page) -------------------------------------------------


def plan_rows(plan: AllocationPlan) -> list[dict[str, Any]]:
    return [
        {
            "stratum": row["stratum"],
            "turns": row["units"],
            "audited so far": row["audited"],
            "spread of the judge's error": "—" if row["spread"] is None else f"{row['spread']:.2f}",
            "to draw": row["allocated"],
            "chance per turn": f"{100 * row['probability']:.1f}%",
        }
        for row in plan.strata
    ]


def draw_stratified_audit(
    engine: Engine, actor: Actor, rubric: Rubric, runs: Sequence[Mapping[str, Any]],
    reviewer_names: list[str],
) -> None:  # fmt: skip
    """Plan K audits by stratum (Neyman allocation), show the plan and what it buys, then
    draw and queue them."""
    st.subheader("Place audits where they count")
    st.caption(
        "Audits drawn by stratum: more where the judge's errors vary most (Neyman "
        "allocation from the audits so far), at least 10 per stratum while they last. Each "
        "turn's chance of being drawn is recorded and the estimates weigh the gold by it."
    )
    if not runs:
        st.info("No judge run for this rubric version yet: strata come from a run's verdicts.")
        return
    names = {run["id"]: run["name"] for run in runs}
    left, middle, right = st.columns([2.4, 1.4, 1])
    left.selectbox(
        "Judge run",
        list(names),
        index=None,
        format_func=lambda run_id: names.get(run_id, str(run_id)),
        placeholder="choose the run whose errors to weigh",
        key="team_strata_run",
    )
    middle.selectbox(
        "Strata", list(STRATA_BY), format_func=lambda by: BY_TEXT[by], key="team_strata_by"
    )
    right.number_input("Turns to draw", min_value=1, value=50, key="team_strata_size")
    run_id = st.session_state["team_strata_run"]
    if run_id is None:
        st.caption("Choose a run to see how the audits would be placed.")
        return
    try:
        plan = allocation_plan(
            engine, actor, rubric=rubric, run_id=int(run_id),
            by=st.session_state["team_strata_by"], size=int(st.session_state["team_strata_size"]),
        )  # fmt: skip
    except REFUSED as error:
        st.error(error_text(error))
        return
    st.dataframe(plan_rows(plan), hide_index=True, key="team_strata_plan")
    st.markdown(escape(plan.budget_line()))
    with st.form("team_strata_form"):
        st.multiselect("Reviewers", reviewer_names, key="team_strata_reviewers")
        st.number_input("Fill each drawn case up to N reviewers", min_value=1, value=2,
                        key="team_strata_overlap")  # fmt: skip
        st.number_input("Seed", min_value=0, value=0, key="team_strata_seed")
        if st.form_submit_button("Draw these audits and assign", key="team_strata", type="primary"):
            try:
                sample = draw_stratified_sample(
                    engine, actor, rubric=rubric, run_id=int(run_id),
                    by=st.session_state["team_strata_by"],
                    size=int(st.session_state["team_strata_size"]),
                    seed=int(st.session_state["team_strata_seed"]),
                    reviewers=list(st.session_state["team_strata_reviewers"]),
                    overlap=int(st.session_state["team_strata_overlap"]),
                )  # fmt: skip
            except REFUSED as error:
                st.error(error_text(error))
            else:
                # the team page's result panel shows it, with the pairs, until dismissed
                st.session_state["team_result"] = {
                    "title": sample.line(),
                    "lines": [],
                    "pairs": sample.assignment.pairs if sample.assignment is not None else (),
                }
                st.rerun()


def reliability(engine: Engine, actor: Actor, rubric: Rubric) -> Shown[ReliabilityReport]:
    return report_store.reviewer_reliability(engine, actor, rubric=rubric)


def over_time(
    engine: Engine, actor: Actor, rubric: Rubric, previous: Rubric | None
) -> Shown[OverTimeReport]:
    return report_store.agreement_over_time(engine, actor, rubric=rubric, previous=previous)
