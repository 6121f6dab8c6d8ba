"""Agreement: do reviewers (and so the rubric) agree, and where not."""

from __future__ import annotations

import streamlit as st

from review_app.ui import cached, charts, common, readings, reviewer_figures
from review_app.ui.safe import escape

actor = common.policy_owner("The agreement dashboard is for policy owners; reviewers label blind.")

st.title("Agreement")
catalog = cached.catalog()
labeled = sorted(ref for ref in catalog.labeled)
if not labeled:
    st.info("No labels yet: agreement needs at least two reviewers' labels on the same turns.")
    st.stop()
if st.session_state["agreement_rubric"] not in labeled:
    st.session_state["agreement_rubric"] = labeled[-1]
st.selectbox("Rubric version", labeled, key="agreement_rubric")
ref = st.session_state["agreement_rubric"]
common.own_work_notice(catalog.for_reports(ref))

reports = {version: cached.dashboard(version).value.report for version in labeled}
shown = cached.dashboard(ref)
drift_shown = cached.drift(ref)
rubric = catalog.for_reports(ref)
reliability_shown = reviewer_figures.reliability(cached.engine(), actor, rubric)
time_shown = reviewer_figures.over_time(cached.engine(), actor, rubric, catalog.previous_of(rubric))
data = shown.value
report = data.report
gold = report["gold"]
st.caption(
    f"{report['units']:d} units · {report['raters']:d} reviewers · {report['ratings']:d} labels "
    f"· adjudicated: {gold['adjudicated']:d} units · unanimous: {gold['unanimous']:d} units · "
    f"{gold['in_disagreement']:d} in disagreement · {gold['single_rater']:d} with one reviewer"
)
st.subheader(escape(readings.alpha_sentence(report)))
common.report_notice(shown, drift_shown, reliability_shown, time_shown)

if report.get("carried_units"):
    st.caption(
        f"{report['carried_units']:d} of these units hold labels carried from the version "
        "before (same or reworded codes)."
    )
versions = report.get("versions")
if versions:
    st.subheader(f"Versions side by side, on the {versions['units']:d} units both have")
    st.dataframe(
        [
            {
                "version": compared["rubric"],
                **{
                    name.replace("_", " "): readings.figure_text(compared[name])
                    for name in (
                        "percent_agreement",
                        "krippendorff_alpha",
                        "fleiss_kappa",
                        "gwet_ac1",
                    )
                },
            }
            for compared in versions["compared"]
        ],
        hide_index=True,
        key="agreement_versions_table",
    )

rows = charts.coefficient_rows(reports)
st.subheader("Coefficients by rubric version")
if rows:
    st.vega_lite_chart(spec=charts.vega_lite(charts.coefficients_chart, rows), width="stretch")
with st.expander("Every coefficient, with its interval and units"):
    st.dataframe(charts.coefficient_table_rows(reports), hide_index=True, key="agreement_table")

left, right = st.columns(2)
with left:
    st.subheader("Cohen's kappa per pair")
    if any(readings.enough(c) for c in report["cohen_kappa"].values()):
        st.vega_lite_chart(
            spec=charts.vega_lite(charts.pairwise_kappa_chart, report["cohen_kappa"]),
            width="stretch",
        )
        st.dataframe(
            charts.pairwise_kappa_rows(report["cohen_kappa"]),
            hide_index=True,
            key="pairwise_kappa_table",
        )
        weakest = readings.weakest_pair_sentence(report["cohen_kappa"])
        if weakest:
            st.markdown(escape(weakest))
        caption = charts.interval_caption(report)
        if caption:
            st.caption(escape(caption))
    else:
        st.info(f"Not enough data: no two reviewers share {readings.MIN_UNITS:d} labeled turns.")
with right:
    st.subheader("Labels per reviewer")
    st.vega_lite_chart(
        spec=charts.vega_lite(charts.distribution_chart, data.distribution), width="stretch"
    )

st.subheader("Per label (one-vs-rest alpha)")
st.dataframe(
    [
        {"label": code, "alpha": readings.figure_text(c), "units": c["n_units"]}
        for code, c in sorted(report["per_label"].items())
    ],
    hide_index=True,
    key="per_label_table",
)

st.subheader("Two reviewers side by side")
if len(data.reviewers) >= 2:
    first, second = st.columns(2)
    if st.session_state["confusion_a"] not in data.reviewers:
        st.session_state["confusion_a"] = data.reviewers[0]
    if st.session_state["confusion_b"] not in data.reviewers:
        st.session_state["confusion_b"] = data.reviewers[1]
    first.selectbox("Reviewer", data.reviewers, key="confusion_a")
    second.selectbox("against", data.reviewers, key="confusion_b")
    matrix = cached.confusion(ref, st.session_state["confusion_a"], st.session_state["confusion_b"])
    if matrix:
        chosen = (st.session_state["confusion_a"], st.session_state["confusion_b"])
        st.vega_lite_chart(
            spec=charts.vega_lite(charts.confusion_chart, matrix, *chosen), width="stretch"
        )
    else:
        st.info("These two reviewers share no labeled turn.")

drift = drift_shown.value
st.subheader("Where in the conversation the role breaks")
for sentence in readings.drift_sentence(drift):
    st.markdown(escape(sentence))
if any(source["by_position"] for source in drift["sources"]):
    st.vega_lite_chart(spec=charts.vega_lite(charts.drift_chart, drift), width="stretch")
    st.caption(
        "Gold beside the team's judge (else the newest complete judge run); reviewer "
        "alpha and the judge's kappa by answer position and role below."
    )
    st.dataframe(charts.drift_agreement_rows(drift), hide_index=True, key="drift_table")

reviewer_figures.draw_reliability(reliability_shown, key="agreement")
reviewer_figures.draw_over_time(time_shown, key="agreement")

cautions = readings.agreement_warnings(report)
if cautions:
    with st.expander(f"Cautions ({len(cautions):d})", expanded=False):
        for caution in cautions:
            st.markdown(f"- {escape(caution)}")

st.subheader("Disagreements")
units = cached.disagreements(ref)
if not units:
    st.success("No open disagreement.")
for unit in units[: common.FIRST_ROWS]:
    common.disagreement_row(unit)
if len(units) > common.FIRST_ROWS:
    st.caption(f"… and {len(units) - common.FIRST_ROWS:,d} more on the adjudication page")
