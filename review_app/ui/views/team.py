"""Team: everyone's progress, assigning cases, drawing audit samples, and (admins)
people and roles, without a terminal. Each form calls the service its command calls.

Nothing that changes rights is preselected: the rights form opens with nobody and no
change chosen, and every change is previewed (who, what they lose, their open
assignments) and confirmed before it applies; the services refuse an admin's own
deactivation or demotion and the last admin's. Assignments and audit draws are
previewed as (case, reviewer) pairs before they apply, and every outcome stays on the
page in the result panel until it is dismissed."""

from __future__ import annotations

from typing import Any

import streamlit as st

from review_app.errors import InputError, NotFound, PermissionDenied
from review_app.services.access.actors import ROLES
from review_app.services.cases.case_views import LANES
from review_app.services.judging.run_defaults import run_choices
from review_app.services.judging.runs import list_judge_runs
from review_app.services.judging.uncertainty_audit import (
    draw_uncertainty_sample,
    preview_uncertainty_sample,
)
from review_app.services.team.audit_samples import draw_audit_sample
from review_app.services.team.people import (
    add_person,
    deactivate_person,
    reactivate_person,
    set_role,
)
from review_app.services.team.queue import (
    MODE_WORDS,
    AssignmentReport,
    assign_cases,
    plan_assignment,
)
from review_app.services.team.rights import preview_rights_change
from review_app.services.team.team import team_view
from review_app.ui import cached, common, reviewer_figures
from review_app.ui.safe import error_text, escape

actor = common.policy_owner("The team page is for policy owners and admins.")
rubric = common.rubric_page("Team")
engine = cached.engine()
REFUSED = (InputError, NotFound, PermissionDenied)
SHOWN_PAIRS = 500  # pairs a preview lists (its line counts them all)


def result(title: str, *lines: str, pairs: tuple[tuple[str, str], ...] = ()) -> None:
    """Keep an outcome for the result panel (shown until dismissed), then redraw."""
    st.session_state["team_result"] = {"title": title, "lines": list(lines), "pairs": pairs}
    st.rerun()


def pair_rows(pairs: tuple[tuple[str, str], ...]) -> list[dict[str, str]]:
    return [{"case": case_id, "reviewer": name} for case_id, name in pairs[:SHOWN_PAIRS]]


def show_pairs(pairs: tuple[tuple[str, str], ...], *, key: str) -> None:
    if not pairs:
        return
    st.dataframe(pair_rows(pairs), hide_index=True, key=key)
    if len(pairs) > SHOWN_PAIRS:
        st.caption(f"The first {SHOWN_PAIRS:d} of {len(pairs):d} pairs.")


team = team_view(engine, actor, rubric=rubric)
st.info(escape(team.next_step()), icon=":material/lightbulb:")

shown: dict[str, Any] | None = st.session_state["team_result"]
if shown is not None:
    with st.container(border=True, key="team_result_panel"):
        st.markdown("**Last change on this page**")
        st.success(escape(shown["title"]), icon=":material/task_alt:")
        for line in shown["lines"]:
            st.text(line)
        show_pairs(shown["pairs"], key="team_result_pairs")
        if st.button("Dismiss", key="team_result_dismiss"):
            st.session_state["team_result"] = None
            st.rerun()

st.dataframe(
    [
        {
            "person": m.name,
            "role": m.role.replace("_", " "),
            "active": m.active,
            "assigned": m.assigned,
            "finished": m.finished,
            "open": m.open,
        }
        for m in team.members
    ],
    hide_index=True,
    key="team_progress",
)
st.caption(
    f"Cases under {escape(team.rubric)}: {team.cases:d} stored, "
    f"{team.unassigned_cases:d} in nobody's queue. A case is finished when its reviewer "
    "has labeled every turn."
)
reviewer_names = [m.name for m in team.members if m.active]
reliability_shown = reviewer_figures.reliability(engine, actor, rubric)
reviewer_figures.draw_reliability(reliability_shown, key="team")
common.report_notice(reliability_shown)

# --- assigning ----------------------------------------------------------------------------

st.subheader("Assign cases")
st.radio(
    "How",
    ["add", "fill"],
    index=None,
    format_func=lambda mode: MODE_WORDS[mode],
    key="team_assign_mode",
    help="Fill counts everyone already assigned to a case: a case with N or more reviewers "
    "gets nobody new. Add gives each chosen reviewer every chosen case they do not have yet.",
)
st.multiselect("Reviewers", reviewer_names, key="team_assign_reviewers")
left, right = st.columns(2)
left.selectbox(
    "Cases",
    ["all", *LANES],
    format_func=lambda v: "all cases" if v == "all" else f"lane {v}",
    key="team_assign_lane",
)
mode = st.session_state["team_assign_mode"]
if mode == "fill":
    right.number_input(
        "N: reviewers each case should have in all",
        min_value=1,
        value=2,
        key="team_assign_n",
        help="Two or more let agreement be measured. Everyone already assigned counts.",
    )
request = {
    "mode": mode,
    "reviewers": tuple(st.session_state["team_assign_reviewers"]),
    "lane": common.chosen("team_assign_lane"),
    "overlap": int(st.session_state["team_assign_n"]) if mode == "fill" else None,
}
preview_cell, apply_cell = st.columns(2)
if preview_cell.button("Preview the pairs", key="team_assign_preview"):
    st.session_state["team_assign_planned"] = None
    if mode is None:
        st.error("Choose how to assign: add these reviewers, or fill each case up to N.")
    else:
        try:
            planned = plan_assignment(
                engine,
                actor,
                rubric=rubric,
                reviewers=list(request["reviewers"]),
                mode=mode,
                overlap=request["overlap"],
                lane=request["lane"],
            )
        except REFUSED as error:
            st.error(error_text(error))
        else:
            st.session_state["team_assign_planned"] = (request, planned)
kept = st.session_state["team_assign_planned"]
planned_now: AssignmentReport | None = kept[1] if kept and kept[0] == request else None
if planned_now is not None:
    st.markdown(escape(planned_now.line()))
    show_pairs(planned_now.pairs, key="team_assign_pairs")
elif mode is not None:
    st.caption("Preview the pairs first: Apply assigns exactly the pairs previewed.")
if (
    apply_cell.button("Apply", key="team_assign", type="primary", disabled=planned_now is None)
    and planned_now is not None
):
    try:
        report = assign_cases(
            engine,
            actor,
            rubric=rubric,
            reviewers=list(request["reviewers"]),
            mode=str(mode),
            overlap=request["overlap"],
            lane=request["lane"],
        )
    except REFUSED as error:
        st.error(error_text(error))
    else:
        st.session_state["team_assign_planned"] = None
        moved = (
            []
            if report.pairs == planned_now.pairs
            else ["The queues changed since the preview: these are the pairs assigned."]
        )
        result(report.line(), *moved, pairs=report.pairs)

# --- audits -------------------------------------------------------------------------------

st.subheader("Draw an audit sample")
st.caption(
    "Turns drawn uniformly at random and queued for the reviewers: the random sample the "
    "judge's break-rate estimate and its certified guarantees rest on. The judge page's "
    "budget line says how many more audited turns would halve the interval."
)
with st.form("team_audit_form"):
    st.number_input("Turns to draw", min_value=1, value=50, key="team_audit_size")
    st.number_input("Seed", min_value=0, value=0, key="team_audit_seed")
    st.multiselect("Reviewers", reviewer_names, key="team_audit_reviewers")
    st.number_input(
        "Fill each drawn case up to N reviewers", min_value=1, value=2, key="team_audit_overlap"
    )
    if st.form_submit_button("Draw and assign", key="team_audit", type="primary"):
        try:
            audit = draw_audit_sample(
                engine,
                actor,
                rubric=rubric,
                size=int(st.session_state["team_audit_size"]),
                seed=int(st.session_state["team_audit_seed"]),
                reviewers=list(st.session_state["team_audit_reviewers"]),
                overlap=int(st.session_state["team_audit_overlap"]),
            )
        except REFUSED as error:
            st.error(error_text(error))
        else:
            result(audit.line(), pairs=audit.assignment.pairs)

st.subheader("Draw audits by the judge's uncertainty")
st.caption(
    "Each turn the run judged is drawn with its own chance, higher where the judge is "
    "unsure (score near 0.5), plus a uniform share; each chance is recorded, and `judge "
    "estimate` then gives the active estimate of the break rate (as `review-app assign "
    "--by-uncertainty`)."
)
choices = run_choices(engine, actor, rubric=rubric)
run_names = {run.id: f"{run.name} (run {run.id}, {run.state_text})" for run in choices.runs}
if not choices.runs:
    st.info("No judge run for this rubric version yet: the chances come from a run's scores.")
else:
    run_ids = list(run_names)
    st.selectbox(
        "Judge run",
        run_ids,
        # only a complete run is a default (the team's judge, else the newest complete one)
        index=None if choices.default is None else run_ids.index(choices.default.id),
        format_func=lambda run_id: run_names.get(run_id, str(run_id)),
        placeholder="choose the run whose scores set the chances",
        key="team_uncertain_run",
    )
    if choices.default is not None and choices.why:
        st.caption(f"Chosen by default: {escape(choices.why)}.")
    cells = st.columns(3)
    cells[0].number_input(
        "Expected turns", min_value=1, value=50, key="team_uncertain_size",
        help="The expected size: each turn is drawn on its own, so the count varies.",
    )  # fmt: skip
    cells[1].number_input(
        "Uniform share", min_value=0.0, max_value=1.0, value=0.5, step=0.1,
        key="team_uncertain_mix",
        help="0: chances follow the judge's uncertainty only; 1: a uniform draw.",
    )  # fmt: skip
    cells[2].number_input("Seed", min_value=0, value=0, key="team_uncertain_seed")
    st.multiselect("Reviewers", reviewer_names, key="team_uncertain_reviewers")
    st.number_input(
        "Fill each drawn case up to N reviewers", min_value=1, value=2,
        key="team_uncertain_overlap",
    )  # fmt: skip
    chosen_run = st.session_state["team_uncertain_run"]
    draw_request = {
        "run_id": chosen_run,
        "size": int(st.session_state["team_uncertain_size"]),
        "mix": float(st.session_state["team_uncertain_mix"]),
        "seed": int(st.session_state["team_uncertain_seed"]),
        "reviewers": list(st.session_state["team_uncertain_reviewers"]),
        "overlap": int(st.session_state["team_uncertain_overlap"]),
    }
    cell_preview, cell_draw = st.columns(2)
    if cell_preview.button("Preview the draw", key="team_uncertain_preview"):
        st.session_state["team_uncertain_planned"] = None
        if chosen_run is None:
            st.error("Choose the judge run first.")
        else:
            try:
                drawn = preview_uncertainty_sample(
                    engine, actor, rubric=rubric, **dict(draw_request, run_id=int(chosen_run))
                )
            except REFUSED as error:
                st.error(error_text(error))
            else:
                st.session_state["team_uncertain_planned"] = (draw_request, drawn)
    kept_draw = st.session_state["team_uncertain_planned"]
    previewed = kept_draw[1] if kept_draw and kept_draw[0] == draw_request else None
    if previewed is not None:
        st.markdown(escape(previewed.line()))
        if previewed.earlier is not None:
            st.warning(escape(previewed.earlier.sentence(previewed.seed, same_turns=True)))
        if previewed.assignment is not None:
            show_pairs(previewed.assignment.pairs, key="team_uncertain_pairs")
    if (
        cell_draw.button(
            "Draw and assign", key="team_uncertain", type="primary", disabled=previewed is None
        )
        and previewed is not None
    ):
        try:
            sample = draw_uncertainty_sample(
                engine, actor, rubric=rubric, **dict(draw_request, run_id=int(chosen_run))
            )
        except REFUSED as error:
            st.error(error_text(error))
        else:
            st.session_state["team_uncertain_planned"] = None
            result(
                sample.line(),
                pairs=sample.assignment.pairs if sample.assignment is not None else (),
            )

reviewer_figures.draw_stratified_audit(
    engine,
    actor,
    rubric,
    [
        {"id": run.id, "name": f"{run.name} (run {run.id}, {run.status})"}
        for run in list_judge_runs(engine, actor, rubric=rubric)
    ],
    reviewer_names,
)

# --- people (admins) ----------------------------------------------------------------------

if actor.has_role("admin"):
    st.subheader("People")
    members = {m.name: m for m in team.members}
    with st.form("team_add_form"):
        st.text_input("Name (the sign-in name)", key="team_add_name")
        st.selectbox(
            "Role",
            ROLES,
            index=None,
            format_func=lambda role: role.replace("_", " "),
            placeholder="choose a role",
            key="team_add_role",
        )
        if st.form_submit_button("Add this person", key="team_add"):
            name = st.session_state["team_add_name"]
            role = st.session_state["team_add_role"]
            if role is None:
                st.error("Choose the new person's role.")
            elif name.strip().casefold() in members:
                st.error("This person is on the team already: change their rights below.")
            else:
                try:
                    person = add_person(engine, actor, name=name, role=role)
                except REFUSED as error:
                    st.error(error_text(error))
                else:
                    result(f"{person.name} added as {person.role.replace('_', ' ')}")

    st.markdown("**Change someone's rights**")
    st.caption(
        "Nothing is chosen to begin with. A deactivation or demotion names what the person "
        "loses and waits for your confirmation; nobody may deactivate or demote themselves, "
        "and the last active admin stays."
    )
    cells = st.columns(3)
    cells[0].selectbox(
        "Person",
        list(members),
        index=None,
        placeholder="choose a person",
        key="team_rights_name",
    )
    cells[1].selectbox(
        "Change",
        ["deactivate", "reactivate", "role"],
        index=None,
        format_func=lambda change: "change role" if change == "role" else change,
        placeholder="choose a change",
        key="team_rights_change",
    )
    change = st.session_state["team_rights_change"]
    if change == "role":
        cells[2].selectbox(
            "New role",
            ROLES,
            index=None,
            format_func=lambda role: role.replace("_", " "),
            placeholder="choose a role",
            key="team_rights_role",
        )
    rights_request = (
        st.session_state["team_rights_name"],
        change,
        st.session_state.get("team_rights_role") if change == "role" else None,
    )
    if st.button("Review this change", key="team_rights_review"):
        st.session_state["team_rights_pending"] = None
        who, what, new_role = rights_request
        if who is None or what is None or (what == "role" and new_role is None):
            st.error("Choose a person and a change first; nothing was changed.")
        else:
            try:
                preview = preview_rights_change(engine, actor, name=who, change=what, role=new_role)
            except REFUSED as error:
                st.error(error_text(error))
            else:
                st.session_state["team_rights_pending"] = (rights_request, preview)
    pending = st.session_state["team_rights_pending"]
    if pending is not None and pending[0] == rights_request:
        preview = pending[1]
        if preview.refusal is not None:
            st.error(escape(preview.sentence()))
        else:
            if preview.loses_rights:
                st.warning(escape(preview.sentence()), icon=":material/warning:")
            else:
                st.info(escape(preview.sentence()))
            verb = {"deactivate": "deactivate", "reactivate": "reactivate", "role": "change"}
            yes, no = st.columns(2)
            if yes.button(
                f"Yes, {escape(verb[preview.change])} {escape(preview.name)}",
                key="team_rights_confirm",
                type="primary",
            ):
                st.session_state["team_rights_pending"] = None
                try:
                    if preview.change == "deactivate":
                        line = deactivate_person(engine, actor, name=preview.name).line()
                    elif preview.change == "reactivate":
                        line = reactivate_person(engine, actor, name=preview.name).line()
                    else:
                        assert preview.new_role is not None
                        set_role(engine, actor, name=preview.name, role=preview.new_role)
                        line = f"{preview.name}: now {preview.new_role.replace('_', ' ')}"
                except REFUSED as error:
                    st.error(error_text(error))
                else:
                    result(line, preview.sentence())
            if no.button("Cancel", key="team_rights_cancel"):
                st.session_state["team_rights_pending"] = None
                st.rerun()
