"""Judge: how far an LLM judge agrees with humans, where it fails, and how to trust its scores."""

from __future__ import annotations

import json

import streamlit as st

from review_app.errors import InputError, PermissionDenied
from review_app.services.exchange.uploads import import_verdict_upload
from review_app.services.judging.judge_report import (
    NotEnoughGold,
    disagreement_explorer,
    fit_run_calibration,
)
from review_app.services.judging.run_defaults import run_choices
from review_app.services.team.audit_samples import draw_audit_sample
from review_app.services.team.people import list_people
from review_app.stats.alt_test import ALT_TEST_SENTENCE
from review_app.ui import (
    cached,
    charts,
    common,
    readings,
    registry,
    reviewer_figures,
    session,
    workbench,
)
from review_app.ui.safe import code_span, escape


def audit_form(key: str, turns: int, label: str) -> None:
    """Draw an audit sample of ``turns`` turns at random and assign it (the next step of
    the decision card and of the selective-judging dial); the outcome stays at the head
    of the page until dismissed (:func:`audit_result_panel`)."""
    with st.form(f"{key}_form", border=False):
        audit_columns = st.columns([1, 2.4, 1, 0.8, 1.6], vertical_alignment="bottom")
        audit_columns[0].number_input("Turns to draw", min_value=1, value=turns, key=f"{key}_size")
        audit_columns[1].multiselect(
            "Reviewers", [p.name for p in list_people(engine)], key=f"{key}_reviewers"
        )
        audit_columns[2].number_input(
            "Reviewers per turn",
            min_value=1,
            value=2,
            key=f"{key}_overlap",
            help="How many of the chosen reviewers label each drawn turn (at most as many "
            "as are chosen).",
        )
        audit_columns[3].number_input(
            "Seed",
            min_value=0,
            value=0,
            key=f"{key}_seed",
            help="The same seed draws the same way; a second draw with it is a new sample "
            "among the turns no earlier sample drew, and the result says which it follows.",
        )
        drawn = audit_columns[4].form_submit_button(escape(label), key=key, type="primary")
    if drawn:
        try:
            audit = draw_audit_sample(
                engine,
                actor,
                rubric=rubric,
                size=int(st.session_state[f"{key}_size"]),
                seed=int(st.session_state[f"{key}_seed"]),
                reviewers=list(st.session_state[f"{key}_reviewers"]),
                overlap=int(st.session_state[f"{key}_overlap"]),
            )
        except (InputError, PermissionDenied) as error:
            st.session_state["judge_audit_result"] = {"key": key, "ok": False, "text": str(error)}
        else:
            st.session_state["judge_audit_result"] = {"key": key, "ok": True, "text": audit.line()}
        st.rerun()


def audit_result_panel() -> None:
    """The last audit draw's outcome, kept at the head of the page until dismissed (the
    form that drew it may be gone: the decision card moves on once the sample waits)."""
    shown = st.session_state["judge_audit_result"]
    if shown is None:
        return
    with st.container(border=True, key="judge_audit_result_panel"):
        if shown["ok"]:
            st.success("Audit sample drawn and assigned.", icon=":material/task_alt:")
        else:
            st.error("Nothing was drawn.")
        st.text(shown["text"])
        if st.button("Dismiss", key="judge_audit_result_dismiss"):
            st.session_state["judge_audit_result"] = None
            st.rerun()


actor = common.policy_owner("Judge calibration is for policy owners.")
rubric = common.rubric_page("Judge calibration")
engine = cached.engine()
st.segmented_control(
    "Show", ["Calibration", "Prompt workbench"], key="judge_view", label_visibility="collapsed"
)
if st.session_state["judge_view"] == "Prompt workbench":
    workbench.draw(engine, actor, rubric)
    st.stop()

audit_result_panel()
with st.expander('Import judge verdicts (CSV or JSONL; docs/reference.md, "Judge verdicts")'):
    st.file_uploader("Verdict file", type=["csv", "jsonl"], key="judge_file")
    st.selectbox(
        "Scores mean",
        ["break", "adherence"],
        key="judge_score_means",
        help="adherence: 1 = stays in role (deepeval, Galtea, Openlayer); stored as 1 - score",
    )
    upload = st.session_state["judge_file"]
    if upload is not None and st.button("Import verdicts", key="judge_import"):
        try:
            summary = import_verdict_upload(
                engine,
                actor,
                name=upload.name,
                data=upload.getvalue(),
                rubric=rubric,
                score_means=st.session_state["judge_score_means"],
            )
        except (InputError, PermissionDenied) as error:
            st.error("Nothing was stored.")
            st.text(str(error))
        else:
            st.success(escape(summary.line()))

shown = cached.judge_report(rubric.ref)
report = shown.value
gold = report["gold"]
st.caption(
    f"Gold labels: {gold['with_gold']:d} units ({gold['adjudicated']:d} adjudicated, "
    f"{gold['unanimous']:d} unanimous); without gold: {gold['in_disagreement']:d} in "
    f"disagreement, {gold['single_rater']:d} with one reviewer."
)
notice = st.container()  # filled at the end, once every report of the page is read
carried = report.get("carried_units") or {}
if carried.get("labels") or carried.get("gold_labels"):
    st.caption(
        f"Carried from the version before: reviewer labels on {carried['labels']:d} units, "
        f"gold on {carried['gold_labels']:d} units."
    )
side = report.get("rubric_versions")
if side and any(compared["runs"] for compared in side["compared"]):
    st.subheader(f"Judge kappa against gold, versions side by side ({side['units']:d} units)")
    st.dataframe(
        [
            {
                "version": compared["rubric"],
                "run": name,
                "kappa": readings.figure_text(figures["kappa"]),
                "units compared": figures["n_compared"],
            }
            for compared in side["compared"]
            for name, figures in compared["runs"].items()
        ],
        hide_index=True,
        key="judge_versions_table",
    )
if not report["runs"]:
    st.info(
        "No judge runs for this rubric version yet: import verdicts above, or run "
        "`review-app judge run`."
    )
    with notice:
        common.report_notice(shown)
    st.stop()

choices = run_choices(engine, actor, rubric=rubric)
labels = {listing.name: listing.picker_label for listing in choices.runs}
names = [r["name"] for r in report["runs"] if r["name"] in labels]
if not st.session_state["judge_run_chosen"] or st.session_state["judge_run"] not in names:
    # Nobody chose a run here: the default (the team's judge, else the newest complete
    # run; never a stopped or failed one).
    st.session_state["judge_run"] = choices.default.name if choices.default else None
    st.session_state["judge_run_chosen"] = False
if choices.team is not None:
    st.caption(escape(choices.team.sentence()))
st.selectbox(
    "Judge run",
    names,
    key="judge_run",
    format_func=lambda name: labels[name],
    on_change=common.mark_chosen,
    args=("judge_run_chosen",),
    placeholder="Choose a run",
)
if st.session_state["judge_run"] is None:
    st.info(
        "No judge run is complete yet, so none is shown by default: choose one above (its "
        "figures rest on the units it judged), or finish a run in the prompt workbench."
    )
    with notice:
        common.report_notice(shown)
    st.stop()
run = next(r for r in report["runs"] if r["name"] == st.session_state["judge_run"])
listing = next(listing for listing in choices.runs if listing.name == run["name"])
st.caption(
    escape(listing.state_text[:1].upper() + listing.state_text[1:])
    + (
        f"; shown by default: {escape(choices.why)}."
        if not st.session_state["judge_run_chosen"] and choices.why
        else "."
    )
)
if not listing.complete:
    st.warning(
        f"This run is not complete ({escape(listing.state_text)}): its figures rest on the "
        "units it judged."
    )

estimate_shown = cached.estimate(rubric.ref, run["id"])
estimate = estimate_shown.value
vs_gold = run["vs_gold"]
alt_test = run["alt_test"]
card = readings.decision_card(alt_test=alt_test, estimate=estimate)
with st.container(border=True, key="judge_decision"):
    st.subheader("May this judge replace a reviewer?")
    {"passed": st.success, "failed": st.error}.get(card.verdict, st.warning)(
        f"{code_span(run['name'])}: {escape(card.answer)}"
    )
    st.markdown(escape(readings.estimate_sentence(estimate)))
    st.caption(escape(card.rests_on))
    budget = readings.budget_sentence(estimate)
    if budget:
        st.caption(escape(budget))
    st.markdown(
        escape(
            readings.kappa_sentence(
                None if vs_gold is None else vs_gold["kappa"], who="Judge kappa"
            )
        )
    )
    if card.next_step is not None and card.audit_turns is not None:
        st.markdown(escape(card.next_step))
        audit_form("judge_audit", card.audit_turns, "Draw and assign")
    if listing.complete and (choices.team is None or not choices.team.matches(listing)):
        workbench.use_as_judge_button(engine, actor, rubric, listing, key="judge_use")
    workbench.run_everywhere_form(engine, actor, rubric, run)
with st.expander("How this estimate is made"):
    st.caption(
        f"PPI++ from {estimate['n_judged']:d} judged turns and {estimate['n_gold']:d} with "
        f"gold ({escape(estimate['gold_source'])})."
    )
    for warning in estimate["warnings"]:
        st.caption(escape(warning.removeprefix("WARNING: ")))

st.subheader("Judge runs")
st.dataframe(charts.judge_test_rows(report["runs"]), hide_index=True, key="judge_tests")
st.dataframe(charts.judge_metric_rows(report["runs"]), hide_index=True, key="judge_table")

st.subheader("Selective judging: where the judge may decide alone")
left, right = st.columns(2)
left.select_slider(
    "alpha: most disagreement with gold on the turns the judge decides",
    options=list(cached.ROUTE_ALPHAS),
    key="judge_route_alpha",
)
right.select_slider(
    "delta: chance the guarantee fails", options=[0.01, 0.05, 0.1, 0.2], key="judge_route_delta"
)
curve_shown = cached.coverage(rubric.ref, run["id"], st.session_state["judge_route_delta"])
curve = curve_shown.value
chosen_alpha = st.session_state["judge_route_alpha"]
dial, to_draw = readings.coverage_sentence(curve, chosen_alpha)
st.markdown(escape(dial))
if to_draw is not None:
    audit_form("judge_dial_audit", to_draw, f"Draw {to_draw:d} audit turns")
elif curve["points"][-1]["thresholds"][0] is not None:
    st.caption("Apply it with `review-app judge route --apply` (docs/reference.md).")
if any(p["coverage"] for p in curve["points"]):
    st.vega_lite_chart(
        spec=charts.vega_lite(charts.coverage_chart, curve, chosen_alpha), width="stretch"
    )
else:
    top = max(cached.ROUTE_ALPHAS)
    st.caption(
        f"No chart: the judge decides nothing at any alpha up to {top:g}. "
        + escape(readings.coverage_sentence(curve, top)[0])
    )
for warning in curve["warnings"]:
    if warning.startswith("WARNING: "):
        text = warning.removeprefix("WARNING: ")
        st.warning(escape(text[:1].upper() + text[1:]))

run_drift_shown = cached.drift(rubric.ref, run["id"])
drift = run_drift_shown.value
st.subheader("Where in the conversation the role breaks")
for sentence in readings.drift_sentence(drift):
    st.markdown(escape(sentence))
if any(source["by_position"] for source in drift["sources"]):
    st.vega_lite_chart(spec=charts.vega_lite(charts.drift_chart, drift), width="stretch")
    with st.expander("Agreement by answer position and role"):
        st.dataframe(charts.drift_agreement_rows(drift), hide_index=True, key="judge_drift_table")

strata_shown = reviewer_figures.draw_strata(engine, actor, rubric, run)

st.subheader("The alternative annotator test")
st.markdown(f"{code_span(run['name'])}: {escape(readings.alt_test_sentence(alt_test))}")
if readings.alt_test_untested(alt_test):
    st.page_link(registry.page("team"), label="Assign overlapping cases on the team page")
like_rows = readings.like_for_like_rows(run.get("like_for_like") or {})
if like_rows:
    st.caption("Like-for-like kappas: the judge and two reviewers on the same turns.")
    st.dataframe(like_rows, hide_index=True, key="judge_like_for_like")
with st.expander("The test in detail"):
    st.caption(escape(ALT_TEST_SENTENCE))
    winning, advantage = alt_test["winning_rate"], alt_test["advantage_probability"]
    if winning is not None and advantage is not None:
        st.caption(
            f"Winning rate {winning:.2f}, advantage probability "
            f"{advantage:.2f}, epsilon {alt_test['epsilon']:.2f}."
        )
    st.dataframe(charts.alt_test_rows(alt_test), hide_index=True, key="judge_alt_test")
    for warning in vs_gold["warnings"] if vs_gold else []:
        st.caption(escape(warning))

scores = run.get("scores")
if scores:
    left, right = st.columns(2)
    with left:
        st.subheader("Threshold sweep")
        st.vega_lite_chart(
            spec=charts.vega_lite(charts.threshold_chart, scores["sweep"]), width="stretch"
        )
    with right:
        st.subheader("Reliability")
        st.vega_lite_chart(
            spec=charts.vega_lite(charts.reliability_chart, scores["reliability"]),
            width="stretch",
        )
        st.caption(escape(readings.reliability_sentence(scores["reliability"], scores["n"])))
    st.selectbox("Calibration method", ["isotonic", "platt"], key="judge_method")
    if st.button("Fit and store a calibration map", key="judge_calibrate"):
        try:
            fitted = fit_run_calibration(
                engine,
                actor,
                rubric=rubric,
                run_id=run["id"],
                method=st.session_state["judge_method"],
            )
        except NotEnoughGold as error:
            st.error(escape(error.sentence))
        except InputError as error:
            st.error("No calibration map was stored: " + escape(error.message))
        else:
            st.success(
                f"Stored. Held-out Brier {fitted.heldout_brier_before:.4f} → "
                f"{fitted.heldout_brier_after:.4f}"
            )
    if scores.get("calibration_map"):
        st.caption(
            "A calibration map is stored with this run; later scores convert to "
            "calibrated probabilities."
        )
else:
    st.caption("This run has no scores: no threshold sweep or reliability diagram.")

versions = report.get("versions")
# Like for like: the complete runs with this run's model and endpoint, one column each.
alike = {
    other.name: other.prompt
    for other in choices.runs
    if other.complete
    and other.same_setup(listing)
    and versions is not None
    and other.name in versions["versions"]
}
if versions and len(alike) >= 2:
    st.subheader("Prompt versions side by side")
    st.caption(
        f"The complete runs with {escape(listing.setup)}, on the units every complete run "
        "judged: the units where their codes differ."
    )
    differences = charts.version_difference_rows(versions["differences"], alike)
    # The first rows only (the units differing grow with the gold labels): the page
    # sends a table of bounded size; the whole list is a download, built when asked.
    st.dataframe(differences[: common.FIRST_ROWS], hide_index=True, key="judge_versions")
    if not differences:
        st.caption("They give the same code on every one of these units.")
    if len(differences) > common.FIRST_ROWS:
        st.caption(
            f"The first {common.FIRST_ROWS:d} of {len(differences):,d} units where the "
            "versions differ; the download holds them all."
        )
        st.download_button(
            "Download every difference (JSON)",
            lambda: json.dumps(differences, indent=2),
            file_name=f"{rubric.id}-prompt-version-differences.json",
            mime="application/json",
            key="judge_versions_download",
        )

if versions is not None and len(alike) < 2:
    st.caption(
        f"Prompt versions side by side: no other complete run has {escape(listing.setup)}; "
        "run another prompt version there in the prompt workbench to set them side by side."
    )

st.subheader("Disagreements with gold")
kinds = ["all", "missed_break", "false_alarm", "wrong_break_kind"]
left, right = st.columns(2)
left.selectbox(
    "Kind",
    kinds,
    key="judge_kind",
    format_func=lambda k: {
        "missed_break": "judge misses a break",
        "false_alarm": "judge flags a clean turn",
    }.get(k, k),
)
right.selectbox("Label", ["all", *rubric.codes], key="judge_label")
rows = disagreement_explorer(
    engine,
    session.actor(),
    rubric=rubric,
    report_run=run,
    kind=common.chosen("judge_kind"),
    label=common.chosen("judge_label"),
    limit=common.FIRST_ROWS,
)
if not rows:
    st.caption("None.")
for item in rows[: common.FIRST_ROWS]:
    with st.container(border=True):
        st.markdown(
            f"{code_span(item['case_id'])} turn {item['turn']:d} · gold "
            f"{code_span(item['gold'])} · judge {code_span(item['judge'])} · "
            f"{escape(item['kind'].replace('_', ' '))}"
        )
        st.page_link(
            registry.page("review"),
            label="Open the conversation",
            query_params={"case": item["case_id"]},
        )
        if item.get("reason"):
            st.text(f"Judge: {item['reason']}")
        humans = item.get("human", [])
        if humans:
            st.caption(
                "Reviewers: "
                + ", ".join(f"{code_span(h['reviewer'])} {code_span(h['label'])}" for h in humans)
            )
        written = [h for h in humans if h["rationale"]]
        for human in written:
            st.text(f"{human['reviewer']} ({human['label']}): {human['rationale']}")
        if humans and not written:
            st.caption("No reviewer wrote a rationale for this turn.")
if len(rows) > common.FIRST_ROWS:
    st.caption(
        f"… and {len(rows) - common.FIRST_ROWS:,d} more: choose a kind or a label to narrow "
        "the list."
    )

st.subheader("Few-shot material for the next prompt version")
examples_shown = cached.few_shot(rubric.ref, run["id"])
examples = examples_shown.value
st.caption(f"{len(examples)} adjudicated contrasting examples (pass / fail / borderline).")
st.download_button(
    "Download examples (JSON)",
    json.dumps(examples, indent=2, sort_keys=True),
    file_name=f"{rubric.id}-few-shot.json",
    mime="application/json",
    key="judge_few_shot",
)
with notice:
    common.report_notice(
        shown, estimate_shown, curve_shown, run_drift_shown, examples_shown, strata_shown
    )
