"""Team: everyone's progress, assigning cases, drawing an audit sample, and (admins)
people and roles, without a terminal. Each form calls the service its command calls."""

from __future__ import annotations

import streamlit as st

from review_app.errors import InputError, NotFound, PermissionDenied
from review_app.services.cases.cases import LANES
from review_app.services.judging.audit_samples import draw_audit_sample
from review_app.services.judging.runs import list_judge_runs
from review_app.services.review.queue import assign_cases
from review_app.services.team.people import (
    ROLES,
    add_person,
    deactivate_person,
    reactivate_person,
    set_role,
)
from review_app.services.team.team import team_view
from review_app.ui import cached, common, reviewer_figures, session
from review_app.ui.safe import error_text, escape

actor = common.policy_owner("The team page is for policy owners and admins.")
rubric = common.rubric_page("Team")
engine = cached.engine()
REFUSED = (InputError, NotFound, PermissionDenied)

team = team_view(engine, actor, rubric=rubric)
st.info(escape(team.next_step()), icon=":material/lightbulb:")
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

st.subheader("Assign cases")
with st.form("team_assign_form"):
    st.multiselect("Reviewers", reviewer_names, key="team_assign_reviewers")
    st.selectbox("Cases", ["all", *LANES], key="team_assign_lane")
    st.number_input(
        "Reviewers per case (overlap)",
        min_value=1,
        max_value=max(1, len(reviewer_names)),
        value=min(2, max(1, len(reviewer_names))),
        key="team_assign_overlap",
        help="Two or more let agreement be measured; cases that already have enough "
        "reviewers are left as they are.",
    )
    if st.form_submit_button("Assign", key="team_assign", type="primary"):
        try:
            report = assign_cases(
                engine,
                actor,
                rubric=rubric,
                reviewers=list(st.session_state["team_assign_reviewers"]),
                overlap=int(st.session_state["team_assign_overlap"]),
                lane=common.chosen("team_assign_lane"),
            )
        except REFUSED as error:
            st.error(error_text(error))
        else:
            session.flash(report.line())
            st.rerun()

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
    st.number_input("Reviewers per case (overlap)", min_value=1, value=2, key="team_audit_overlap")
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
            session.flash(audit.line())
            st.rerun()

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

if actor.has_role("admin"):
    st.subheader("People")
    with st.form("team_add_form"):
        st.text_input("Name (the sign-in name)", key="team_add_name")
        st.selectbox("Role", ROLES, key="team_add_role")
        if st.form_submit_button("Add or change role", key="team_add"):
            name = st.session_state["team_add_name"]
            try:
                if name in {m.name for m in team.members}:
                    set_role(engine, actor, name=name, role=st.session_state["team_add_role"])
                else:
                    add_person(engine, actor, name=name, role=st.session_state["team_add_role"])
            except REFUSED as error:
                st.error(error_text(error))
            else:
                session.flash(f"{name}: {st.session_state['team_add_role'].replace('_', ' ')}")
                st.rerun()
    with st.form("team_active_form"):
        st.selectbox("Person", [m.name for m in team.members], key="team_active_name")
        st.radio(
            "Rights",
            ["deactivate", "reactivate"],
            key="team_active_change",
            horizontal=True,
            help="A deactivated person loses every right from their next action on; "
            "their labels stay.",
        )
        if st.form_submit_button("Apply", key="team_active"):
            change = (
                deactivate_person
                if st.session_state["team_active_change"] == "deactivate"
                else reactivate_person
            )
            try:
                result = change(engine, actor, name=st.session_state["team_active_name"])
            except REFUSED as error:
                st.error(error_text(error))
            else:
                session.flash(result.line())
                st.rerun()
